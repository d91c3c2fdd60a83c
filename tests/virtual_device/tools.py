"""Native stand-ins of device tools, built once per source version and shared by every virtual device.

``tools_dir()`` returns a directory holding ``sha1sum`` (tools/sha1sum.c over the host's libcrypto), or None
when it cannot be built here (no C compiler, no libcrypto): the devices then use the host's coreutils.  A
built tool is used only after it printed the right digests of known inputs.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "tools" / "sha1sum.c"
# static libcrypto first (starts in ~0.6 ms, like toybox), then the shared one (~1.6 ms)
LINKS = (["-Wl,-Bstatic", "-lcrypto", "-Wl,-Bdynamic", "-ldl", "-lpthread"], ["-lcrypto"], ["-l:libcrypto.so.3"])


@functools.lru_cache(maxsize=None)
def tools_dir() -> Optional[Path]:
    """The directory of the built tools (built now if needed), or None."""
    key = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"torchdroid-vdev-tools-{os.getuid()}" / key
    tool = out / "sha1sum"
    if tool.exists() and works(tool):
        return out
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return None
    out.mkdir(parents=True, exist_ok=True)
    for link in LINKS:
        tmp = out / f".sha1sum-{os.getpid()}"
        res = subprocess.run([cc, "-O2", "-o", str(tmp), str(SOURCE), *link], capture_output=True)
        if res.returncode == 0 and works(tmp):
            os.replace(tmp, tool)  # atomic: devices started by another test process see a whole file or none
            return out
        tmp.unlink(missing_ok=True)
    return None


def works(tool: Path) -> bool:
    """The tool prints sha1sum's lines with the right digests (empty input, a file, a missing file)."""
    sample = b"torchdroid\n" * 30000
    with tempfile.NamedTemporaryFile(prefix="vdev-sha1-") as f:
        f.write(sample)
        f.flush()
        try:
            empty = subprocess.run([str(tool)], input=b"", capture_output=True, timeout=30)
            one = subprocess.run([str(tool), f.name, "/nonexistent-vdev"], capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return False
    return (empty.returncode == 0 and empty.stdout == f"{hashlib.sha1(b'').hexdigest()}  -\n".encode()
            and one.returncode == 1 and one.stdout == f"{hashlib.sha1(sample).hexdigest()}  {f.name}\n".encode()
            and b"/nonexistent-vdev" in one.stderr)
