"""The formats' lines (deploy/results.py format_lines, over_cpu): a run's programs beside its own TorchScript rows,
each speed-up over the CPU row of its precision; the run's document holds the programs' rows and the format's facts."""

import json

import pytest

from deploy.results import format_lines, over_cpu, speedups


def test_speedups_are_over_the_cpu_model_of_the_same_precision():
    """Moved from toolchain/pte_results.py's lines (PteResultRow): the same rule on the run's rows themselves."""
    from tests.executorch_support.device import legacy_result_rows

    run = legacy_result_rows("S") + [_program("S", "fp32-xnnpack", 16.0), _program("S", "int8-xnnpack", 8.0,
                                                                                   status="failed")]
    by = {x.runtime: x.speedup_vs_cpu for x in format_lines(run)}
    assert by["ExecuTorch fp32-xnnpack"] == 2.5 and by["NNAPI quant_full"] == 2.0
    assert by["TorchScript CPU quant_none"] == 1.0 and by["ExecuTorch int8-xnnpack"] is None  # failed: no number
    alone = format_lines([_program("T", "fp32-xnnpack", 16.0)])
    assert [x.speedup_vs_cpu for x in alone] == [None]  # no legacy CPU row of that device: no speed-up invented


def test_nnapis_speedup_and_the_formats_lines_are_one_rule():
    """The CPU vs NNAPI table and the formats' lines read their speed-ups from one function (over_cpu)."""
    from tests.executorch_support.device import legacy_result_rows

    run = legacy_result_rows("S") + [_program("S", "fp32-xnnpack", 16.0)]
    nnapi = {d["mode"]: d["speedup"] for d in speedups(run)}
    lines = {x.runtime: x.speedup_vs_cpu for x in format_lines(run)}
    assert nnapi == {"none": lines["NNAPI quant_none"], "full": lines["NNAPI quant_full"]} == {"none": 40 / 30,
                                                                                             "full": 2.0}
    assert over_cpu(run)[-1] == lines["ExecuTorch fp32-xnnpack"] == 2.5


def test_each_programs_baseline_is_its_own_models_cpu_row():
    """Before: the baseline was the CPU row of the device and precision, whichever model it was of (a run of two
    models compared mobilenetv2's program with resnet's CPU model: 25x here)."""
    from dataclasses import replace

    from tests.executorch_support.device import legacy_result_rows

    other = [replace(r, stem="resnet18", model_file="r-" + r.model_file) for r in legacy_result_rows("S", (400.0, 200.0))]
    resnet = replace(_program("S", "fp32-xnnpack", 100.0), stem="resnet18", model_file="resnet18-fp32-xnnpack.pte")
    lines = format_lines(legacy_result_rows("S") + other + [_program("S", "fp32-xnnpack", 16.0), resnet])
    assert {(x.stem, x.runtime): x.speedup_vs_cpu for x in lines if x.format == "executorch"} == {
        ("mobilenetv2", "ExecuTorch fp32-xnnpack"): 2.5, ("resnet18", "ExecuTorch fp32-xnnpack"): 4.0}
    assert len(format_lines(legacy_result_rows("S") + other + [_program("S", "fp32-xnnpack", 16.0)])) == 5  # 4 + 1


def _facts():
    return {"models": "/m", "build_info": "/b.json", "warmup": 1, "iters": 5, "repeat": 1, "threads": 1,
            "checked": False, "problems": [], "notes": ["n"],
            "operators": [{"serial": "S", "file": "m.pte", "status": "unknown", "reason": "no tracer"}]}


def test_the_runs_document_round_trips_the_executorch_rows_and_facts_and_its_csv_has_every_row(tmp_path):
    """Moved from the ExecuTorch record's round trip: the record is gone, the run's one document holds both."""
    from deploy.results import export
    from toolchain.records import DeployResults, deploy_results_path

    rows = [_program("S", "fp32-xnnpack", 16.0, run_id=1), _program("S", "int8-xnnpack", 8.0, status="failed",
                                                                    run_id=1)]
    paths = export(rows, tmp_path, "run-0001", executorch=_facts())
    back = DeployResults.load(deploy_results_path(tmp_path, "run-0001"))
    assert back.rows == rows and back.executorch == _facts()
    assert len(paths["csv"].read_text().splitlines()) == 1 + len(rows) and "executorch" in paths["csv"].read_text()


def test_a_schema_2_document_is_read_as_a_run_without_executorch(tmp_path):
    """A run document an earlier torchdroid wrote (schema 2: no ExecuTorch format in a run) is read, not refused."""
    from tests.deploy_support.report_rows import row
    from toolchain.records import DeployResults

    path = DeployResults(1, "2026-11-23T10:00:00+00:00", [row("A", "cpu", "ok", 10.0)]).write(tmp_path / "run-0001.json")
    data = json.loads(path.read_text())
    data["schema"] = 2
    for r in data["results"]:
        r.pop("format")
    data.pop("executorch")
    path.write_text(json.dumps(data))
    back = DeployResults.load(path)
    assert [r.format for r in back.rows] == ["torchscript"] and back.executorch == {}


