import pytest

from converter import ConvertSettings, validate
from converter.models import parse_model, parse_weights
from toolchain.errors import UsageError


def test_validate_normalises_modes_in_pipeline_order(tmp_path):
    modes = validate(ConvertSettings(out=tmp_path, modes=("FULL", "none", "full"), weights="random"))[3]
    assert modes == ("none", "full")


def test_validate_rejects_empty_modes(tmp_path):
    with pytest.raises(UsageError, match="no quantization mode"):
        validate(ConvertSettings(out=tmp_path, modes=(), weights="random"))


def test_model_stems():
    assert parse_model("mobilenet_v2").stem == "mobilenetv2"
    assert parse_model("resnet18").stem == "resnet18"
    assert parse_model("inception_v3").input_hw == (299, 299)


def test_weights_choices(tmp_path):
    assert parse_weights("random", seed=3).key() == {"origin": "random", "sha256": None, "seed": 3}
    f = tmp_path / "w.pth"
    f.write_bytes(b"x")
    assert parse_weights(str(f)).origin == "file"
    with pytest.raises(UsageError):
        parse_weights("")


def test_synthetic_calibration_is_image_like():
    from converter.calibration import synthetic_images

    a = synthetic_images(4, 0, (32, 32))
    b = synthetic_images(4, 0, (32, 32))
    assert all((x == y).all() for x, y in zip(a, b))  # deterministic
    x = a[0]
    assert x.shape == (1, 3, 32, 32)
    # normalised pixels in [0, 1] land in [-2.2, 2.7]; not constant
    assert float(x.min()) >= -2.2 and float(x.max()) <= 2.7 and float(x.std()) > 0.1


def test_degenerate_observers_found():
    import torch

    from converter.export import degenerate_observers

    m = torch.ao.quantization.QuantWrapper(torch.nn.Sequential(torch.nn.Conv2d(1, 1, 1), torch.nn.ReLU()))
    m.eval()
    m.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    torch.ao.quantization.prepare(m, inplace=True)
    m(torch.zeros(1, 1, 4, 4))
    assert degenerate_observers(m)
    m2 = torch.ao.quantization.QuantWrapper(torch.nn.Sequential(torch.nn.Conv2d(1, 1, 1)))
    m2.eval()
    m2.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    torch.ao.quantization.prepare(m2, inplace=True)
    m2(torch.randn(1, 1, 4, 4))
    assert not degenerate_observers(m2)


def test_estimate_batchnorm_finds_every_batchnorm_kind_through_torch_public_classes():
    """BatchNorm layers are found by torch's public classes (no private base class): 1-d, 2-d and lazy ones."""
    import torch

    from converter.models import estimate_batchnorm

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 8 * 8, 6), torch.nn.BatchNorm1d(6))
    assert estimate_batchnorm(model, [torch.randn(1, 3, 8, 8) for _ in range(2)]) == 2
    assert float(model[1].running_var.sum()) != 4.0  # the statistics were set from the batch
    assert estimate_batchnorm(torch.nn.Sequential(torch.nn.Linear(3, 3)), [torch.randn(1, 3)]) == 0


def test_xnnpack_available_is_torchs_own_answer():
    import torch.backends.xnnpack

    from converter.export import xnnpack_available

    assert xnnpack_available() is bool(torch.backends.xnnpack.enabled)
