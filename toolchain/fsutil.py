"""Atomic writes and hashing: no half-written file under a final name, ever."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator, Union

from .errors import UsageError

PathLike = Union[str, os.PathLike]


def sha256_file(path: PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ensure_writable_dir(path: PathLike, what: str = "output directory") -> Path:
    """Create ``path`` if needed and prove we can write into it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(
            f"the {what} {path} exists and is not a directory",
            remedy="pass a directory path (or remove/rename that file)",
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".torchdroid-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(
            f"the {what} {path} is not writable",
            cause=f"{type(e).__name__}: {e.strerror or e}",
            remedy="choose another directory with --out (or fix its permissions)",
        ) from e
    return path


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (deploy writes from threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(final: PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``final``; move it into place only on success.

    The temporary name starts with ``.`` and ends with ``.partial`` so it can
    never be mistaken for an artefact; on any exception it is removed.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=f"{suffix}.partial", dir=final.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp's 0600 would make artefacts private: use what open() gives
    try:
        yield tmp_path
        if not tmp_path.exists():
            raise FileNotFoundError(f"nothing was written to {tmp_path}")
        os.replace(tmp_path, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            if tmp_path.is_dir():
                shutil.rmtree(tmp_path)
            else:
                tmp_path.unlink()
        raise


def atomic_write_bytes(path: PathLike, data: bytes, mode: int = 0o644) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
    return Path(path)


def atomic_write_text(path: PathLike, text: str, mode: int = 0o644) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), mode)


def atomic_write_json(path: PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def atomic_copy(src: PathLike, dst: PathLike) -> Path:
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)
        shutil.copymode(src, tmp)
    return Path(dst)


@contextlib.contextmanager
def atomic_dir(final: PathLike, force: bool = False) -> Iterator[Path]:
    """Build a directory under a temporary name and move it into place on success.

    ``final`` must not exist, or be empty, unless ``force`` (then the old one is
    replaced only once the new one is complete).
    """
    final = Path(final)
    if final.exists():
        if not final.is_dir():
            raise UsageError(f"{final} exists and is not a directory", remedy="choose another --out")
        if any(final.iterdir()) and not force:
            raise UsageError(
                f"{final} already exists and is not empty",
                remedy="choose a new --out directory, or pass --force to replace it",
            )
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    try:
        yield tmp
        if final.exists():
            old = final.with_name(f".{final.name}.old-{os.getpid()}")
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
