"""`invoke convert --format torchscript,executorch` prepares the float model once: the ExecuTorch lane takes the
model, weights record and calibration batch the TorchScript lane made (converter/prepared.py), and writes the
same program it writes on its own."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("executorch")

from tests.executorch_support.lane import TINY  # noqa: E402
from toolchain.records import load_section  # noqa: E402


def _programs(out):
    """Each program's sha256, and the reference file's (its int8 outputs come from the PT2E-quantized graph)."""
    section = load_section(out)
    return {**{e["file"]: e["sha256"] for e in section["files"]},
            **{r["file"]: r["sha256"] for r in section["reference"].values()}}


@pytest.mark.slow
def test_the_executorch_lane_reuses_the_float_model_and_batch_and_writes_the_same_program(tmp_path, monkeypatch):
    from converter import ConvertSettings, convert, executorch, prepared
    from converter.executorch import ExecutorchSettings, convert_executorch

    common = dict(model=TINY, weights="random", calibration_count=4)
    prepared.forget()
    alone = convert_executorch(ExecutorchSettings(out=tmp_path / "alone", delegates=("portable",), **common))
    assert alone.built == ["fp32-portable"]
    estimated = "BatchNorm statistics estimated"  # tiny's BatchNorm is untrained: estimated alone as with both lanes
    assert len([n for n in alone.notes if estimated in n]) == 1

    convert(ConvertSettings(out=tmp_path / "both", modes=("none",), build_dir=tmp_path / "build", **common))

    def built_again(*args, **kwargs):
        raise AssertionError("the ExecuTorch lane built the float model or read the calibration set again")

    monkeypatch.setattr(executorch, "build_float_model", built_again)
    monkeypatch.setattr(executorch, "load_batch", built_again)
    monkeypatch.setattr(executorch, "calibrate_batchnorm", built_again)
    both = convert_executorch(ExecutorchSettings(out=tmp_path / "both", delegates=("portable",), **common))
    assert both.built == ["fp32-portable"] and not [n for n in both.notes if estimated in n]  # the TorchScript lane's
    assert _programs(tmp_path / "both") == _programs(tmp_path / "alone")
    prepared.forget()


def test_other_inputs_are_not_taken(tmp_path):
    from converter import ConvertSettings, convert, prepared
    from converter.calibration import parse_calibration
    from converter.models import parse_model, parse_weights
    from converter.torch_state import for_conversion

    prepared.forget()
    convert(ConvertSettings(out=tmp_path / "m", model=TINY, weights="random", calibration_count=4, modes=("none",),
                            build_dir=tmp_path / "build"))
    spec, weights = parse_model(TINY), parse_weights("random")
    with for_conversion():
        assert prepared.take(spec, weights, parse_calibration(None, 4, 0)) is not None
        assert prepared.take(spec, weights, parse_calibration(None, 5, 0)) is None
        assert prepared.take(spec, parse_weights("random", seed=1), parse_calibration(None, 4, 0)) is None
    assert prepared.take(spec, weights, parse_calibration(None, 4, 0)) is None  # oneDNN on: other numerics
    prepared.forget()


@pytest.mark.slow
def test_a_format_that_cannot_take_the_model_does_not_stop_the_other(tmp_path):
    """Several outputs stop quant_core in the TorchScript lane (its NNAPI wrapper takes one tensor): with
    --format torchscript,executorch the ExecuTorch lane's programs are made all the same, both tables are shown and
    convert exits 10 naming the format that made nothing (issue 35: nothing asked for in one lane is dropped because
    another lane cannot take the model); --quant core asks the ExecuTorch lane for its int8 program."""
    import os
    from pathlib import Path

    from tests import cli

    root = Path(__file__).resolve().parents[2]
    heads = root / "tests" / "host_nnapi_support" / "verify_models.py"
    out = tmp_path / "m"
    r = cli.invoke(root, "--search-root", str(root), "convert", "--model", f"{heads}:two_heads", "--weights", "random",
                   "--quant", "core", "--format", "torchscript,executorch", "--delegates", "xnnpack", "--no-verify",
                   "--out", str(out), env=dict(os.environ, CI="1", INVOKE_CONVERT_CALIBRATION_COUNT="4"), timeout=600)
    assert r.returncode == 10, r.stdout + r.stderr
    assert "the torchscript format made nothing" in r.stderr and "tuple of 2 tensors" in r.stderr, r.stderr
    assert "ExecuTorch programs in" in r.stdout and (out / "two_heads-int8-xnnpack.pte").is_file()
    assert not (out / "two_heads-fp32-xnnpack.pte").exists()  # --quant core: the int8 program only
    assert not list(out.glob("*-cpu.pt")) and not list(out.glob("*-nnapi.pt"))
