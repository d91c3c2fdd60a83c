"""Whether this machine can run the virtual arm64 phones' programs: Debian's aarch64 cross compiler, qemu-user, and
a binfmt_misc entry that hands AArch64 programs to tests/virtual_device/aarch64_cpu.sh.

The entry is private to each phone command where the kernel allows it (a binfmt_misc mounted in a user namespace:
cpu_ns.sh; observed here with Linux 6.18, as root and as an unprivileged user; that it arrived in 6.7 is from memory,
not checked at its source), so it needs no root and no machine-wide state, and another checkout's entry cannot make these
tests skip.  Elsewhere ``./run test`` registers a machine-wide entry for this checkout (root)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

ENTRY = Path("/proc/sys/fs/binfmt_misc/torchdroid-aarch64")
HERE = Path(__file__).resolve().parent
CPU = HERE / "aarch64_cpu.sh"
CPU_NS = HERE / "cpu_ns.sh"


def cpu_argv(abi: str) -> list:
    """The argv prefix that runs a command on a phone whose CPU is ``abi`` (an ``ro.product.cpu.abi`` value): in a
    private binfmt_misc where the kernel allows one (arm64-v8a: AArch64 programs run under qemu-user; other ABIs: they
    are a foreign ELF); ``[]`` where it does not (the machine-wide entry, if any, decides)."""
    if not abi or private_cpu_problem():
        return []
    return ["unshare", "--user", "--map-root-user", "--mount", "/bin/sh", str(CPU_NS), abi]


@functools.lru_cache(maxsize=None)
def private_cpu_problem() -> str:
    """"" when a phone command can have a binfmt_misc of its own here; else why not."""
    if shutil.which("unshare") is None:
        return "no unshare (util-linux)"
    try:
        probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "/bin/sh", str(CPU_NS),
                                "arm64-v8a", "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare failed: {e}"
    if probe.returncode != 0:
        return (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1] + \
            " (a binfmt_misc in a user namespace needs Linux 6.7+ and user namespaces allowed)"
    return ""


def arm64_cpu_problem() -> str:
    """"" when AArch64 programs run inside virtual arm64 phones here; else why not and the fix."""
    missing = [t for t in ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "qemu-aarch64") if not shutil.which(t)]
    if missing:
        return f"missing {', '.join(missing)}: `./run test` installs g++-aarch64-linux-gnu and qemu-user"
    private = private_cpu_problem()
    if not private:
        return ""
    try:
        text = ENTRY.read_text()
    except OSError:
        return f"no private binfmt_misc ({private}) and no entry {ENTRY.name}: `./run test` registers it (as root)"
    if f"interpreter {CPU}" not in text.splitlines() or "enabled" not in text.splitlines():
        return (f"no private binfmt_misc ({private}), and {ENTRY} is disabled or registered for another checkout: "
                "run `./run test` here (as root)")
    return ""
