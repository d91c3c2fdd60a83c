"""Push files to a device: skip what already matches by hash, temp name + verify + rename for the rest."""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from toolchain.errors import DeviceError, UsageError, VerificationError
from toolchain.fsutil import sha256_file

from .adb import Device

log = logging.getLogger(__name__)

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
SAFE_DIR = re.compile(r"^/[A-Za-z0-9._/+-]+$")
PARTIAL_MARK = ".partial-"


@dataclass(frozen=True)
class PushItem:
    local: Path
    name: str  # file name inside the device directory
    mode: int = 0o644
    sha256: Optional[str] = None  # known hash (from a manifest); computed when None

    def digest(self) -> str:
        return self.sha256 or sha256_file(self.local)


@dataclass
class PushOutcome:
    name: str
    remote: str
    pushed: bool
    bytes: int
    sha256: str


def check_name(name: str) -> str:
    if not SAFE_NAME.match(name):
        raise UsageError(f"{name!r} cannot be used as a file name on the device",
                         remedy="use letters, digits, '.', '_', '+' and '-' only")
    return name


def check_dir(path: str) -> str:
    if not SAFE_DIR.match(path) or "/../" in path + "/" or path.rstrip("/") in ("", "/"):
        raise UsageError(f"{path!r} is not a usable device directory",
                         remedy="use an absolute path such as /data/local/tmp/torchdroid (letters, digits, ._+-/)")
    return path.rstrip("/")


def remote_state(device: Device, directory: str, names: Sequence[str]) -> Dict[str, tuple]:
    """``{name: (sha256, mode)}`` for the names that exist in ``directory`` (one round trip)."""
    if not names:
        return {}
    q = " ".join(shlex.quote(n) for n in names)
    cmd = (f"cd {shlex.quote(directory)} 2>/dev/null || exit 0; sha256sum {q} 2>/dev/null; echo '--modes--'; "
           f"stat -c '%a %n' {q} 2>/dev/null; exit 0")
    out = device.shell(cmd, check=True, what="hashing the files already on the device").output
    hashes, _, modes = out.partition("--modes--")
    state: Dict[str, list] = {}
    for line in hashes.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and re.fullmatch(r"[0-9a-f]{64}", parts[0]):
            state.setdefault(parts[1].strip().lstrip("*"), [None, None])[0] = parts[0]
    for line in modes.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].isdigit() and parts[1] in state:
            state[parts[1]][1] = int(parts[0], 8)
    return {k: tuple(v) for k, v in state.items()}


def push_all(device: Device, directory: str, items: Sequence[PushItem],
             on_progress: Optional[Callable[[str], None]] = None,
             on_bytes: Optional[Callable[[int], None]] = None) -> List[PushOutcome]:
    """Bring ``items`` into ``directory`` on the device; return what was pushed and what skipped."""
    directory = check_dir(directory)
    for it in items:
        check_name(it.name)
    qdir = shlex.quote(directory)
    # our own leftovers from an interrupted push (temporary names only, never a final name)
    device.shell(f"mkdir -p {qdir} && rm -f {qdir}/.*{PARTIAL_MARK}*", check=True,
                 what=f"creating {directory}")
    existing = remote_state(device, directory, [it.name for it in items])
    outcomes = []
    for i, it in enumerate(items, 1):
        digest = it.digest()
        remote = f"{directory}/{it.name}"
        have_hash, have_mode = existing.get(it.name, (None, None))
        if have_hash == digest:
            if have_mode is not None and have_mode != it.mode:
                device.shell(f"chmod {it.mode:o} {shlex.quote(remote)}", check=True, what=f"chmod {it.name}")
            log.debug("[%s] %s is up to date", device.serial, remote)
            outcomes.append(PushOutcome(it.name, remote, False, 0, digest))
            continue
        if on_progress:
            on_progress(f"pushing {it.name} ({i}/{len(items)}, {it.local.stat().st_size / 1e6:.1f} MB)")
        outcomes.append(push_one(device, directory, it, digest, on_bytes))
    return outcomes


def push_one(device: Device, directory: str, it: PushItem, digest: str,
             on_bytes: Optional[Callable[[int], None]] = None) -> PushOutcome:
    remote = f"{directory}/{it.name}"
    tmp = f"{directory}/.{it.name}{PARTIAL_MARK}{os.getpid()}-{secrets.token_hex(3)}"
    sent = device.push_file(it.local, tmp, it.mode, on_bytes)
    qtmp, qremote = shlex.quote(tmp), shlex.quote(remote)
    got = device.shell(f"sha256sum {qtmp}", check=True, what=f"verifying {it.name}").output.split()
    if not got or got[0] != digest:
        device.shell(f"rm -f {qtmp}")
        raise VerificationError(
            f"{it.name} arrived on {device.serial} corrupted (sha256 {got[0][:12] if got else '?'}… "
            f"!= {digest[:12]}…)",
            cause="the transfer was altered on the way (bad cable/hub?) or the device storage is failing",
            remedy="run the deploy again; if it repeats, try another USB cable or port",
        )
    res = device.shell(f"chmod {it.mode:o} {qtmp} && mv -f {qtmp} {qremote}")
    if not res.ok:
        device.shell(f"rm -f {qtmp}")
        raise DeviceError(f"could not move {it.name} into place on {device.serial}",
                          cause="\n".join(res.tail(5)),
                          remedy=f"check the directory: adb -s {device.serial} shell ls -la {shlex.quote(directory)}")
    log.info("[%s] pushed %s (%d bytes)", device.serial, remote, sent)
    return PushOutcome(it.name, remote, True, sent, digest)
