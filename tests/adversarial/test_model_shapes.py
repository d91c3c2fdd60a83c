"""Adversarial cases for models that are not [N, classes] classifiers, and for NaN/inf in weights or outputs, in
both convert lanes (issue 21, item 4): each converts with the checks that fit it, or is refused before any file is
written; a failed mode never leaves a file its manifest does not list."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.harness import ROOT, adversarial, assert_clean, run_invoke
from toolchain.records import pte_files, reference_path
from toolchain.records import MANIFEST_NAME, ConvertManifest

SUPPORT = ROOT / "tests" / "converter_support" / "user_models.py"
FAST = {"INVOKE_CONVERT_CALIBRATION_COUNT": "8"}


def convert(cwd: Path, factory: str, *args: str):
    return run_invoke(["convert", "--model", f"{SUPPORT}:{factory}", "--weights", "random", "--no-verify",
                       "--out", "m", *args], cwd, FAST)


def listed(out: Path) -> set:
    """Every file the manifest lists (checked against its hash), plus the manifest."""
    if not (out / MANIFEST_NAME).is_file():
        return set()
    files = set()
    manifest = ConvertManifest.load(out)
    for f in manifest.files:
        f.check_hash()
        files.add(f.file)
    return files


def model_files(out: Path) -> set:
    return {p.name for p in out.glob("*") if p.suffix in (".pt", ".ptl", ".pte", ".etrecord")} if out.is_dir() else set()


@pytest.mark.slow
@adversarial("convert", "model output that is not [N, classes]")
def test_a_feature_map_model_converts_without_top1(tmp_path):
    res = convert(tmp_path, "feature_map")
    assert_clean(res, "ok", mentions=["[1, 5, 112, 112]", "no top-1 agreement"], root=tmp_path)
    out = tmp_path / "m"
    assert model_files(out) == listed(out) and len(listed(out)) == 6
    conv = ConvertManifest.load(out).conversions["feature_map"]
    assert conv["host_check"]["top1_agreement"] == {}


@adversarial("convert", "model output that is not [N, classes]")
def test_a_detection_tuple_is_refused_for_quant_core_before_any_of_its_files(tmp_path):
    """Each mode on its own: quant_core is refused before converting (its NNAPI wrapper takes one tensor), none and
    full are made, and the exit status says some were refused."""
    res = convert(tmp_path, "detection_like")
    assert_clean(res, "partly converted", mentions=["refused (quant_core)", "tuple of 2 tensors", "--quant none,full"],
                 root=tmp_path)
    assert not {f for f in model_files(tmp_path / "m") if "quant_core" in f}
    assert {f for f in model_files(tmp_path / "m") if "-cpu.pt" in f} == {"detection_like-quant_none-cpu.pt",
                                                                          "detection_like-quant_full-cpu.pt"}


@adversarial("convert", "model output that is not [N, classes]")
def test_a_detection_tuple_asked_for_quant_core_alone_is_refused_before_any_file(tmp_path):
    res = convert(tmp_path, "detection_like", "--quant", "core")
    assert_clean(res, "conversion", mentions=["tuple of 2 tensors", "--quant none,full"], root=tmp_path)
    assert not model_files(tmp_path / "m")


@adversarial("convert", "model output that is not [N, classes]")
def test_a_detection_tuple_converts_its_cpu_models_with_none_and_full(tmp_path):
    res = convert(tmp_path, "detection_like", "--quant", "none,full")
    assert_clean(res, "ok", mentions=["[1, 3136, 4]"], root=tmp_path)
    out = tmp_path / "m"
    assert model_files(out) == listed(out) == {"detection_like-quant_none-cpu.pt", "detection_like-quant_full-cpu.pt"}


@adversarial("convert", "NaN or inf in weights or outputs")
@pytest.mark.parametrize("factory, said", [("nan_weights", "fc.weight (1 nan)"), ("inf_weights", "fc.bias (1 infinite)")])
@pytest.mark.parametrize("fmt", ["torchscript", "executorch"])
def test_non_finite_weights_are_refused_before_any_file(tmp_path, factory, said, fmt):
    if fmt == "executorch":
        pytest.importorskip("executorch")
    res = convert(tmp_path, factory, "--format", fmt)
    assert_clean(res, "conversion", mentions=["nan or infinite", said], root=tmp_path)
    assert not model_files(tmp_path / "m") and not listed(tmp_path / "m")


@adversarial("convert", "NaN or inf in weights or outputs")
def test_an_overflowing_model_is_refused_before_any_file(tmp_path):
    res = convert(tmp_path, "overflows")
    assert_clean(res, "conversion", mentions=["infinite outputs", "output #0"], root=tmp_path)
    assert not model_files(tmp_path / "m")


@adversarial("convert", "NaN or inf in weights or outputs")
def test_a_saved_model_giving_nan_is_refused_and_leaves_no_unrecorded_file(tmp_path):
    res = convert(tmp_path, "nan_when_scripted", "--quant", "none")
    assert_clean(res, "conversion", mentions=["nan_when_scripted-quant_none-cpu.pt", "NaN"], root=tmp_path)
    assert model_files(tmp_path / "m") == listed(tmp_path / "m") == set()


@pytest.mark.slow
@adversarial("executorch", "model output that is not [N, classes]")
@pytest.mark.parametrize("factory, count", [("two_outputs", 2), ("detection_like", 2), ("feature_map", 1)])
def test_executorch_lane_converts_several_outputs_and_feature_maps(tmp_path, factory, count):
    pytest.importorskip("executorch")
    res = convert(tmp_path, factory, "--format", "executorch", "--delegates", "xnnpack")
    assert_clean(res, "ok", root=tmp_path)
    out = tmp_path / "m"
    recorded = set()
    for f in pte_files(out):
        f.check_hash()
        recorded.add(f.file)
    assert recorded == {p.name for p in out.glob("*.pte")} == {f"{factory}-fp32-xnnpack.pte", f"{factory}-int8-xnnpack.pte"}
    assert reference_path(out, factory).is_file()
    # every output is recorded and checked (was: a note that only the first was compared, gone since 0fd81b6)
    from toolchain.records import load_reference

    ref = load_reference(reference_path(out, factory))
    assert len(ref["int8_outputs"]) == count
    assert all(len(y) == count if count > 1 else hasattr(y, "shape") for y in ref["expected"]["fp32"])
