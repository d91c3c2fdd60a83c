"""A local stand-in for the pytorch/executorch remote at the pinned release (see runtime_fixture/)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

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
