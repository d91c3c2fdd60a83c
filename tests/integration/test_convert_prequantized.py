"""invoke convert --quantized-weights: quant_core/quant_full from a pre-quantized state_dict, as the tutorial's
``quantize=True`` gets them, instead of calibrating here (converter/prequantized.py)."""

import sys
from pathlib import Path

import pytest

from tests.integration.test_convert import SUPPORT, _written, invoke
from toolchain.records import ConvertManifest
from tests.virtual_device.harness import held_dead_port

TINY = f"{SUPPORT}:tiny"


def _tiny(seed: int = 0):
    import torch

    sys.path.insert(0, str(SUPPORT.parent))
    try:
        from user_models import Tiny
    finally:
        sys.path.pop(0)
    torch.manual_seed(seed)  # what `--weights random` gives the factory
    return Tiny().eval()


def _quantized_state(float_model, qconfig: str = "qnnpack", count: int = 4):
    """The state_dict of ``float_model`` quantized eager-mode with ``qconfig`` on ``count`` of torchdroid's
    calibration images."""
    import torch

    from converter.calibration import load_batch, parse_calibration
    from converter.export import fused_float

    torch.backends.quantized.engine = "qnnpack" if qconfig == "qnnpack" else "fbgemm"
    m = fused_float(float_model)
    m.qconfig = torch.ao.quantization.get_default_qconfig(qconfig)
    torch.ao.quantization.prepare(m, inplace=True)
    with torch.no_grad():
        m(torch.cat(load_batch(parse_calibration(None, count, 0), (224, 224)), 0))
    torch.ao.quantization.convert(m, inplace=True)
    torch.backends.quantized.engine = "qnnpack"
    return m.state_dict()


@pytest.fixture(scope="module")
def quantized_file(tmp_path_factory):
    import torch

    from converter.calibration import load_batch, parse_calibration
    from converter.models import estimate_batchnorm

    path = tmp_path_factory.mktemp("qweights") / "tiny-quantized.pth"
    model = _tiny()  # its BatchNorm untrained: convert estimates it on its 4 calibration images, as here
    estimate_batchnorm(model, load_batch(parse_calibration(None, 4, 0), (224, 224)))
    torch.save(_quantized_state(model), path)
    return path


def _outputs(directory: Path, mode: str):
    import torch

    m = torch.jit.load(str(directory / f"tiny-quant_{mode}-cpu.pt"))
    y = m(*m.get_all_bundled_inputs()[0])
    return y.dequantize() if y.is_quantized else y


def test_prequantized_file_is_used_without_calibrating(tmp_path, quantized_file, monkeypatch):
    import torch

    import converter.export as export
    from converter import ConvertSettings, convert

    calibrated = convert(ConvertSettings(out=tmp_path / "calibrated", model=TINY, weights="random",
                                         calibration_count=4, build_dir=tmp_path))
    assert calibrated.built_modes == ["none", "core", "full"]

    def no_calibration(*a, **k):
        raise AssertionError("calibrated although pre-quantized weights were given")

    monkeypatch.setattr(export, "quantize", no_calibration)
    monkeypatch.setattr("converter.convert_modes.quantize", no_calibration)
    s = ConvertSettings(out=tmp_path / "pre", model=TINY, weights="random", calibration_count=4, build_dir=tmp_path,
                        quantized_weights=str(quantized_file))
    res = convert(s)
    assert res.built_modes == ["none", "core", "full"]
    for mode in ("core", "full"):  # the same quantized model as calibrating here gives (same float weights, images)
        assert torch.equal(_outputs(tmp_path / "pre", mode), _outputs(tmp_path / "calibrated", mode))
    conv = ConvertManifest.load(tmp_path / "pre").conversions["tiny"]
    q = conv["weights"]["quantized"]
    assert q["origin"] == "file" and q["path"] == str(quantized_file) and len(q["sha256"]) == 64
    assert any("pre-quantized weights (not calibrated here)" in n for n in conv["notes"])
    agreement = conv["host_check"]["top1_agreement"]["core"]  # the check still runs, and agrees as calibrating does
    calibrated_agreement = ConvertManifest.load(tmp_path / "calibrated").conversions["tiny"]["host_check"]
    assert agreement["agree"] >= 3 and agreement == calibrated_agreement["top1_agreement"]["core"]
    assert "quantized" not in ConvertManifest.load(tmp_path / "calibrated").conversions["tiny"]["weights"]


