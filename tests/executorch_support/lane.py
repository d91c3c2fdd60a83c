"""One small ExecuTorch conversion shared by a test session (lowering costs seconds per program)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = f"{ROOT / 'tests' / 'converter_support' / 'user_models.py'}:tiny"


def convert_tiny(out: Path, delegates=("xnnpack", "portable", "vulkan"), legacy: bool = True):
    """The tiny user model as legacy TorchScript (none, full) and as .pte programs, into ``out``."""
    from converter import ConvertSettings, convert
    from converter.executorch_lane import ExecutorchSettings, convert_executorch

    common = dict(out=out, model=TINY, weights="random", calibration_count=4)
    legacy_result = convert(ConvertSettings(**common, modes=("none", "full"), build_dir=out.parent / "build")) if legacy else None
    return legacy_result, convert_executorch(ExecutorchSettings(**common, delegates=tuple(delegates)))


def copy_models(src: Path, dst: Path) -> Path:
    """A private copy of a session conversion, for tests that tamper with it."""
    shutil.copytree(src, dst)
    return dst
