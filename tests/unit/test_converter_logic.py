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


def test_batchnorm_statistics_are_estimated_only_for_weights_known_to_be_an_untrained_init(tmp_path):
    """torchvision's random weights: estimated (already said by the random-weights note); a factory's with every
    BatchNorm at the untrained statistics: estimated, with a note; a factory's statistics that are not the init
    (weights it loads itself) and weights from a file are never touched."""
    from pathlib import Path

    import torch

    from converter.models import calibrate_batchnorm
    from tests.converter_support import user_models

    batch = [torch.rand(1, 3, 32, 32) for _ in range(2)]
    factory = parse_model(f"{Path(user_models.__file__)}:shrinks")
    random, torchvision = parse_weights("random"), parse_model("mobilenet_v2")
    record = {}
    model = user_models.shrinks()
    said = calibrate_batchnorm(factory, random, model, batch, record)
    assert "untrained" in said and "2 calibration inputs (4 layers)" in record["batchnorm_statistics"]
    assert float(model.features[1].running_var.max()) < 1e-2  # the statistics of the shrunken activations
    record = {}
    assert calibrate_batchnorm(torchvision, random, user_models.shrinks(), batch, record) is None
    assert record["batchnorm_statistics"] == "estimated on the 2 calibration inputs (4 layers)"
    loaded, record = user_models.shrinks_with_statistics(), {}
    assert calibrate_batchnorm(factory, random, loaded, batch, record) is None and "kept" in record["batchnorm_statistics"]
    assert torch.equal(loaded.features[1].running_var, torch.full((8,), 1e-8))
    weights_file = tmp_path / "w.pt"
    weights_file.write_bytes(b"x")
    untouched, record = user_models.shrinks(), {}
    assert calibrate_batchnorm(factory, parse_weights(str(weights_file)), untouched, batch, record) is None
    assert record == {} and float(untouched.features[1].running_var.min()) == 1.0


def test_xnnpack_available_is_torchs_own_answer():
    import torch.backends.xnnpack

    from converter.export import xnnpack_available

    assert xnnpack_available() is bool(torch.backends.xnnpack.enabled)


def test_inputs_on_the_command_line_are_parsed_with_clear_errors(tmp_path):
    """--inputs (convert.inputs): one DTYPE[1,...] per forward() argument, an optional @LO:HI range; anything else is
    a usage error (exit 2) naming the item, why, and the syntax with an example; a torchvision model refuses it."""
    from converter.input_specs import inputs_text, parse_inputs

    specs = parse_inputs(" int64[1, 16]@0:1000 ; float32[1,1,16000]")
    assert inputs_text(specs) == "int64[1,16]@0:1000;float32[1,1,16000]"
    assert parse_inputs("") == () and parse_inputs(None) == ()
    for bad, why in [("int64[2,16]", "batch"), ("complex[1,4]", "unknown dtype"), ("float32[1,0]", "positive"),
                     ("float32(1,4)", "expected DTYPE"), ("int64[1,4]@0.5:3", "whole-number"),
                     ("float32[1,4]@3:1", "empty"), ("int64[1,4];", "expected DTYPE"), ("bool[1,4]@0:1", "bool")]:
        with pytest.raises(UsageError) as e:
            parse_inputs(bad)
        assert why in e.value.cause and e.value.exit_code == 2 and "--inputs" in e.value.remedy, bad
    with pytest.raises(UsageError, match="--inputs applies to a model file"):
        parse_model("mobilenet_v2", inputs="float32[1,3,160,160]")
    f = tmp_path / "net.py"
    f.write_text("def net(): ...\n")
    spec = parse_model(f"{f}:net", inputs="int64[1,8]@0:50")
    assert spec.key()["inputs"] == "int64[1,8]@0:50" and "inputs" not in parse_model(f"{f}:net").key()


def test_inputs_from_the_command_line_sample_their_dtype_shape_and_range():
    import torch

    from converter.calibration import declared_samples
    from converter.input_specs import parse_inputs, sampler

    fn = sampler(parse_inputs("int64[1,8]@5:9;float32[1,1,64]@-2:2;int32[1,3];bool[1,2]"))
    a, b = declared_samples(fn, 3, 7, "net"), declared_samples(fn, 3, 7, "net")
    assert all((x == y).all() for s, t in zip(a, b) for x, y in zip(s, t))  # seeded as a declared function is
    tokens, audio, ids, mask = a[0]
    assert tokens.dtype == torch.int64 and tokens.shape == (1, 8) and 5 <= int(tokens.min()) <= int(tokens.max()) < 9
    assert audio.dtype == torch.float32 and audio.shape == (1, 1, 64) and -2 <= float(audio.min()) < float(audio.max()) < 2
    assert ids.dtype == torch.int32 and int(ids.max()) < 2 and mask.dtype == torch.bool


def test_a_model_that_does_not_take_the_image_is_told_how_to_declare_its_inputs():
    """A model that fails on torchdroid's image (a token or audio model with nothing declared) is told how to declare
    what it takes (issue 35: "make the model take 3-channel images" was the only advice), with the --inputs syntax."""
    import torch

    from converter.export import input_error
    from converter.input_specs import EXAMPLE

    e = input_error(RuntimeError("Expected tensor of type Long"), "tokens", torch.zeros(1, 3, 224, 224))
    assert "1x3x224x224" in e.what and "_example_inputs()" in e.remedy and f'--inputs "{EXAMPLE}"' in e.remedy


def test_the_few_inputs_warning_names_the_declared_inputs_not_synthetic_images():
    from converter.calibration import parse_calibration, record_for

    calib = parse_calibration(None, 4, 0, warn=False)
    declared = record_for(calib, "net_example_inputs()")
    assert "net_example_inputs()" in declared["warning"] and "synthetic" not in declared["warning"]
    assert "(synthetic)" in record_for(calib)["warning"]  # the images, when they are what calibrates
