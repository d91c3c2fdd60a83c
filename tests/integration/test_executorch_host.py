"""The ExecuTorch lane end to end on the host: convert -> .pte + manifest -> host check, per operator, bench.

Real torch.export, real XNNPACK/Vulkan partitioners, real ExecuTorch host runtime; a tiny model keeps it quick
(one session conversion, ~20 s).
"""

import json
import os
import statistics
from pathlib import Path

import pytest

from tests.cli import invoke
from tests.executorch_support.lane import TINY, copy_models, find_pte
from toolchain.errors import RecordError, VerificationError
from toolchain.records import load_section, pte_files
from toolchain.records import ConvertManifest

pytestmark = pytest.mark.slow  # the tiny model as TorchScript and ExecuTorch programs, checked and timed (~60 s in all)

ROOT = Path(__file__).resolve().parents[2]


def test_every_variant_is_written_and_recorded(tiny_lane):
    import executorch.version
    import torch

    out, _, result = tiny_lane
    names = sorted(p.name for p in out.glob("*.pte"))
    assert names == sorted(f"tiny-{v}.pte" for v in ("fp32-xnnpack", "int8-xnnpack", "fp32-portable", "fp32-vulkan"))
    assert not [p for p in out.iterdir() if "partial" in p.name]
    files = {f.variant: f for f in pte_files(out)}
    for f in files.values():
        f.check_hash()
        assert f.extra["format"] == "executorch" and f.path.read_bytes()[4:8] == b"ET12"  # the .pte flatbuffer id
        assert f.executorch["version"] == executorch.version.__version__.split("+")[0]
        assert f.torch["version"].split("+")[0] == torch.__version__.split("+")[0]
        assert f.input.shape == [1, 3, 224, 224] and f.output.shape == [1, 10]
    assert files["fp32-xnnpack"].baseline == "quant_none" and files["int8-xnnpack"].baseline == "quant_full"
    assert "XNNPACKQuantizer" in files["int8-xnnpack"].extra["quantization"]["scheme"]
    assert files["int8-xnnpack"].extra["quantization"]["calibration"]["count"] == 4
    assert not files["fp32-vulkan"].runs_on_host and "VulkanBackend" in files["fp32-vulkan"].extra["host_check"]["reason"]
    assert all(files[v].runs_on_host for v in ("fp32-xnnpack", "int8-xnnpack", "fp32-portable"))
    assert set(result.skipped) == {"qnn", "mediatek", "samsung"}
    assert "mtk_converter" in result.skipped["mediatek"]


def test_the_delegates_differ_in_the_program(tiny_lane):
    """XNNPACK and Vulkan programs carry their delegate's payload; the portable one carries none."""
    out = tiny_lane[0]
    data = {v: find_pte(out, f"tiny-{v}").path.read_bytes() for v in ("fp32-xnnpack", "fp32-portable", "fp32-vulkan")}
    assert b"XnnpackBackend" in data["fp32-xnnpack"] and b"VulkanBackend" in data["fp32-vulkan"]
    assert b"Backend" not in data["fp32-portable"]


def test_legacy_and_executorch_share_one_manifest(tiny_lane, tmp_path):
    """A later legacy convert keeps the .pte section; the legacy file list has no .pte in it."""
    from converter import ConvertSettings, convert

    out = copy_models(tiny_lane[0], tmp_path / "models")
    before = load_section(out)
    convert(ConvertSettings(out=out, model=TINY, weights="random", calibration_count=4, modes=("none",),
                            build_dir=tmp_path / "build", force=True))
    assert load_section(out) == before
    assert {f.file.endswith(".pt") for f in ConvertManifest.load(out).files} == {True}


def test_a_second_run_reuses_and_a_tampered_program_is_rebuilt(tiny_lane, tmp_path):
    from converter.executorch import ExecutorchSettings, convert_executorch

    out = copy_models(tiny_lane[0], tmp_path / "models")
    settings = ExecutorchSettings(out=out, model=TINY, weights="random", calibration_count=4, delegates=("xnnpack",))
    assert convert_executorch(settings).built == []
    victim = find_pte(out, "fp32-xnnpack")
    victim.path.write_bytes(victim.path.read_bytes()[:-1] + b"\0")
    with pytest.raises(RecordError, match="does not match its manifest entry"):
        victim.check_hash()
    again = convert_executorch(settings)
    assert again.built == ["fp32-xnnpack"]
    find_pte(out, "fp32-xnnpack").check_hash()


