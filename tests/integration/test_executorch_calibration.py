"""The int8 (PT2E) program's calibration runs the calibration set CALIBRATION_CHUNK inputs per call, as the legacy
modes' calibration does: the observers' per-call work (histograms of every activation) is done once per chunk, not
once per image (issue 22 item 5: 32 one-image calls took 50 s of a cold convert here, two calls of 16 take 19 s)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("executorch")

from tests.executorch_support.lane import ROOT, TINY  # noqa: E402

pytestmark = pytest.mark.slow  # the tiny model's ExecuTorch programs converted twice (~20 s)

ONE_IMAGE_ONLY = f"{ROOT / 'tests' / 'converter_support' / 'user_models.py'}:one_image_only"


def _calibration_calls(monkeypatch):
    """The batch size of every call of the prepared (observed) PT2E graph."""
    import torchao.quantization.pt2e.quantize_pt2e as pt2e

    sizes = []
    real = pt2e.prepare_pt2e

    def prepare(model, quantizer):
        prepared = real(model, quantizer)
        prepared.register_forward_pre_hook(lambda _m, args: sizes.append(int(args[0].shape[0])))
        return prepared
    monkeypatch.setattr(pt2e, "prepare_pt2e", prepare)
    return sizes


def _convert(tmp_path, model, count):
    from converter.executorch import ExecutorchSettings, convert_executorch

    return convert_executorch(ExecutorchSettings(out=tmp_path / "m", model=model, weights="random",
                                                 calibration_count=count, delegates=("xnnpack",)))


def test_the_int8_program_is_calibrated_in_chunks(tmp_path, monkeypatch):
    from converter.samples import CALIBRATION_CHUNK

    sizes = _calibration_calls(monkeypatch)
    result = _convert(tmp_path, TINY, CALIBRATION_CHUNK + 4)
    assert sizes == [CALIBRATION_CHUNK, 4]
    assert result.built == ["fp32-xnnpack", "int8-xnnpack"]
    int8 = next(f for f in result.files if f.precision == "int8")
    assert int8.extra["quantization"]["calibration"]["count"] == CALIBRATION_CHUNK + 4
    assert int8.extra["host_check"]["ran"]


def test_a_model_that_takes_one_image_only_is_calibrated_one_image_per_call(tmp_path, monkeypatch):
    sizes = _calibration_calls(monkeypatch)
    result = _convert(tmp_path, ONE_IMAGE_ONLY, 5)
    assert sizes == [1] * 5
    assert result.built == ["fp32-xnnpack", "int8-xnnpack"]
