"""One small ExecuTorch conversion shared by a test session (lowering costs seconds per program)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = f"{ROOT / 'tests' / 'converter_support' / 'user_models.py'}:tiny"


def convert_tiny(out: Path, delegates=("xnnpack", "portable", "vulkan"), legacy: bool = True):
    """The tiny user model as legacy TorchScript (none, full) and as .pte programs, into ``out``."""
    from converter import ConvertSettings, convert
    from converter.executorch import ExecutorchSettings, convert_executorch

    common = dict(out=out, model=TINY, weights="random", calibration_count=4)
    legacy_result = convert(ConvertSettings(**common, modes=("none", "full"), build_dir=out.parent / "build")) if legacy else None
    return legacy_result, convert_executorch(ExecutorchSettings(**common, delegates=tuple(delegates)))


def copy_models(src: Path, dst: Path) -> Path:
    """A private copy of a session conversion, for tests that tamper with it."""
    shutil.copytree(src, dst)
    return dst


def find_pte(models_dir: Path, name: str):
    """Look a program up by ``fp32-xnnpack`` (when unambiguous) or ``mobilenetv2-fp32-xnnpack``."""
    from toolchain.errors import UsageError
    from toolchain.records import pte_files

    files = pte_files(models_dir)
    matches = [f for f in files if name in (f.qualified_variant, f.variant)]
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(sorted(f.qualified_variant for f in files))
    raise UsageError(f"{'ambiguous' if matches else 'no'} ExecuTorch program {name!r} in {models_dir}",
                     cause=f"the manifest has: {known}", remedy=f"pick one of: {known}")
