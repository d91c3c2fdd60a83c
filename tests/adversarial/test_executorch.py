"""Adversarial cases for the ExecuTorch lane (convert --format executorch, bench-executorch)."""

from __future__ import annotations

import json

import pytest

from tests.adversarial.harness import adversarial, assert_clean, run_invoke, snapshot
from tests.executorch_support.section import write_section
from toolchain.records import MANIFEST_KIND, MANIFEST_SCHEMA, ResultRow, write_record


@adversarial("executorch", "bad value from an environment variable")
def test_unknown_format_in_the_environment(tmp_path):
    out = run_invoke(["convert", "--weights", "random"], cwd=tmp_path, env={"INVOKE_CONVERT_FORMAT": "torchscript,tflite"})
    assert_clean(out, "usage", mentions=["tflite", "executorch"], root=tmp_path)
    assert not (tmp_path / "build" / "models" / "manifest.json").exists()


@adversarial("executorch", "delegate that needs a vendor SDK")
def test_vendor_sdk_delegate_is_refused_before_any_work(tmp_path):
    out = run_invoke(["convert", "--format", "executorch", "--delegates", "xnnpack,mediatek", "--weights", "random"],
                     cwd=tmp_path)
    assert_clean(out, "usage", mentions=["mtk_converter", "xnnpack"], root=tmp_path)
    assert not (tmp_path / "build" / "models" / "manifest.json").exists()


def _legacy_manifest(models):
    models.mkdir(parents=True)
    write_record(models / "manifest.json", MANIFEST_KIND, MANIFEST_SCHEMA, {"conversions": {}, "files": []})


@adversarial("executorch", "stage run before its input exists")
@pytest.mark.parametrize("bench", [["bench-executorch", "--no-legacy"], ["bench", "--format", "executorch", "--no-legacy"]])
def test_bench_without_pte_programs_says_how_to_make_them(tmp_path, bench):
    """The same with the shorthand and the full spelling (issue 31: bench-executorch is bench --format executorch)."""
    _legacy_manifest(tmp_path / "build" / "models")
    out = run_invoke(bench, cwd=tmp_path)
    assert_clean(out, "usage", mentions=["--format torchscript,executorch"], root=tmp_path)


@adversarial("executorch", "tampered record")
def test_a_tampered_program_is_refused_before_running(tmp_path):
    models = tmp_path / "build" / "models"
    _legacy_manifest(models)
    (models / "m-fp32-xnnpack.pte").write_bytes(b"\0\0\0\0ET12 not what was converted")
    spec = {"shape": [1, 3, 8, 8], "dtype": "float32"}
    write_section(models, {"files": [{
        "file": "m-fp32-xnnpack.pte", "sha256": "0" * 64, "size": 31, "model": "m", "stem": "m", "precision": "fp32",
        "delegate": "xnnpack", "input": spec, "output": spec, "baseline": "quant_none", "runs_on_host": True,
        "executorch": {"version": "1.5.1"}, "torch": {"version": "2.14.1"}}]})
    kept = snapshot([models / "m-fp32-xnnpack.pte"])
    out = run_invoke(["bench-executorch"], cwd=tmp_path)
    assert_clean(out, "record", mentions=["does not match its manifest entry", "--force"], kept=kept, root=tmp_path)
    assert not (tmp_path / "build" / "bench" / "executorch-host-bench.json").exists()


@adversarial("executorch", "truncated program")
def test_a_program_the_runtime_cannot_load_is_named_with_the_fix(tmp_path):
    """A program cut short whose manifest entry lists it as it is (sha256 and size match): ExecuTorch's
    load_program refuses it; a record error naming the file, not the runtime's traceback."""
    import hashlib

    models = tmp_path / "build" / "models"
    _legacy_manifest(models)
    data = b"\x1c\x00\x00\x00ET12" + b"\0" * 24  # a program's header, then nothing
    (models / "m-fp32-xnnpack.pte").write_bytes(data)
    import torch

    torch.save({"inputs": [torch.zeros(1, 3, 8, 8)], "expected": [torch.zeros(1, 3, 8, 8)]}, models / "m-ref.pt")
    ref = {"m": {"file": "m-ref.pt", "sha256": hashlib.sha256((models / "m-ref.pt").read_bytes()).hexdigest()}}
    spec = {"shape": [1, 3, 8, 8], "dtype": "float32"}
    write_section(models, {"reference": ref, "files": [{
        "file": "m-fp32-xnnpack.pte", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "model": "m",
        "stem": "m", "precision": "fp32", "delegate": "xnnpack", "input": spec, "output": spec,
        "baseline": "quant_none", "runs_on_host": True, "executorch": {"version": "1.5.1"},
        "torch": {"version": "2.14.1"}}]})
    kept = snapshot([models / "m-fp32-xnnpack.pte"])
    out = run_invoke(["bench-executorch"], cwd=tmp_path)
    assert_clean(out, "record", mentions=["m-fp32-xnnpack.pte", "ExecuTorch can load",
                                          "invoke convert --format executorch --force"], kept=kept, root=tmp_path)