def _bench(out, tmp_path, **kw):
    from converter.host_bench import PteBenchSettings, run_pte_bench

    return run_pte_bench(PteBenchSettings(models=out, warmup=1, iters=3, out=tmp_path / "bench", **kw))


def test_host_check_per_operator_and_side_by_side_timing(tiny_lane, tmp_path):
    out = tiny_lane[0]
    result = _bench(out, tmp_path, host_nnapi=False)
    checks = {c.variant: c for c in result.checks}
    assert checks["fp32-xnnpack"].ok and checks["fp32-xnnpack"].max_abs_diff < 1e-4
    assert checks["int8-xnnpack"].ok and checks["int8-xnnpack"].reference == "PT2E int8 reference graph"
    assert checks["int8-xnnpack"].max_lsb_diff is not None and checks["int8-xnnpack"].top1_agreement == 1.0
    assert not checks["fp32-vulkan"].ran and "VulkanBackend" in checks["fp32-vulkan"].reason
    # per operator: the portable program op by op, XNNPACK as opaque delegate blocks
    portable_ops = [r["aot_ops"] for r in checks["fp32-portable"].operators]
    assert len(portable_ops) >= 3 and all(r["mse"] < 1e-8 for r in checks["fp32-portable"].operators)
    assert "opaque" in checks["fp32-xnnpack"].operator_note and checks["fp32-xnnpack"].operators
    labels = {x.label: x for x in result.rows}
    assert {"TorchScript CPU quant_none", "TorchScript CPU quant_full", "ExecuTorch fp32-xnnpack",
            "ExecuTorch int8-xnnpack"} <= set(labels)
    assert labels["ExecuTorch fp32-vulkan"].timing is None and "not runnable here" in labels["ExecuTorch fp32-vulkan"].note
    body = json.loads(result.json_path.read_text())
    assert body["kind"] == "torchdroid.executorch-host-bench"
    # torch's threads as asked; ExecuTorch's pool at its default, said as such (no public means to size it)
    from converter.host_bench import EXECUTORCH_THREADS

    assert body["executorch_threads"] == EXECUTORCH_THREADS and body["executorch_threads"].startswith("ExecuTorch's")
    # every line timed in the same alternated rounds: one ratio per round for each line over its legacy CPU line
    ratios = {r["other"]: r for r in body["ratios"]}
    # "speedups" is the one verdict rule's headline, the median of the per-round ratios (not a ratio of medians)
    # the record's ratio is itself rounded: compared within the last digit (2.4725 gives 2.472 or 2.473)
    assert body["speedups"] == pytest.approx({"TorchScript CPU quant_none": 1.0, "TorchScript CPU quant_full": 1.0,
                                              **{k: r["ratio"] for k, r in ratios.items()}}, abs=1e-3)
    assert body["speedups"]["ExecuTorch fp32-xnnpack"] == pytest.approx(
        statistics.median(ratios["ExecuTorch fp32-xnnpack"]["per_round"]), abs=1e-3)
    assert set(ratios) == {"ExecuTorch fp32-xnnpack", "ExecuTorch int8-xnnpack", "ExecuTorch fp32-portable"}
    assert all(len(r["per_round"]) == 3 and r["low"] <= r["ratio"] * 1.5 for r in ratios.values())
    assert ratios["ExecuTorch int8-xnnpack"]["base"] == "TorchScript CPU quant_full"
    assert all(r["noisy"] == (r["high"] - r["low"] > abs(r["ratio"] - 1)) for r in ratios.values())
    # how the rounds were taken (issue 32 item 5), in the record and the result
    assert body["conditions"] == result.conditions.as_dict() and body["conditions"]["others_cpu_pct"] is not None
    assert len(body["conditions"]["load_before"]) == 3 and body["conditions"]["threads"] >= 1
    # the baseline CPU models were converted without optimize_for_mobile here (no XNNPACK): every comparison says so
    import torch

    if not torch._C._is_xnnpack_enabled():
        assert labels["TorchScript CPU quant_none"].mobile_optimized is False
        assert any("without optimize_for_mobile" in n for n in result.notes)
    # the portable program runs reference kernels: 3 iterations per round by default, and said so
    assert labels["ExecuTorch fp32-portable"].timing.repeats == 3 and "reference kernels" in labels["ExecuTorch fp32-portable"].note


