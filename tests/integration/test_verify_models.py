"""verify on models that used to fool it or crash it: a CPU kernel bug, two outputs, the listed zoo models
that NNAPI conversion cannot do right (refused before any work, with the reason, no traceback)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import host_nnapi  # noqa: E402
from converter import ConvertSettings, convert  # noqa: E402
from host_nnapi.verify import VerifySettings, verify  # noqa: E402
from toolchain.errors import ConversionError  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "host_nnapi_support" / "verify_models.py"
needs_host_nnapi = pytest.mark.skipif(not host_nnapi.available(), reason="no C compiler: host NNAPI unavailable")


def _convert(tmp_path: Path, factory: str, modes=("none", "core", "full")) -> Path:
    out = tmp_path / "models"
    convert(ConvertSettings(out=out, model=f"{MODELS}:{factory}", modes=modes, weights="random", calibration_count=4,
                            build_dir=tmp_path / "build"))
    return out


@needs_host_nnapi
def test_a_cpu_kernel_bug_is_reported_as_such_and_does_not_fail_the_nnapi_model(tmp_path):
    out = _convert(tmp_path, "hardtanh6", ("full",))
    result = verify(VerifySettings(models=out, random_inputs=1))
    (row,) = result.rows
    assert row.ok and row.lsb_vs_reference == 0
    assert row.max_lsb_diff > 5  # the CPU model really is far from the NNAPI model end to end...
    (issue,) = row.cpu_kernel_issues  # ...because of the CPU kernel, named with its operation
    assert issue.startswith("operation 1 RELU6") and "PyTorch CPU kernel bug" in issue
    layer = next(x for x in row.layers if x["name"] == "RELU6")
    assert layer["cpu_kernel_suspect"] and layer["nnapi_vs_float_lsb"] <= 2 < layer["cpu_vs_float_lsb"]
    assert any(f["check"] == "cpu-kernel" for f in row.findings)


@needs_host_nnapi
def test_a_model_with_two_outputs_converts_and_verifies_both(tmp_path):
    out = _convert(tmp_path, "two_heads", ("none", "full"))
    result = verify(VerifySettings(models=out, random_inputs=1))
    assert result.ok and {r.mode for r in result.rows} == {"none", "full"}
    data = json.loads((out / "verify.json").read_text())
    assert all(v["files"]["nnapi"]["sha256"] for v in data["variants"]) and data["library_sha256"]


def test_two_outputs_with_quant_core_are_refused_before_converting(tmp_path):
    with pytest.raises(ConversionError) as err:
        _convert(tmp_path, "two_heads", ("core",))
    assert "quant_core" in err.value.cause and "--quant none,full" in err.value.remedy
    assert not (tmp_path / "models" / "manifest.json").exists()


def test_a_plain_add_is_quantized_in_fx_graph_mode_with_its_nnapi_models(tmp_path):
    out = _convert(tmp_path, "plain_add", ("none", "full"))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["conversions"]["plain_add"]["quantization"]["scheme"] == "fx"
    assert {f["file"] for f in manifest["files"]} >= {"plain_add-quant_full-cpu.pt", "plain_add-quant_full-nnapi.pt"}


def test_a_plain_add_fx_cannot_trace_either_gets_the_float_functional_fix(tmp_path):
    with pytest.raises(ConversionError) as err:
        _convert(tmp_path, "branching_add", ("full",))
    assert "FloatFunctional" in err.value.remedy and "data-dependent" not in err.value.remedy
    assert "verify_models.py:" in err.value.cause  # where the add is
    assert "FX graph mode" in err.value.cause and "symbolic_trace" in err.value.remedy


def test_a_quantized_mode_stopped_before_converting_leaves_the_float_model_made(tmp_path):
    """Each mode on its own (issue 35 item 1): a plain add neither eager nor FX mode can quantize stops quant_full
    (its CPU and NNAPI models), quant_none is made and recorded, the refusal is in conversions.<stem>.refused as the
    ExecuTorch lane records its programs', and convert ends with PartlyConverted (exit 10) carrying the result."""
    from toolchain.errors import PartlyConverted

    out = tmp_path / "models"
    with pytest.raises(PartlyConverted) as err:
        convert(ConvertSettings(out=out, model=f"{MODELS}:branching_add", modes=("none", "full"), weights="random",
                                calibration_count=4, build_dir=tmp_path / "build"))
    result = err.value.result
    assert err.value.exit_code == 10 and "quant_none" in err.value.what and "quant_full" in err.value.what
    assert result.built_modes == ["none"] and {f.mode for f in result.files} == {"none"}
    assert ("branching_add-quant_full-cpu.pt", "cpu", "full") in result.not_made_files()
    assert "--quant none" in result.not_made["quant_full"]
    assert "--format executorch" not in result.not_made["quant_full"]  # torch.export cannot capture its branching
    record = json.loads((out / "manifest.json").read_text())["conversions"]["branching_add"]
    assert "FloatFunctional" in record["refused"]["quant_full"] and "full" not in record["mode_keys"]
    assert not list(out.glob("*quant_full*"))

    # the later stages use what exists and say why the rest is missing (not "run convert": it would refuse it again)
    from appgen.make import find_variant
    from deploy.plan import DeploySettings, _refused_warnings
    from toolchain.records import ConvertManifest, RefusedVariant

    with pytest.raises(RefusedVariant) as missing:
        find_variant(out, "quant_full")
    assert "branching_add-quant_full was not made: convert refused it" in missing.value.what
    assert "FloatFunctional" in missing.value.cause and "branching_add-quant_none" in missing.value.remedy
    assert "run `invoke convert" not in str(missing.value)
    assert set(find_variant(out, "quant_none")) == {"cpu", "nnapi"}
    (said,) = _refused_warnings(DeploySettings(models=out, results=tmp_path / "r"), ConvertManifest.load(out).files_of("branching_add"))
    assert said.startswith("branching_add-quant_full is not deployed: convert refused it (") and "fix:" not in said
    # `invoke all` makes the app of a variant that was made, and says why (app.model's quant_full was refused)
    from workflow.chain import AllPlan, app_variant

    p = AllPlan(skip=(), weights="random", weights_note="", substituted=False, variant="branching_add-quant_full",
                models=out, app_dir=tmp_path / "app", app_id="x.y", build_dir=tmp_path, build_info=tmp_path / "b.json",
                binary=None, apk=None, replace_app=False, adb_host=None, adb_port=None, adb_servers=())
    told = []
    assert app_variant(p, told.append) == "branching_add-quant_none"
    assert told == [f"the app gets branching_add-quant_none: convert refused branching_add-quant_full "
                    f"({ConvertManifest.load(out).not_made()['branching_add-quant_full'].split('; fix: ')[0]})"]