@adversarial("executorch", "foreign file where a record belongs")
def test_a_foreign_manifest_is_a_record_error(tmp_path):
    models = tmp_path / "build" / "models"
    models.mkdir(parents=True)
    (models / "manifest.json").write_text(json.dumps({"kind": "something-else", "files": []}))
    kept = snapshot([models / "manifest.json"])
    out = run_invoke(["bench-executorch"], cwd=tmp_path)
    assert_clean(out, "record", mentions=["not a torchdroid.convert-manifest"], kept=kept, root=tmp_path)


@adversarial("executorch", "wrong record for the stage")
def test_deploy_executorch_refuses_a_pytorch_build_info(tmp_path):
    from tests.executorch_support.device import write_pte_models
    from toolchain.records import BuildInfo

    write_pte_models(tmp_path / "build" / "models")
    info = tmp_path / "build" / "android" / "arm64-v8a" / "build-info.json"
    info.parent.mkdir(parents=True)
    BuildInfo.create(info, {"lane": "current", "commit": "0" * 40, "abi": "arm64-v8a", "api_level": 29, "artefacts": []})
    out = run_invoke(["deploy-executorch", "--build-info", str(info)], cwd=tmp_path)
    assert_clean(out, "usage", mentions=["build-android --lane executorch"], root=tmp_path)


@adversarial("executorch", "unsupported value")
def test_build_android_executorch_refuses_an_abi_without_a_preset(tmp_path):
    out = run_invoke(["build-android", "--lane", "executorch", "--abi", "armeabi-v7a"], cwd=tmp_path)
    assert_clean(out, "usage", mentions=["arm64-v8a", "x86_64"], root=tmp_path)
    assert not (tmp_path / "build" / "src").exists()


def _reported_run(results, serial="R1"):
    """A run of both formats in the results store and its document (written with their own writers)."""
    import dataclasses

    from deploy.results import ResultStore, export

    rows = [ResultRow(serial, "Phone", "b", "14", 34, "arm64-v8a", "mobilenetv2", f"quant_{m}", m, "cpu", "binary",
                      "ok", f"mobilenetv2-quant_{m}-cpu.pt", ms, ms * 1.1, ms * 0.9, samples=10)
            for m, ms in (("none", 20.0), ("full", 8.0))]
    rows.append(dataclasses.replace(rows[0], variant="fp32-xnnpack", backend="xnnpack", median_ms=8.0, p90_ms=8.5,
                                    min_ms=7.5, model_file="mobilenetv2-fp32-xnnpack.pte", format="executorch"))
    ResultStore(results / "results.sqlite").add_run("2026-11-23T10:00:00+00:00", "p", "c", {"models": "build/models"},
                                                    rows)
    facts = {"models": str((results.parent / "models").resolve()), "build_info": "b.json", "warmup": 1, "iters": 10,
             "repeat": 1, "threads": 1, "checked": False, "problems": [], "notes": [],
             "operators": [{"serial": serial, "file": "mobilenetv2-fp32-xnnpack.pte", "status": "unknown",
                            "reason": "the runner was built without ExecuTorch's event tracer"}]}
    return export(rows, results, "run-0001", executorch=facts)["json"]


def _kept(path):
    return snapshot([path])


@adversarial("executorch", "tampered record")
def test_report_names_a_run_document_with_edited_executorch_numbers_and_keeps_it(tmp_path):
    """Before, the ExecuTorch record with edited numbers stopped the report (exit 5); the record is gone and the
    run's document holds the rows' copy: an edited one is named with its remedy, kept, and the rows come from the
    store, unedited."""
    path = _reported_run(tmp_path / "build" / "results")
    data = json.loads(path.read_text())
    data["results"][-1]["median_ms"] = -1.0  # a nicer number than 8
    path.write_text(json.dumps(data))
    kept = _kept(path)
    out = run_invoke(["report"], cwd=tmp_path)
    assert_clean(out, "ok", mentions=["run-0001.json", "contradicts itself", "invoke deploy", "2.50x"], kept=kept,
                 root=tmp_path)


@adversarial("executorch", "foreign file where a record belongs")
def test_report_names_a_foreign_file_where_the_run_document_belongs(tmp_path):
    path = _reported_run(tmp_path / "build" / "results")
    path.write_text(json.dumps({"rows": [{"model": "mine", "ms": 3}]}))
    kept = _kept(path)
    out = run_invoke(["report"], cwd=tmp_path)
    assert_clean(out, "ok", mentions=["not a torchdroid.deploy-results record", "ExecuTorch fp32-xnnpack"], kept=kept,
                 root=tmp_path)


@adversarial("executorch", "record deleted")
def test_report_draws_a_runs_executorch_rows_without_its_record(tmp_path):
    """Before, the ExecuTorch lines lived only in their record; now they are rows of the run: a run whose document
    is gone (or whose rows the next deploy imported from its journal) still shows them, with their speed-ups."""
    path = _reported_run(tmp_path / "build" / "results")
    path.unlink()
    out = run_invoke(["report"], cwd=tmp_path)
    assert_clean(out, "ok", mentions=["ExecuTorch fp32-xnnpack", "2.50x"], root=tmp_path)
