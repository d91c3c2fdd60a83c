"""Native stand-ins of device tools, built once per source version and shared by every virtual device.

``tools_dir()`` returns a directory holding ``sha256sum`` (tools/sha256sum.c over the host's libcrypto) and, when
they build, ``mv``, ``chmod``, ``mkdir`` and ``rm`` (tools/*.c: a few system calls for the simple forms a deploy
uses, coreutils for everything else), or None when sha256sum cannot be built here (no C compiler, no
libcrypto): the devices then use the host's coreutils.  A built tool is used only after it behaved like
coreutils on known inputs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "tools" / "sha256sum.c"
SOURCES = {name: HERE / "tools" / f"{name}.c" for name in ("sha256sum", "mv", "chmod", "mkdir", "rm")}
# static libcrypto first (starts in ~0.6 ms, like toybox), then the shared one (~1.6 ms)
LINKS = (["-Wl,-Bstatic", "-lcrypto", "-Wl,-Bdynamic", "-ldl", "-lpthread"], ["-lcrypto"], ["-l:libcrypto.so.3"])
STATIC = (["-static"], [])  # mv, chmod: static starts in ~0.4 ms, coreutils' in ~1 ms


@functools.lru_cache(maxsize=None)
def tools_dir() -> Optional[Path]:
    """The directory of the built tools (built now if needed), or None."""
    key = hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES.values())).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"torchdroid-vdev-tools-{os.getuid()}" / key
    if not _ready(out, "sha256sum", LINKS, works):
        return None
    _ready(out, "mv", STATIC, mv_works)  # optional: without them the devices use coreutils'
    _ready(out, "chmod", STATIC, chmod_works)
    _ready(out, "mkdir", STATIC, mkdir_works)
    _ready(out, "rm", STATIC, rm_works)
    return out


def _ready(out: Path, name: str, links: Sequence[List[str]], check: Callable[[Path], bool]) -> bool:
    """``out/name`` exists and works, built now (with the first of ``links`` that gives a working tool) if needed."""
    tool = out / name
    if tool.exists() and check(tool):
        return True
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return False
    out.mkdir(parents=True, exist_ok=True)
    for link in links:
        tmp = out / f".{name}-{os.getpid()}"
        res = subprocess.run([cc, "-O2", "-o", str(tmp), str(SOURCES[name]), *link], capture_output=True)
        if res.returncode == 0 and check(tmp):
            os.replace(tmp, tool)  # atomic: devices started by another test process see a whole file or none
            return True
        tmp.unlink(missing_ok=True)
    return False


def works(tool: Path) -> bool:
    """The tool prints sha256sum's lines with the right digests (empty input, a file, a missing file)."""
    sample = b"torchdroid\n" * 30000
    with tempfile.NamedTemporaryFile(prefix="vdev-sha256-") as f:
        f.write(sample)
        f.flush()
        try:
            empty = subprocess.run([str(tool)], input=b"", capture_output=True, timeout=30)
            one = subprocess.run([str(tool), f.name, "/nonexistent-vdev"], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return False
    return (empty.returncode == 0 and empty.stdout == f"{hashlib.sha256(b'').hexdigest()}  -\n".encode()
            and one.returncode == 1 and one.stdout == f"{hashlib.sha256(sample).hexdigest()}  {f.name}\n".encode()
            and b"/nonexistent-vdev" in one.stderr)


def compare_with_coreutils(tool: Path, real: str, cases: Sequence[List[str]],
                           setup: Callable[[Path], None]) -> List[str]:
    """Run each case with ``tool`` and with coreutils' ``real`` in fresh directories made by ``setup``; return
    the differences (exit code, output, the files left and their modes), [] when there are none."""
    diffs = []
    for args in cases:
        seen = []
        for exe in (str(tool), real):
            with tempfile.TemporaryDirectory(prefix="vdev-tool-") as d:
                setup(Path(d))
                try:
                    res = subprocess.run([Path(real).name, *args], executable=exe, cwd=d, capture_output=True,
                                         timeout=30, stdin=subprocess.DEVNULL)
                except (OSError, subprocess.SubprocessError) as e:
                    seen.append(repr(e))
                    continue
                seen.append((res.returncode, res.stdout, res.stderr, _tree(Path(d))))
        if seen[0] != seen[1]:
            diffs.append(f"{args}: {seen[0]!r} != {seen[1]!r}")
    return diffs


def _tree(root: Path) -> Dict[str, tuple]:
    return {str(p.relative_to(root)): (oct(p.lstat().st_mode), p.read_bytes() if p.is_file() else b"")
            for p in sorted(root.rglob("*"))}


def _files(d: Path) -> None:
    (d / "a").write_bytes(b"a")
    (d / "b").write_bytes(b"b")
    (d / "dir").mkdir()
    os.chmod(d / "a", 0o666)
    (d / "lock").mkdir()  # a device lock: a directory with its owner file
    (d / "lock" / "owner").write_bytes(b"1 host 0 t\n")
    (d / "deep" / "sub").mkdir(parents=True)
    (d / "deep" / "sub" / "f").write_bytes(b"f")


MV_CASES = (["-f", "a", "c"], ["a", "b"], ["-f", "a", "b"], ["a", "dir"], ["a", "a"], ["missing", "c"], ["a"],
            ["-f", "dir", "d2"], ["a", "b", "dir"])
CHMOD_CASES = (["644", "a", "b"], ["755", "a"], ["u+x", "a"], ["644", "missing", "a"], ["755", "dir"], ["0640", "a"],
               ["99", "a"], ["644"])


MKDIR_CASES = (["new"], ["dir"], ["a"], ["missing/new"], ["-p", "x/y"], ["new", "new2"], [])
RM_CASES = (["-rf", "lock", "a", "missing", "m*"], ["-rf", "deep"], ["-rf", "lock", "deep", "b"], ["-f", "a"],
            ["-rf", "."], ["-rf"], ["a", "dir"], ["-rf", "dir/"])


def mkdir_works(tool: Path) -> bool:
    """``mkdir`` leaves what coreutils' leaves, with the same exit codes and messages."""
    return not compare_with_coreutils(tool, "/usr/bin/mkdir", MKDIR_CASES, _files)


def rm_works(tool: Path) -> bool:
    """``rm`` leaves what coreutils' leaves, with the same exit codes and messages."""
    return not compare_with_coreutils(tool, "/usr/bin/rm", RM_CASES, _files)


def mv_works(tool: Path) -> bool:
    """``mv`` leaves what coreutils' leaves, with the same exit codes and messages."""
    return shutil.which("mv") is not None and not compare_with_coreutils(tool, "/usr/bin/mv", MV_CASES, _files)


def chmod_works(tool: Path) -> bool:
    """``chmod`` leaves what coreutils' leaves, with the same exit codes and messages."""
    return not compare_with_coreutils(tool, "/usr/bin/chmod", CHMOD_CASES, _files)