def test_both_formats_time_each_cpu_model_once(tiny_lane, tmp_path, monkeypatch, capsys):
    """Issue 31 item 1 (h13): `bench --format torchscript,executorch` loaded and timed the TorchScript CPU models
    twice, once per format; now each CPU model is timed once, in the ExecuTorch format's rounds beside the programs,
    and the TorchScript result is made from the same rounds (the same numbers in both tables)."""
    from converter import host_bench
    from converter.formats import bench_all
    from converter.host_bench import HostBenchSettings

    models = copy_models(tiny_lane[0], tmp_path / "models")
    loads = []
    real = host_bench.load_bundled

    def counted(path):
        loads.append(Path(path).name)
        return real(path)
    monkeypatch.setattr(host_bench, "load_bundled", counted)  # both formats' one loader of a TorchScript model
    ts = HostBenchSettings(models=models, warmup=1, iters=3, threads=1, out=tmp_path / "bench", repeat=2)
    et = host_bench.PteBenchSettings(**vars(ts), per_operator=False, host_nnapi=False, again=True)
    results = bench_all({"torchscript": ts, "executorch": et})
    cpu = sorted(f.file for f in ConvertManifest.load(models).files if f.backend == "cpu")
    assert sorted(loads) == cpu  # each once
    assert list(results) == ["torchscript", "executorch"] and sorted(r.file for r in results["torchscript"].rows) == cpu
    line = next(x for x in results["executorch"].rows if x.label == "TorchScript CPU quant_none")
    row = next(r for r in results["torchscript"].rows if r.file == line.file)
    assert row.timing.median_ms == line.timing.median_ms and row.timing.repeats == 2  # one measurement, both tables
    assert json.loads((tmp_path / "bench" / "host-bench.json").read_text())["rows"][0]["timing"]["repeats"] == 2
    # the CPU models made without optimize_for_mobile: one note, the same in both formats, said once (issue 31, h26:
    # the TorchScript result's short note and the ExecuTorch result's own longer one were both printed)
    import torch

    from toolchain import console

    capsys.readouterr()
    with console.one_run():
        for result in results.values():
            for line in result.notes:
                console.note(line)
    assert capsys.readouterr().out.count("optimize_for_mobile") == (0 if torch._C._is_xnnpack_enabled() else 1)


def test_a_wrong_reference_fails_the_check(tiny_lane, tmp_path):
    """The check can fail: shift the recorded eager outputs and the fp32 programs no longer match them."""
    import torch

    from toolchain.fsutil import sha256_file
    from tests.executorch_support.section import write_section

    out = copy_models(tiny_lane[0], tmp_path / "models")
    section = load_section(out)
    ref_file = out / section["reference"]["tiny"]["file"]
    ref = torch.load(ref_file, weights_only=True)
    ref["expected"]["fp32"] = [y + 0.01 for y in ref["expected"]["fp32"]]
    torch.save(ref, ref_file)
    section["reference"]["tiny"]["sha256"] = sha256_file(ref_file)
    write_section(out, section)
    result = _bench(out, tmp_path, legacy=False, per_operator=False)
    assert not result.ok
    with pytest.raises(VerificationError) as e:
        result.raise_for_failures()
    assert "fp32-xnnpack" in str(e.value) and "fp32-portable" in str(e.value) and "int8" not in e.value.what


def _invoke(*args, cwd=ROOT):
    return invoke(cwd, *args, env=dict(os.environ, CI="1"), timeout=600)


def test_cli_bad_format_and_sdk_delegate_exit_2(tmp_path):
    r = _invoke("convert", "--format", "torchscript,onnx", "--out", str(tmp_path / "m"))
    assert r.returncode == 2 and "unknown 'onnx'" in r.stderr and "executorch" in r.stderr
    r = _invoke("convert", "--format", "executorch", "--delegates", "qnn", "--weights", "random", "--out", str(tmp_path / "m"))
    assert r.returncode == 2 and "QNN" in r.stderr and not (tmp_path / "m" / "manifest.json").exists()