def test_changed_quantized_file_rebuilds_only_the_quantized_modes(tmp_path, quantized_file):
    import torch

    from converter import ConvertSettings, convert

    mine = tmp_path / "q.pth"
    mine.write_bytes(quantized_file.read_bytes())
    s = ConvertSettings(out=tmp_path / "m", model=TINY, weights="random", calibration_count=4, build_dir=tmp_path,
                        quantized_weights=str(mine))
    assert convert(s).built_modes == ["none", "core", "full"]
    assert convert(s).reused
    state = torch.load(mine, weights_only=True)
    state["fc.scale"] = state["fc.scale"] * 2  # the output layer's scale: other weights, same structure
    torch.save(state, mine)
    assert sorted(convert(s).built_modes) == ["core", "full"]
    from dataclasses import replace

    assert sorted(convert(replace(s, quantized_weights="calibrate")).built_modes) == ["core", "full"]


def test_float_state_dict_is_named_and_nothing_is_written(tmp_path):
    import torch

    float_file = tmp_path / "float.pth"
    torch.save(_tiny().state_dict(), float_file)
    r = invoke("convert", "--model", TINY, "--weights", "random", "--quantized-weights", "float.pth",
               "--out", "out", cwd=tmp_path)  # relative to the working directory, as a user types it
    assert r.returncode == 2, r.stderr
    assert "holds float weights, not quantized ones" in r.stderr and "--weights PATH" in r.stderr
    assert "Traceback" not in r.stderr
    assert _written(tmp_path / "out") == []  # refused before quant_none was written


def test_per_channel_weights_are_refused_for_nnapi(tmp_path):
    import torch

    per_channel = tmp_path / "fbgemm.pth"
    torch.save(_quantized_state(_tiny(), "fbgemm"), per_channel)
    r = invoke("convert", "--model", TINY, "--weights", "random", "--quantized-weights", str(per_channel),
               "--out", str(tmp_path / "out"))
    assert r.returncode == 6, r.stderr
    assert "per channel" in r.stderr and "qnnpack" in r.stderr and "Traceback" not in r.stderr
    assert _written(tmp_path / "out") == []


def test_quantized_weights_of_another_model_do_not_fit(tmp_path):
    import torch

    other = tmp_path / "other.pth"
    lin = torch.ao.nn.quantized.Linear(4, 2)
    torch.save(lin.state_dict(), other)
    r = invoke("convert", "--model", TINY, "--weights", "random", "--quantized-weights", str(other),
               "--out", str(tmp_path / "out"))
    assert r.returncode == 6, r.stderr
    assert "do not fit" in r.stderr and "Traceback" not in r.stderr
    assert _written(tmp_path / "out") == []


