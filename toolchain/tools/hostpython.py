"""The host Python that PyTorch's build scripts run (``$PYTHON`` of build_android.sh)."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from toolchain.errors import ToolFailed, ToolNotFound
from toolchain.pins import Lane
from toolchain.runner import run

# PyTorch's build (its code generators) imports these with $PYTHON.
BUILD_MODULES = ("yaml", "typing_extensions")
PROBE = (
    "import sys, importlib.util as u; print('%d.%d.%d' % sys.version_info[:3]); print(sys.executable); "
    f"print(' '.join(m for m in {BUILD_MODULES!r} if u.find_spec(m) is None))"
)
PIP_NAMES = {"yaml": "pyyaml", "typing_extensions": "typing_extensions"}


@dataclass(frozen=True)
class HostPython:
    path: Path
    version: Tuple[int, int, int]
    missing_modules: Tuple[str, ...] = ()

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version))

    @classmethod
    def locate(cls, configured: Optional[str] = None) -> "HostPython":
        """``pytorch.python`` (a path or a name on PATH) or, by default, the Python running torchdroid."""
        exe = configured or sys.executable
        found = shutil.which(exe) if not Path(exe).is_absolute() else (exe if Path(exe).exists() else None)
        if not found:
            raise ToolNotFound(
                f"the host Python {exe!r} (config pytorch.python) was not found",
                remedy="set pytorch.python in invoke.yaml (or pass --python) to an existing interpreter path",
            )
        try:
            res = run([found, "-c", PROBE], what=f"`{exe}`", timeout=60)
        except ToolFailed as e:
            raise ToolNotFound(f"the host Python {found} does not run", cause=e.what,
                               remedy="set pytorch.python to a working interpreter") from e
        lines = res.lines
        major, minor, micro = (int(x) for x in lines[0].split("."))
        missing = tuple(lines[2].split()) if len(lines) > 2 else ()
        return cls(Path(lines[1] if len(lines) > 1 and lines[1] else found), (major, minor, micro), missing)

    def fits(self, lane: Lane) -> bool:
        return lane.host_python_min <= self.version[:2] <= lane.host_python_max

    def check(self, lane: Lane) -> "HostPython":
        if self.fits(lane):
            if self.missing_modules:
                pkgs = " ".join(PIP_NAMES.get(m, m) for m in self.missing_modules)
                raise ToolNotFound(
                    f"host Python {self.version_str} ({self.path}) lacks {', '.join(self.missing_modules)}",
                    cause="PyTorch's code generators import them with the build's $PYTHON",
                    remedy=f"{self.path} -m pip install {pkgs} (or set pytorch.python / --python to another Python)",
                )
            return self
        low = ".".join(map(str, lane.host_python_min))
        high = ".".join(map(str, lane.host_python_max))
        newer = self.version[:2] > lane.host_python_max
        raise ToolNotFound(
            f"host Python {self.version_str} ({self.path}) is {'newer' if newer else 'older'} than lane "
            f"{lane.name!r} accepts ({low} to {high})",
            cause=f"the build scripts of PyTorch {lane.pytorch_ref} run with $PYTHON"
                  + (" and use modules newer Pythons removed (distutils)" if newer else ""),
            remedy=f"install Python {high} (e.g. `uv python install {high}` or pyenv; it needs pyyaml and "
                   f"typing_extensions) and point torchdroid at it: --python /path/to/python{high}, "
                   "or config pytorch.python "
                   f"(`pytorch: {{python: /path/to/python{high}}}` in invoke.yaml)",
        )
