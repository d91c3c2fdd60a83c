"""MobileNetV2 converted once per test run (random weights, 8 synthetic calibration inputs), as `invoke all` does.

One artefact for every test that only reads the converted files: the integration fixture ``mobilenet_models`` and
the make-app tests' quant_full app (they converted it a second time, quant_full only, before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Tuple

from tests.shared import built_once


def converted_mobilenet() -> Tuple[Path, Any]:
    """``(models directory, convert's result)``: six files and a manifest, read-only (copy before changing)."""
    return built_once("mobilenet-models", _convert)


def _convert(home: Path) -> Tuple[Path, Any]:
    from converter import ConvertSettings, convert

    out = home / "models"
    return out, convert(ConvertSettings(out=out, weights="random", calibration_count=8, build_dir=home / "build"))
