"""`invoke report` of a run with both formats: TorchScript CPU, NNAPI and ExecuTorch XNNPACK side by side per
device, speed-ups over the TorchScript CPU model of the same precision and run, a bad ExecuTorch record refused.

The tables come from real runs: `invoke deploy` and `invoke deploy --format torchscript,executorch` onto two virtual
devices over the real adb server, from a user's directory with the defaults (tests/executorch_support/
report_chain.py). Only the malformed and tampered records below are edited by hand.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.deploy_support.fixtures import invoke_cli
from tests.virtual_device.harness import held_dead_port

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")


def _png_height(path) -> int:
    head = open(path, "rb").read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(head[20:24], "big")


def _report(chain, results, *args):
    return invoke_cli(chain.work, "report", "--results", str(results), *args, port=held_dead_port())


def _copy(src, tmp_path):
    """A private copy of a snapshot: `invoke report` writes its PNG, HTML and exports into the results directory."""
    return shutil.copytree(src, tmp_path / "results")


def _json_report(chain, results, *args) -> dict:
    r = _report(chain, results, "--json", *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)  # one document, nothing else on stdout


def test_defaults_show_executorch_beside_the_legacy_rows(executorch_report_chain):
    """`invoke report --run 2` in the user's directory: the run with both formats."""
    chain = executorch_report_chain
    r = invoke_cli(chain.work, "report", "--run", "2", port=held_dead_port())
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())  # a title may wrap (at spaces) in a narrow console
    for serial, model in ((chain.serials["pixel"], "Pixel 3a"), (chain.serials["galaxy"], "Galaxy S10")):
        assert f"{serial}: {model}" in out and "ExecuTorch beside TorchScript CPU and NNAPI" in out
    for runtime in ("TorchScript CPU quant_none", "NNAPI quant_full", "ExecuTorch fp32-xnnpack", "ExecuTorch int8-xnnpack"):
        assert out.count(runtime) == 2, runtime  # one line per device
    assert "ExecuTorch fp32-vulkan" not in out  # never run on a phone: the runner has no Vulkan delegate
    # the chain's runner was built without the event tracer: per operator, every program says unknown and why
    assert out.count("per operator: unknown") == 6 and "built without ExecuTorch's event tracer" in out
    # is the answer right: the chain's programs are stand-in bytes no ExecuTorch runtime runs, so every phone x
    # program is unknown, with the host runtime's reason (the run's verdicts, issue 23 item 2)
    # one list per phone, the programs' verdicts in it beside the models' (h13: it was a second list)
    assert out.count("is the answer right:") == 1
    page = max((chain.work / "build" / "results").glob("report-run-*.html"), key=lambda p: p.stat().st_mtime)
    section = page.read_text().split("id='numerics'")[1].split("<h2")[0]  # the console drops columns: read the page
    assert section.count("<table") == 1 and "0 agree, 0 differ, 14 unknown" in section  # 8 models', 6 programs'
    assert section.count("the host&#x27;s ExecuTorch runtime could not run it") == 6


def test_json_speedups_follow_from_the_reported_runs_medians(executorch_report_chain, tmp_path):
    chain = executorch_report_chain
    data = _json_report(chain, _copy(chain.fresh, tmp_path))
    et = data["executorch"]
    assert et["present"] and et["run_id"] == data["run_id"] == 2
    assert _png_height(data["png"]) > 1300  # the chart has a third panel: the run's ExecuTorch speed-ups
    cpu = {(r["serial"], r["mode"]): r["median_ms"] for r in data["rows"] if r["backend"] == "cpu"}
    assert {d["serial"] for d in et["devices"]} == set(chain.serials.values())
    for table in et["devices"]:
        rows = {r["runtime"]: r for r in table["rows"]}
        base = {"fp32": cpu[(table["serial"], "none")], "int8": cpu[(table["serial"], "full")]}
        # the legacy CPU rows are this run's own medians, and each speed-up is baseline / median of its precision
        assert rows["TorchScript CPU quant_none"]["median_ms"] == base["fp32"]
        assert rows["TorchScript CPU quant_full"]["median_ms"] == base["int8"]
        for name in ("ExecuTorch fp32-xnnpack", "ExecuTorch int8-xnnpack", "NNAPI quant_none", "NNAPI quant_full"):
            row = rows[name]
            assert row["status"] == "ok" and row["median_ms"] > 0
            assert row["speedup_vs_cpu"] == pytest.approx(base[row["precision"]] / row["median_ms"], rel=1e-3)
        assert rows["ExecuTorch int8-xnnpack"]["samples"] == 6  # --iter 6 --repeat 1, the warm-up dropped
    # the Pixel's legacy CPU is slow (SBT_CPU_US=30000): its speed-ups over it are larger than the Galaxy's
    by = {t["serial"]: {r["runtime"]: r for r in t["rows"]} for t in et["devices"]}
    pixel, galaxy = by[chain.serials["pixel"]], by[chain.serials["galaxy"]]
    assert pixel["NNAPI quant_none"]["speedup_vs_cpu"] > galaxy["NNAPI quant_none"]["speedup_vs_cpu"]