def test_in_place_relu_and_add_reach_nnapi_out_of_place_and_compute_the_same(tmp_path):
    from converter.export import without_inplace
    from host_nnapi_support.verify_models import in_place

    out = _convert(tmp_path, "in_place", ("none",))
    manifest = json.loads((out / "manifest.json").read_text())
    assert "in_place-quant_none-nnapi.pt" in {f["file"] for f in manifest["files"]}, manifest.get("nnapi_refused")
    model, x = in_place().eval(), torch.rand(1, 3, 32, 32)
    torch.testing.assert_close(without_inplace(model)(x), model(x))


def test_a_plain_conv_batchnorm_factory_gets_its_nnapi_model(tmp_path):
    out = _convert(tmp_path, "conv_bn", ("none", "full"))
    manifest = json.loads((out / "manifest.json").read_text())
    files = {f["file"] for f in manifest["files"]}
    assert {"conv_bn-quant_none-nnapi.pt", "conv_bn-quant_full-nnapi.pt"} <= files, manifest.get("nnapi_refused")
    assert manifest["conversions"]["conv_bn"]["batchnorm"] == {"layers": 2, "folded": 2}


@pytest.mark.parametrize("model, reason", [
    ("googlenet", "ceil_mode=True is ignored"),
    ("inception_v3", "average pooling with padding"),
    ("mobilenet_v3_large", "aten::hardswish"),
    ("shufflenet_v2_x1_0", "aten::transpose"),
    ("resnext101_32x8d", "grouped convolution"),
])
def test_listed_models_nnapi_cannot_do_right_are_found_before_any_work(model, reason):
    """What leaves these zoo models without an NNAPI model (their CPU models are still converted)."""
    from converter.models import build_float_model, parse_model, parse_weights
    from converter.precheck import check_model, nnapi_refused, refuse

    spec = parse_model(model)
    float_model, _ = build_float_model(spec, parse_weights("random", 0))  # the quantizable model convert uses
    check = check_model(float_model, spec.input_hw, ("none", "core", "full"))
    refuse(check, model)  # nothing stops the CPU models
    assert any(reason in p.line() for p in nnapi_refused(check, "none")), [p.line() for p in check.problems]


@needs_host_nnapi
def test_mobilenet_v3_gets_its_cpu_model_and_verify_skips_its_refused_nnapi_model(tmp_path):
    """The real model: before, exit 6 and nothing written; now the CPU model, and verify says why it skips NNAPI."""
    t0 = time.monotonic()
    out = tmp_path / "models"
    result = convert(ConvertSettings(out=out, model="mobilenet_v3_large", modes=("none",), weights="random",
                                     calibration_count=2, build_dir=tmp_path / "build"))
    assert [f.file for f in result.files] == ["mobilenetv3large-quant_none-cpu.pt"]
    (refusal,) = result.refused
    assert "aten::hardswish" in refusal.reason and "--format executorch" in refusal.alternative
    checked = verify(VerifySettings(models=out, random_inputs=1))
    assert checked.rows == [] and [r.file for r in checked.skipped] == ["mobilenetv3large-quant_none-nnapi.pt"]
    assert not (out / "verify.json").exists()  # no record of a check that did not happen
    print(f"mobilenet_v3_large: {time.monotonic() - t0:.1f} s")


def test_a_quantized_mode_failing_its_host_check_is_refused_on_its_own(tmp_path, monkeypatch):
    """A quantized mode whose saved CPU model fails its host check (a quantization collapsed to a constant output)
    is refused by itself, as the ExecuTorch lane refuses such a program: its files are removed, its reason is
    recorded, quant_none is made, and convert ends with PartlyConverted (exit 10)."""
    from converter import convert_modes
    from toolchain.errors import ConversionError, PartlyConverted

    checked = convert_modes.host_check

    def collapsed(path, mode):
        if mode == "full":
            raise ConversionError(f"{path.name} gives a constant output on its bundled input",
                                  remedy="check the weights and the calibration images")
        return checked(path, mode)

    monkeypatch.setattr(convert_modes, "host_check", collapsed)
    out = tmp_path / "models"
    support = ROOT / "tests" / "converter_support" / "user_models.py"
    with pytest.raises(PartlyConverted) as err:
        convert(ConvertSettings(out=out, model=f"{support}:tiny", modes=("none", "full"), weights="random",
                                calibration_count=4, build_dir=tmp_path / "build"))
    assert "constant output" in err.value.result.not_made["quant_full"] and "--quant none" in err.value.cause
    assert {f.mode for f in err.value.result.files} == {"none"}
    assert not list(out.glob("*quant_full*"))  # written before its check, removed with the refusal
