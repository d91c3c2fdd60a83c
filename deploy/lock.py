"""One writer per device directory: an atomic ``mkdir`` lock on the device with the owner inside.

``mkdir`` is atomic on every filesystem Android uses, so two deploys to one device directory cannot
both take it.  The lock holds ``owner``: ``pid host started-epoch``.  A lock is stale (and taken over)
when its owner runs on this host and the pid is gone, or when it is older than ``STALE_AFTER`` seconds
(a deploy killed on another host).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shlex
import socket
import time
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Optional

from toolchain.errors import DeviceError, ToolFailed, TorchdroidError
from toolchain.fsutil import pid_alive

from .adb import Device

log = logging.getLogger(__name__)

STALE_AFTER = 6 * 3600.0
TAKEN = "TAKEN"


class DeviceBusy(DeviceError):
    pass


_HELD: set = set()  # tokens of the locks this process holds now


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    started: float
    token: str = ""

    @classmethod
    def parse(cls, text: str) -> Optional["Owner"]:
        parts = text.split()
        if len(parts) not in (3, 4) or not parts[0].isdigit():
            return None
        try:
            return cls(int(parts[0]), parts[1], float(parts[2]), parts[3] if len(parts) == 4 else "")
        except ValueError:
            return None

    def line(self) -> str:
        return f"{self.pid} {self.host} {self.started:.0f} {self.token}"


def lock_path(directory: str) -> str:
    head, _, name = directory.rstrip("/").rpartition("/")
    return f"{head}/.{name}.torchdroid-lock"


class Held:
    """A lock this run holds: who took it, and where."""

    def __init__(self, owner: Owner, path: str):
        self.owner = owner
        self.path = path


def is_stale(owner: Optional[Owner], now: float, host: str) -> bool:
    if owner is None:  # no owner written: the taker died between mkdir and echo, or a foreign directory
        return True
    if owner.host == host and not pid_alive(owner.pid):
        return True
    if owner.host == host and owner.pid == os.getpid() and owner.token not in _HELD:
        return True  # an earlier deploy of this process lost the device before it could unlock
    return now - owner.started > STALE_AFTER


def new_owner() -> Owner:
    """Who this run is, for a lock it takes now."""
    return Owner(os.getpid(), socket.gethostname().split(".")[0] or "host", time.time(), secrets.token_hex(4))


def take_command(path: str, me: Owner) -> str:
    """One attempt to take the lock at ``path``: prints TAKEN, or the current owner line (see answer)."""
    q, parent = shlex.quote(path), shlex.quote(path.rsplit('/', 1)[0])
    return (f"{{ [ -d {parent} ] || mkdir -p {parent}; }} && if mkdir {q} 2>/dev/null; then "
            f"echo {shlex.quote(me.line())} > {q}/owner && echo {TAKEN}; else cat {q}/owner 2>/dev/null; echo; fi")


def answer(output: str) -> Optional[str]:
    """take_command's output -> None when the lock was taken, else the current owner line."""
    return None if output.strip().endswith(TAKEN) else output.strip()


class Attempt(NamedTuple):
    """An attempt made in another round trip (the deploy's probe): who tried, take_command's output, its exit code."""

    owner: Owner
    output: str
    code: int


def _try_take(device: Device, path: str, me: Owner) -> Optional[str]:
    """Take the lock; return None when taken, else the current owner line."""
    res = device.shell(take_command(path, me), check=True, what="taking the device directory's lock")
    return answer(res.output)


def _first_answer(device: Device, path: str, me: Owner, attempt: Optional[Attempt]) -> Optional[str]:
    """The answer of the first attempt: the one made already (its failure raised as _try_take's), or a new one."""
    if attempt is None:
        return _try_take(device, path, me)
    if attempt.code != 0:
        raise ToolFailed(f"taking the device directory's lock failed on {device.serial} (exit code {attempt.code})",
                         cause=f"command: {take_command(path, me)}", tail=attempt.output.splitlines()[-15:],
                         remedy=f"check that {path.rsplit('/', 1)[0]} can be created: "
                                f"adb -s {device.serial} shell ls -ld {shlex.quote(path.rsplit('/', 1)[0])}")
    return answer(attempt.output)


def _ours_in_use(owner: Optional[Owner], me: Owner) -> bool:
    """Held by another worker of this very process (the same device listed by two adb servers)."""
    return owner is not None and owner.pid == me.pid and owner.host == me.host and owner.token in _HELD


@contextlib.contextmanager
def device_lock(device: Device, directory: str, attempt: Optional[Attempt] = None) -> Iterator[Held]:
    """Hold the lock of ``directory`` on ``device`` for the block; DeviceBusy when another run holds it.

    ``attempt``: the first try was made already, in a round trip the caller made anyway (take_command);
    whatever it took is released at the end of the block like a lock taken here.
    """
    path = lock_path(directory)
    me = attempt.owner if attempt is not None else new_owner()
    try:
        held = _first_answer(device, path, me, attempt)
    except BaseException:
        if attempt is not None:  # it may have been taken (the owner line not written): never leave it
            with contextlib.suppress(TorchdroidError):
                device.shell(f"rm -rf {shlex.quote(path)}")
        raise
    unowned = 0
    while held is not None and (_ours_in_use(Owner.parse(held), me) or Owner.parse(held) is None and unowned < 20):
        # this run reaches the same device through another adb server: take turns; a lock without its owner
        # line yet is being taken right now (mkdir, then the owner): give its taker time to write it
        unowned = unowned + 1 if Owner.parse(held) is None else 0
        time.sleep(0.5)
        held = _try_take(device, path, me)
    if held is not None:
        owner = Owner.parse(held)
        if not is_stale(owner, time.time(), me.host):
            raise DeviceBusy(
                f"busy: another torchdroid run (pid {owner.pid} on {owner.host}) is writing {directory} on "
                f"{device.serial}",
                cause=f"its lock {path} was taken {time.time() - owner.started:.0f}s ago",
                remedy="wait for it to finish, or deploy into another directory with --project NAME; if that run "
                       f"is gone for good: adb -s {device.serial} shell rm -r {shlex.quote(path)}")
        log.info("[%s] taking over a stale lock %s (%s)", device.serial, path, held or "no owner")
        device.shell(f"rm -rf {shlex.quote(path)}", check=True, what="removing a stale lock")
        held = _try_take(device, path, me)
        if held is not None:
            raise DeviceBusy(f"busy: another torchdroid run took {directory} on {device.serial} just now",
                             remedy="wait for it to finish and deploy again")
    _HELD.add(me.token)
    held_lock = Held(me, path)
    try:
        yield held_lock
    finally:
        _HELD.discard(me.token)
        with contextlib.suppress(TorchdroidError):
            device.shell(f"rm -rf {shlex.quote(path)}")