def test_a_later_run_without_executorch_rows_shows_none_and_the_run_with_them_still_does(executorch_report_chain,
                                                                                        tmp_path):
    """Before: a later TorchScript-only run drew the ExecuTorch lines of another run (marked stale); now each run
    holds its own rows: run 3 has none (the hint), run 2 still has them."""
    chain = executorch_report_chain
    results = _copy(chain.older, tmp_path)
    r = _report(chain, results)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ExecuTorch beside" not in r.stdout
    assert "no ExecuTorch rows in run 3" in " ".join(r.stdout.split()), r.stdout
    data = _json_report(chain, results)
    assert data["run_id"] == 3 and data["executorch"]["present"] is False
    earlier = _json_report(chain, results, "--run", "2")["executorch"]
    assert earlier["present"] and {d["serial"] for d in earlier["devices"]} == set(chain.serials.values())


def test_without_executorch_results_the_report_is_as_before_plus_one_line(executorch_report_chain, tmp_path):
    chain = executorch_report_chain
    results = _copy(chain.legacy_only, tmp_path)
    r = _report(chain, results)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ExecuTorch beside" not in r.stdout and "mobilenetv2" in r.stdout
    hints = [line for line in r.stdout.splitlines() if "ExecuTorch" in line]
    assert len(hints) == 1 and "invoke deploy --format torchscript,executorch" in hints[0], r.stdout
    data = _json_report(chain, results)
    assert data["executorch"]["present"] is False and _png_height(data["png"]) < 1000  # the two legacy panels only


def _tamper(path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _program(data):
    return next(r for r in data["results"] if r["format"] == "executorch" and r["status"] == "ok")


@pytest.mark.parametrize("name, edit, mentions", [
    ("row without status", lambda d: _program(d).pop("status"), "malformed"),
    ("negative latency", lambda d: _program(d).update(median_ms=-1.0), "positive latencies"),
    ("unknown format", lambda d: _program(d).update(format="tflite"), "unknown format"),
    ("operator table edited", lambda d: d["executorch"]["operators"][0].update(status="great"), "per-operator entry"),
    ("foreign kind", lambda d: d.update(kind="something-else"), "is not a torchdroid.deploy-results record"),
    ("other schema", lambda d: d.update(schema=99), "schema 99"),
])
def test_a_tampered_run_document_is_named_kept_and_its_rows_still_drawn(executorch_report_chain, tmp_path, name,
                                                                         edit, mentions):
    """Moved from the ExecuTorch record's tamper cases (exit 5): the record is gone, the run's one document holds
    the ExecuTorch facts.  An edited document is named with why and its remedy, left as it is, and the ExecuTorch
    rows are still drawn from the results store (they never came from the document)."""
    chain = executorch_report_chain
    results = _copy(chain.fresh, tmp_path)
    doc = results / "run-0002.json"
    _tamper(doc, edit)
    before = doc.read_bytes()
    r = _report(chain, results, "--run", "2")
    out = " ".join(r.stdout.split())
    assert r.returncode == 0, r.stdout + r.stderr
    assert mentions in out and "run-0002.json" in out and "invoke deploy" in out, out
    assert out.count("ExecuTorch fp32-xnnpack") == 2  # one line per device, from the store
    assert doc.read_bytes() == before


def test_a_truncated_run_document_is_named_and_the_rows_still_drawn(executorch_report_chain, tmp_path):
    chain = executorch_report_chain
    results = _copy(chain.fresh, tmp_path)
    path = results / "run-0002.json"
    path.write_bytes(path.read_bytes()[:200])
    data = _json_report(chain, results, "--run", "2")
    assert "cannot be read" in data["numerics_note"] and data["executorch"]["present"]
    assert data["executorch"]["path"] is None  # no facts: no operator tables, no notes