@pytest.mark.parametrize("edit, problem", [
    (lambda d: d["results"][0].update(samples=0), "at least one sample"),
    (lambda d: d["results"][1].update(reason=""), "needs its reason"),
    (lambda d: d["results"][0].update(median_ms=float("nan")), "positive latencies"),
    (lambda d: d["results"][0].update(format="tflite"), "unknown format"),
    (lambda d: d["executorch"]["operators"][0].update(reason=""), "unknown without a reason"),
])
def test_a_run_document_with_a_nonsense_executorch_row_or_fact_is_refused(tmp_path, edit, problem):
    """Moved from the ExecuTorch record's nonsense rows: the run's document refuses them with its remedy."""
    from deploy.results import export
    from toolchain.record_base import RecordMalformed
    from toolchain.records import DeployResults

    rows = [_program("S", "fp32-xnnpack", 16.0, run_id=1), _program("S", "int8-xnnpack", 8.0, status="failed",
                                                                    run_id=1)]
    path = export(rows, tmp_path, "run-0001", executorch=_facts())["json"]
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(RecordMalformed) as e:
        DeployResults.load(path)
    assert problem in e.value.cause and "invoke deploy" in e.value.remedy


def _program(serial, variant, median, status="ok", run_id=7):
    from toolchain.records import ResultRow

    numbers = dict(median_ms=median, p90_ms=median * 1.1, min_ms=median * 0.9, samples=10) if status == "ok" else {}
    return ResultRow(serial, "Virtual Pixel", "sdm670", "11", 30, "arm64-v8a", "mobilenetv2", variant,
                     "none" if variant.startswith("fp32") else "full", variant.split("-")[1], "binary", status,
                     f"mobilenetv2-{variant}.pte", reason="" if status == "ok" else "exited 1", run_id=run_id,
                     format="executorch", **numbers)


def test_the_executorch_lines_join_the_torchscript_rows_of_their_own_run():
    """Moved from tests/integration/test_executorch_deploy.py (it joined the latest.json of an earlier run): the
    speed-ups are over the CPU row of the same device, precision and run."""
    from tests.executorch_support.device import legacy_result_rows

    run = legacy_result_rows("S") + legacy_result_rows("other", cpu_ms=(400.0, 200.0))
    run += [_program("S", "fp32-xnnpack", 16.0), _program("S", "int8-xnnpack", 8.0), _program("S", "fp32-portable", 1.0,
                                                                                              status="failed")]
    lines = format_lines(run)
    assert {x.serial for x in lines} == {"S"}  # "other" ran no program: no lines
    by = {x.runtime: x for x in lines}
    assert by["TorchScript CPU quant_none"].speedup_vs_cpu == 1.0
    assert by["NNAPI quant_none"].speedup_vs_cpu == pytest.approx(40 / 30, rel=1e-3)
    assert by["ExecuTorch fp32-xnnpack"].speedup_vs_cpu == 2.5 and by["ExecuTorch int8-xnnpack"].speedup_vs_cpu == 2.5
    assert by["ExecuTorch fp32-portable"].status == "failed" and by["ExecuTorch fp32-portable"].note == "exited 1"
    assert by["ExecuTorch int8-xnnpack"].to_dict()["precision"] == "int8"


def test_a_program_row_is_a_result_row_of_the_executorch_format():
    from deploy.bench import BenchOptions, ParsedRun, summarize
    from deploy.plan import BinaryPlan
    from deploy.preflight import DeviceFacts
    from deploy.rows import program_row
    from tests.executorch_support.device import write_pte_models
    from toolchain.records import pte_files

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        f = next(p for p in pte_files(write_pte_models(Path(d) / "m")) if p.variant == "int8-xnnpack")
    facts = DeviceFacts.from_props("S", {"ro.product.model": "Pixel", "ro.build.version.sdk": "33"})
    runner = BinaryPlan(Path("executor_runner"), "arm64-v8a", "abc", 16384)
    stats = summarize([ParsedRun(True, [5000.0, 6000.0, 7000.0], None)])
    row = program_row(facts, runner, f, stats, "", BenchOptions(warmup=1, iters=3, repeat=1), traced=True)
    assert (row.format, row.variant, row.backend, row.mode, row.status) == ("executorch", "int8-xnnpack", "xnnpack",
                                                                            "full", "ok")
    assert row.median_ms == 6.0 and row.samples == 3 and row.has_flag("traced") and not row.problems()
    failed = program_row(facts, runner, f, None, "executor_runner exited 1", BenchOptions())
    assert failed.status == "failed" and failed.reason == "executor_runner exited 1" and not failed.problems()


def test_the_report_page_shows_the_consoles_cells_of_each_line_and_two_more_columns(tmp_path):
    """Issue 31 (h25): the page had its own table of a run's formats (its own columns: file, status, min ms) beside
    the console's (deploy/summary.py line_cells); now one row function: the page's cells are the console's, then
    DETAIL_COLUMNS' (min ms, file), a failed line its status in the median's cell in both."""
    import html
    import re

    from deploy.report_html import render
    from deploy.summary import DETAIL_COLUMNS, FORMAT_COLUMNS, formats_section, line_cells
    from tests.executorch_support.device import legacy_result_rows

    run = legacy_result_rows("S") + [_program("S", "fp32-xnnpack", 16.0), _program("S", "int8-xnnpack", 8.0,
                                                                                   status="failed")]
    section = formats_section(tmp_path, run, {})
    page = render(tmp_path / "r.png", tmp_path / "r.html", "t", run, [], section)
    part = page[page.index("<h2 id='executorch'>"):page.index("<h2 id='failures'>")]
    cells = [[html.unescape(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
             for row in re.findall(r"<tr[^>]*>(.*?)</tr>", part)]
    lines = section.devices[0].rows
    assert cells == [FORMAT_COLUMNS + DETAIL_COLUMNS] + [line_cells(x, detail=True) for x in lines]
    assert [c[:len(FORMAT_COLUMNS)] for c in cells[1:]] == [line_cells(x) for x in lines]  # the console's, first
    failed = next(c for c in cells if c[0] == "ExecuTorch int8-xnnpack")
    assert failed[2] == "failed" and failed[-1] == "mobilenetv2-int8-xnnpack.pte"
