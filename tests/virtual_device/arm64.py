"""Whether this machine can run the virtual arm64 phones' programs: Debian's aarch64 cross compiler, qemu-user, and
the binfmt_misc entry ``./run test`` registers (tests/virtual_device/aarch64_cpu.sh)."""

from __future__ import annotations

import shutil
from pathlib import Path

ENTRY = Path("/proc/sys/fs/binfmt_misc/torchdroid-aarch64")
CPU = Path(__file__).resolve().parent / "aarch64_cpu.sh"


def arm64_cpu_problem() -> str:
    """"" when AArch64 programs run inside virtual arm64 phones here; else why not and the fix."""
    missing = [t for t in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "qemu-aarch64") if not shutil.which(t)]
    if missing:
        return f"missing {', '.join(missing)}: `./run test` installs g++-aarch64-linux-gnu and qemu-user"
    try:
        text = ENTRY.read_text()
    except OSError:
        return f"no binfmt_misc entry {ENTRY.name}: `./run test` registers it (as root)"
    if f"interpreter {CPU}" not in text.splitlines() or "enabled" not in text.splitlines():
        return f"{ENTRY} is disabled or registered for another checkout: run `./run test` here (as root)"
    return ""
