"""A local stand-in for the pytorch/executorch remote at the pinned release (see runtime_fixture/)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

from tests.ndk_support import _git

FIXTURE = Path(__file__).resolve().parent / "runtime_fixture"


@dataclass(frozen=True)
class FakeExecutorch:
    url: str
    commit: str


def make_fake_executorch(root: Path) -> FakeExecutorch:
    """A bare repository holding the fixture tree as one commit (no submodules: the fixture needs none)."""
    work = Path(root) / "executorch-work"
    shutil.copytree(FIXTURE, work)
    _git("init", "-q", "-b", "main", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "executorch fixture at the pinned release", cwd=work)
    bare = Path(root) / "executorch.git"
    _git("clone", "-q", "--bare", str(work), str(bare), cwd=Path(root))
    return FakeExecutorch(bare.as_uri(), _git("rev-parse", "HEAD", cwd=work))


def fake_pte(path: Path, size: int = 4096) -> Path:
    """Bytes with the .pte flatbuffer identifier where the runtime looks for it."""
    path.write_bytes(b"\x1c\x00\x00\x00ET12" + bytes(range(256)) * (size // 256))
    return path


def cmake_env_for_arm64() -> Optional[Dict[str, str]]:
    """An environment whose PATH finds a CMake >= 3.26 first, as the arm64-v8a lane needs (docs/facts.md TC1): the
    one on PATH, else $TORCHDROID_TEST_CMAKE, else the CMake 4 `./run test` installs into <venv>/cmake4; None when
    there is none (Debian 12's cmake is 3.25.1)."""
    from toolchain.pins import CMAKE_MIN_ARM
    from toolchain.tools.programs import CMake

    path = os.environ.get("PATH", "")
    candidates = [None, os.environ.get("TORCHDROID_TEST_CMAKE"), str(Path(sys.prefix) / "cmake4" / "bin" / "cmake")]
    for exe in candidates:
        env = {"PATH": path} if exe is None else {"PATH": f"{Path(exe).parent}{os.pathsep}{path}"}
        if exe is not None and not Path(exe).is_file():
            continue
        found = CMake.locate(env)
        if found.version is not None and found.version >= CMAKE_MIN_ARM:
            return env
    return None