@pytest.mark.parametrize("value, needles", [
    ("/nonexistent/q.pth", ["neither 'calibrate', 'pretrained' nor an existing file"]),
    ("pretrained", ["only applies to torchvision models"]),
])
def test_bad_values_fail_before_torch(tmp_path, value, needles):
    r = invoke("convert", "--model", TINY, "--weights", "random", "--quantized-weights", value,
               "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr
    for n in needles:
        assert n in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_pretrained_offline_names_the_quantized_file_and_its_place(tmp_path):
    r = invoke("convert", "--weights", "random", "--quantized-weights", "pretrained", "--quant", "full",
               "--out", str(tmp_path / "o"),
               env={"TORCH_HOME": str(tmp_path / "torch-home"), "https_proxy": f"http://127.0.0.1:{held_dead_port()}",
                    "HTTPS_PROXY": f"http://127.0.0.1:{held_dead_port()}"})
    assert r.returncode == 2, r.stderr
    assert "https://download.pytorch.org/models/quantized/mobilenet_v2_qnnpack_" in r.stderr
    assert str(tmp_path / "torch-home" / "hub" / "checkpoints") in r.stderr
    assert "--quantized-weights path/to/quantized_state_dict.pth" in r.stderr
    assert not (tmp_path / "o" / "manifest.json").exists()


@pytest.mark.slow
def test_pretrained_quantized_weights_come_from_the_hub_cache(tmp_path):
    """torchvision's QNNPACK weights file where torch hub keeps it is what --quantized-weights pretrained reads
    (this test's file is a quantized random MobileNetV2: the mechanism, not trained weights)."""
    import torch
    import torchvision.models as tvm

    from converter.models import build_float_model, estimate_batchnorm, parse_model, parse_weights
    from converter.calibration import load_batch, parse_calibration

    enum = tvm.get_model_weights("quantized_mobilenet_v2").DEFAULT
    assert enum.meta["backend"] == "qnnpack"
    home = tmp_path / "torch-home"
    cached = home / "hub" / "checkpoints" / enum.url.rsplit("/", 1)[1]
    cached.parent.mkdir(parents=True)
    # two calibration images, here and in convert: what is checked is where the file comes from, not its ranges
    model, _ = build_float_model(parse_model("mobilenet_v2"), parse_weights("random"))
    estimate_batchnorm(model, load_batch(parse_calibration(None, 2, 0), (224, 224)))
    torch.save(_quantized_state(model, count=2), cached)
    r = invoke("convert", "--weights", "random", "--quantized-weights", "pretrained", "--quant", "full",
               "--out", str(tmp_path / "o"), "--no-verify",
               env={"INVOKE_CONVERT_CALIBRATION_COUNT": "2", "TORCH_HOME": str(home), "https_proxy": f"http://127.0.0.1:{held_dead_port()}", "HTTPS_PROXY": f"http://127.0.0.1:{held_dead_port()}"})
    assert r.returncode == 0, r.stderr
    q = ConvertManifest.load(tmp_path / "o").conversions["mobilenetv2"]["weights"]["quantized"]
    assert q["origin"] == "pretrained" and q["url"] == enum.url


def test_torchvisions_per_channel_quantized_weights_are_refused_by_name():
    """resnet18's pre-quantized weights in torchvision are fbgemm's (per channel): refused before any download."""
    from converter.models import parse_model
    from converter.prequantized import pretrained_quantized_enum
    from toolchain.errors import UsageError

    assert pretrained_quantized_enum(parse_model("mobilenet_v2")).meta["backend"] == "qnnpack"
    with pytest.raises(UsageError, match="are for fbgemm, not qnnpack"):
        pretrained_quantized_enum(parse_model("resnet18"))


@pytest.mark.parametrize("damage", ["nan_bias", "inf_scale"])
def test_non_finite_quantized_weights_are_refused_before_anything_is_written(tmp_path, quantized_file, damage):
    """A damaged pre-quantized checkpoint (NaN in a float bias, an infinite output scale) is refused like damaged
    float weights: every output it reaches would be NaN on any backend, and verify would blame NNAPI."""
    import torch

    state = torch.load(quantized_file, weights_only=False)
    if damage == "nan_bias":
        key = next(k for k, v in state.items() if isinstance(v, tuple) or (k.endswith("bias") and v is not None))
        value = state[key]
        if isinstance(value, tuple):  # packed (weight, bias) of a quantized linear layer
            w, b = value
            state[key] = (w, torch.full_like(b, float("nan")))
        else:
            state[key] = torch.full_like(value, float("nan"))
    else:
        key = next(k for k, v in state.items() if k.endswith(".scale") and isinstance(v, torch.Tensor))
        state[key] = torch.full_like(state[key], float("inf"))
    bad = tmp_path / "damaged.pth"
    torch.save(state, bad)
    r = invoke("convert", "--model", TINY, "--weights", "random", "--quantized-weights", str(bad),
               "--out", str(tmp_path / "out"))
    assert r.returncode == 6, r.stderr
    assert "NaN or infinite" in r.stderr and key.split(".")[0] in r.stderr and "Traceback" not in r.stderr
    assert _written(tmp_path / "out") == []