def test_cli_convert_executorch_only_then_bench(tiny_lane, tmp_path):
    """From a user's directory with relative paths: convert (reused copy) then bench-executorch."""
    out = copy_models(tiny_lane[0], tmp_path / "build" / "models")
    env = dict(os.environ, CI="1", INVOKE_CONVERT_CALIBRATION_COUNT="4")
    r = invoke(tmp_path, "-r", str(ROOT), "convert", "--format", "executorch", "--model", TINY, "--weights", "random",
               env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "reused" in r.stdout and "skipped delegate qnn" in r.stdout and out.is_dir()
    r = invoke(tmp_path, "-r", str(ROOT), "bench-executorch", "--iter", "3", "--warmup", "1", env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "ExecuTorch fp32-xnnpack" in r.stdout and "TorchScript CPU quant_none" in r.stdout
    # upstream C++ lines (ExecuTorch's runtime, cpuinfo: "[threadpool.cpp:66] ...") go to the run log, not the console;
    # the progress lines carry an elapsed clock that is never cut
    import re

    assert not re.search(r"^\[\w+\.cpp:\d+\]", r.stderr, re.M), r.stderr[-2000:]
    steps = [line for line in r.stderr.splitlines() if re.match(r"\[\d+/\d+[ \]]", line)]
    assert all(re.match(r"\[\d+/\d+ \d+:\d\d:\d\d(, about .+ left)?\] ", line) for line in steps), steps  # a clock
    log = max((tmp_path / "build" / "logs").glob("bench-executorch-*.log"), key=lambda p: p.stat().st_mtime).read_text()
    # (ExecuTorch printed a threadpool line only when bench reset its size through a private call, now gone: that a
    # C++ library's line goes to the log and not the console is tests/unit/test_logs_console.py's)
    assert re.search(r"torchdroid\.progress: \[\d+/\d+\] ", log)  # every step is in the run log (the console: long ones)

    assert "per operator, fp32-portable: per operator (portable kernels)" in r.stdout, r.stdout
    assert (tmp_path / "build" / "bench" / "executorch-host-bench.json").is_file()


def test_bench_takes_executorch_as_a_format(tiny_lane, tmp_path):
    """Issue 22 item 2: ExecuTorch is a format of `bench` as of convert and deploy. `bench --format executorch` is
    bench-executorch (the same record), both formats time the CPU models and the programs (--json: one document),
    and a bad format or value is a usage error before anything is measured."""
    copy_models(tiny_lane[0], tmp_path / "build" / "models")
    env = dict(os.environ, CI="1", COLUMNS="400")  # the labels whole: at 120 columns they wrap at their space
    results = tmp_path / "build" / "bench"
    r = invoke(tmp_path, "-r", str(ROOT), "bench", "--format", "torchscript,tflite", env=env, timeout=600)
    assert r.returncode == 2 and "unknown format 'tflite'" in r.stderr, r.stderr
    r = invoke(tmp_path, "-r", str(ROOT), "bench", "--format", "executorch", "--iter", "0", env=env, timeout=600)
    assert r.returncode == 2 and "--iter" in r.stderr, r.stderr
    assert not results.exists()  # nothing measured, nothing written
    r = invoke(tmp_path, "-r", str(ROOT), "bench", "--format", "executorch", "--iter", "3", "--warmup", "1",
               "--repeat", "2", env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ExecuTorch fp32-xnnpack" in r.stdout and "TorchScript CPU quant_none" in r.stdout
    record = json.loads((results / "executorch-host-bench.json").read_text())
    assert not (results / "bench.json").exists()  # the CPU models' own table is the torchscript format's
    r = invoke(tmp_path, "-r", str(ROOT), "bench", "--format", "torchscript,executorch", "--iter", "3", "--warmup",
               "1", "--repeat", "2", "--json", env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    data = json.loads(r.stdout)  # one document
    assert sorted(data) == ["executorch", "torchscript"] and data["torchscript"]["rows"]
    assert data["executorch"]["checks"] and data["executorch"]["rows"]
    assert json.loads((results / "executorch-host-bench.json").read_text())["kind"] == record["kind"]


def test_an_int8_program_off_its_reference_fails(tiny_lane, tmp_path):
    """The int8 bound can fail: against a 'reference' that is the float model itself (no quantization error, so
    no budget) the program's own quantization error exceeds it."""
    import torch

    from toolchain.fsutil import sha256_file
    from tests.executorch_support.section import write_section

    out = copy_models(tiny_lane[0], tmp_path / "models")
    section = load_section(out)
    ref_file = out / section["reference"]["tiny"]["file"]
    ref = torch.load(ref_file, weights_only=True)
    ref["expected"]["int8"] = [y.clone() for y in ref["expected"]["fp32"]]  # the float outputs as "int8 reference"
    torch.save(ref, ref_file)
    section["reference"]["tiny"]["sha256"] = sha256_file(ref_file)
    write_section(out, section)
    result = _bench(out, tmp_path, legacy=False, per_operator=False, reference_kernels="skip")
    checks = {c.variant: c for c in result.checks}
    assert checks["fp32-xnnpack"].ok and not checks["int8-xnnpack"].ok
    assert checks["int8-xnnpack"].rel_budget == 0.0
    assert "exceeds 2x the quantization's own error" in checks["int8-xnnpack"].reason


def test_cli_convert_both_formats_json_is_one_document(tiny_lane, tmp_path):
    """`convert --format torchscript,executorch --json`: stdout is one JSON document with both results."""
    copy_models(tiny_lane[0], tmp_path / "build" / "models")
    env = dict(os.environ, CI="1", INVOKE_CONVERT_CALIBRATION_COUNT="4")
    r = invoke(tmp_path, "-r", str(ROOT), "convert", "--format", "torchscript,executorch", "--model", TINY, "--weights",
               "random", "--quant", "none,full", "--json", env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)  # one document, nothing else on stdout (verify's output went to stderr)
    assert sorted(data) == ["executorch", "torchscript"]
    assert {f["mode"] for f in data["torchscript"]["files"]} == {"none", "full"}
    assert {f["file"] for f in data["executorch"]["files"]} >= {"tiny-fp32-xnnpack.pte", "tiny-int8-xnnpack.pte"}
    # one format alone keeps its own shape (the single result, no wrapper)
    r = invoke(tmp_path, "-r", str(ROOT), "convert", "--format", "executorch", "--model", TINY, "--weights", "random",
               "--json", env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "torchscript" not in json.loads(r.stdout) and json.loads(r.stdout)["files"]


def test_the_int8_check_judges_held_out_inputs_on_the_output_grid(tiny_lane):
    """The int8 check can fail (issue 23 item 6): an output scaled to 0.75x of the reference and the unquantized
    float output both fail, the program itself passes; the reference inputs are not calibration inputs."""
    import torch

    from converter.calibration import load_batch, parse_calibration
    from converter.executorch_check import CheckRow, judge_outputs
    from toolchain.records import load_reference
    from converter.host_bench import PteBenchSettings
    from toolchain.records import load_method

    out = tiny_lane[0]
    ref = load_reference(out / "tiny-executorch-reference.pt")
    assert ref["held_out"] is True
    calibration = load_batch(parse_calibration(None, 4, 0), (224, 224))
    assert not any(torch.equal(x, c) for x in ref["inputs"] for c in calibration)
    f = find_pte(out, "tiny-int8-xnnpack")
    s = PteBenchSettings(models=out)
    program = [load_method(f.path).execute([x])[0] for x in ref["inputs"]]

    def verdict(outputs):
        return judge_outputs(f, outputs, ref, s, CheckRow(f.variant, f.file, ran=True))
    good = verdict(program)
    assert good.ok and good.grid_offset_lsb < 1e-3 and -128 <= good.codes[0] <= good.codes[1] <= 127
    scaled = verdict([0.75 * y for y in ref["expected"]["int8"]])
    assert not scaled.ok and "not dequantized int8 values" in scaled.reason
    # the unquantized model's output: within the error bound (no further from the int8 reference than the bound lets
    # the int8 program be), so only its being off the output grid tells it from the int8 output
    from converter.executorch_check import INT8_BUDGET_FACTOR

    unquantized = verdict(ref["expected"]["fp32"])
    assert unquantized.rel_error <= unquantized.rel_budget * INT8_BUDGET_FACTOR
    assert not unquantized.ok and "not dequantized int8 values" in unquantized.reason


def test_the_float_program_passed_off_as_the_int8_one_fails(tiny_lane, tmp_path):
    """A negative control through the stage: the fp32 .pte under the int8 program's name (hash recorded) is exit 8."""
    import shutil

    from toolchain.fsutil import sha256_file
    from tests.executorch_support.section import write_section

    out = copy_models(tiny_lane[0], tmp_path / "models")
    section = load_section(out)
    shutil.copyfile(out / "tiny-fp32-xnnpack.pte", out / "tiny-int8-xnnpack.pte")
    for e in section["files"]:
        if e["file"] == "tiny-int8-xnnpack.pte":
            e["sha256"], e["size"] = sha256_file(out / e["file"]), (out / e["file"]).stat().st_size
    write_section(out, section)
    result = _bench(out, tmp_path, legacy=False, per_operator=False, reference_kernels="skip")
    checks = {c.variant: c for c in result.checks}
    assert checks["fp32-xnnpack"].ok and not checks["int8-xnnpack"].ok
    with pytest.raises(VerificationError) as e:
        result.raise_for_failures()
    assert "int8-xnnpack" in str(e.value) and "grid" in str(e.value)


def test_unchanged_measurements_are_reused_and_again_measures_again(tiny_lane, tmp_path):
    """bench-executorch twice on the same files and settings: the second run measures nothing; other settings or
    --again measure again (issue 24 item 6)."""
    out = tiny_lane[0]
    kw = dict(host_nnapi=False, per_operator=False)
    first = _bench(out, tmp_path, **kw)
    assert all(c.seconds > 0 for c in first.checks if c.ran)  # what the next run's estimate is made of
    medians = {x.label: x.timing.median_ms for x in first.rows if x.timing}
    second = _bench(out, tmp_path, **kw)
    assert {x.label: x.timing.median_ms for x in second.rows if x.timing} == medians
    assert any(n.startswith("timings reused from") for n in second.notes)
    assert any(n.startswith("checks reused from") for n in second.notes)
    assert [c.ok for c in second.checks] == [c.ok for c in first.checks]
    assert [r.per_round for r in second.ratios] == [[round(x, 4) for x in r.per_round] for r in first.ratios]
    assert second.conditions == first.conditions  # reused times keep how they were taken
    other = _bench(out, tmp_path, repeat=2, **kw)  # another protocol: measured
    assert not any("reused" in n for n in other.notes if n.startswith("timings"))
    assert all(x.timing.repeats == 2 for x in other.rows if x.timing)
    again = _bench(out, tmp_path, repeat=2, again=True, **kw)
    assert not any("reused" in n for n in again.notes)


def test_the_per_operator_comparison_runs_by_hand_as_docs_executorch_md_says(tiny_lane, tmp_path):
    """`python -m converter.executorch_check JOBS_JSON DEBUG_BUFFER_MB` (docs/executorch.md): the child's work alone,
    one result file per job, the same rows the stage gets."""
    import subprocess
    import sys

    from toolchain.records import reference_path

    out = tiny_lane[0]
    f = next(f for f in pte_files(out) if f.variant == "fp32-portable")
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([{"program": str(f.path.resolve()), "etrecord": str(out / f.extra["etrecord"]["file"]),
                                 "reference": str(reference_path(out, f.stem)), "out": str(tmp_path / "ops.json")}]))
    r = subprocess.run([sys.executable, "-m", "converter.executorch_check", str(jobs), "64"], cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads((tmp_path / "ops.json").read_text())["rows"]
    assert len(rows) >= 3 and all(row["mse"] < 1e-8 for row in rows)  # the portable program, operator by operator


def test_one_child_compares_every_program_and_one_that_fails_does_not_take_the_others(tiny_lane, tmp_path):
    """The per-operator comparisons run in one child for all programs; when it ends on a program (here: its ETRecord
    is damaged), that program gets the reason and the programs after it are still compared, in a new child."""
    from converter.executorch_check import per_operator
    from toolchain.records import reference_path

    out = copy_models(tiny_lane[0], tmp_path / "models")
    files = {f.variant: f for f in pte_files(out) if f.runs_on_host}
    order = [files["fp32-xnnpack"], files["fp32-portable"], files["int8-xnnpack"]]
    (out / order[1].extra["etrecord"]["file"]).write_bytes(b"not an ETRecord")
    found = per_operator([(f, reference_path(out, f.stem)) for f in order], out, 64)
    assert set(found) == {f.file for f in order}
    first, broken, last = (found[f.file] for f in order)
    assert first[0] and "opaque" in first[1]
    assert broken[0] == [] and broken[1].startswith("per-operator comparison not possible: the comparison exited "
                                                    "with 1 (")  # with what the child said, or that it said nothing
    assert last[0] and "opaque" in last[1]


def test_a_child_killed_by_an_abort_is_a_note_and_the_programs_after_it_are_still_compared(tiny_lane, tmp_path,
                                                                                           monkeypatch):
    """ETDump aborts the whole process (SIGABRT, "Ran out of space ...") when its debug buffer is too small for a
    program's intermediate outputs (seen with MobileNetV2's portable program and a 1 MB buffer).  The child is forked
    from the stage, so a stand-in for that abort patched in here happens in the child: the stage goes on, the program
    gets the reason, the next one is compared in a new child."""
    import converter.executorch_check as ops
    from converter.executorch_check import per_operator
    from toolchain.records import reference_path

    real = ops.numeric_gap

    def aborts_on_portable(program, etrecord, example, debug_buffer_mb):
        if "portable" in program.name:
            os.write(2, b"[buffer_data_sink.cpp:47] Ran out of space to store intermediate outputs.\n")  # as ETDump
            os.abort()
        return real(program, etrecord, example, debug_buffer_mb)

    monkeypatch.setattr(ops, "numeric_gap", aborts_on_portable)
    out = copy_models(tiny_lane[0], tmp_path / "models")
    files = {f.variant: f for f in pte_files(out) if f.runs_on_host}
    order = [files["fp32-xnnpack"], files["fp32-portable"], files["int8-xnnpack"]]
    found = per_operator([(f, reference_path(out, f.stem)) for f in order], out, 64)
    first, broken, last = (found[f.file] for f in order)
    assert first[0] and last[0], found
    assert broken == ([], "per-operator comparison not possible: the ETDump debug buffer (64 MB) is too small for "
                          "this program's intermediate outputs")


def test_a_first_run_says_how_long_the_remaining_checks_take(tiny_lane, tmp_path, caplog, monkeypatch):
    """No earlier results to go by (a first run): from the second check on, each check's line says about how long
    the checks left will take, from the ones done so far (issue 24 item 6: a first run's checks, minutes on
    MobileNetV2, said nothing of their length).  The tiny programs take well under a second, a time left a real
    run does not say (toolchain/progress.WORTH_SAYING): here it is said from any length; every step's line is
    read, also those the console leaves to the run log."""
    import logging
    import re

    from toolchain import progress

    monkeypatch.setattr(progress, "WORTH_SAYING", 0.0)
    caplog.set_level(logging.DEBUG, logger="torchdroid.progress")
    _bench(tiny_lane[0], tmp_path, host_nnapi=False, per_operator=False)
    lines = [r.getMessage() for r in caplog.records if "check against" in r.getMessage()
             and "vulkan" not in r.getMessage()]  # the Vulkan program does not run here: no time to say
    assert len(lines) >= 2 and " left" not in lines[0], lines  # nothing measured yet: no number made up
    assert all(re.search(r"about \d+ (s|min \d\d s) left", line) for line in lines[1:]), lines


def test_convert_says_how_long_the_remaining_programs_take(tiny_lane, tmp_path, caplog, monkeypatch):
    """From the second program on, each program's progress line says about how long the programs left will take,
    from those lowered so far; the first says nothing (issue 24 item 6: convert's ExecuTorch step, minutes on
    MobileNetV2, said nothing of its length)."""
    import logging
    import re

    from converter.executorch import ExecutorchSettings, convert_executorch
    from toolchain import progress

    monkeypatch.setattr(progress, "WORTH_SAYING", 0.0)  # tiny programs: a time left said from any length (see above)
    out = copy_models(tiny_lane[0], tmp_path / "models")
    caplog.set_level(logging.DEBUG, logger="torchdroid.progress")
    convert_executorch(ExecutorchSettings(out=out, model=TINY, weights="random", calibration_count=4,
                                          delegates=("xnnpack", "portable"), force=True))
    lines = [r.getMessage() for r in caplog.records if "lowering to ExecuTorch" in r.getMessage()]
    assert len(lines) == 3 and " left" not in lines[0], lines  # nothing lowered yet: no number made up
    assert re.search(r"about \d+ (s|min \d\d s) left for 2 programs, from those so far", lines[1]), lines
    assert re.search(r"about \d+ (s|min \d\d s) left for 1 program, from those so far", lines[2]), lines
