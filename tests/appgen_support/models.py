"""Converted models for the make-app tests, built once per test session with the real converter."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from tests.shared import built_once

HERE = Path(__file__).resolve().parent
_ROOT = Path(tempfile.mkdtemp(prefix="torchdroid-appgen-tests-"))
atexit.register(shutil.rmtree, _ROOT, True)


@functools.cache
def tiny_models() -> Path:
    """All three modes of :mod:`tiny_net` (seconds): for rendering every variant and compiling the Java."""
    return built_once("appgen-tiny", _tiny_models)


def _tiny_models(home: Path) -> Path:
    from converter import ConvertSettings, convert

    out = home / "tiny"
    convert(ConvertSettings(out=out, model=f"{HERE / 'tiny_net.py'}:tiny_net", modes=("none", "core", "full"),
                            weights="random", calibration_count=4, build_dir=home / "build"))
    return out


def mobilenet_full() -> Path:
    """MobileNetV2's converted models (quant_full among them; random weights, synthetic calibration): the run's one
    conversion (tests/converter_support/mobilenet.py)."""
    from tests.converter_support.mobilenet import converted_mobilenet

    return converted_mobilenet()[0]


def scratch(name: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_ROOT))
    return path


@functools.cache
def tiny_programs() -> Path:
    """The tiny user model as ExecuTorch programs (fp32/int8 XNNPACK, portable, Vulkan) with the real converter (~20 s)."""
    return built_once("appgen-tiny-programs", _tiny_programs)


def _tiny_programs(home: Path) -> Path:
    from tests.executorch_support.lane import convert_tiny

    out = home / "programs"
    convert_tiny(out, delegates=("xnnpack", "portable", "vulkan"), legacy=False)
    return out
