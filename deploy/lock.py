"""One writer per device directory, one run per phone: atomic ``mkdir`` locks on the device with the owner inside.

``mkdir`` is atomic on every filesystem Android uses, so two deploys to one device directory cannot
both take it.  The lock holds ``owner``: ``pid host started-epoch token [project]``.  A lock is stale (and taken
over) when its owner runs on this host and the pid is gone, or when it is older than ``STALE_AFTER`` seconds
(a deploy killed on another host).

Besides its directory's lock a deploy holds the phone's (``PHONE_LOCK``, one path whatever the device directory):
two projects never benchmark on one phone at once (their runs would time each other), and the phone's settings a
run changes are its alone.  Whoever takes the phone's lock first puts back every setting an earlier run changed and
could not restore (its link dropped, it was killed: deploy/environment.restore_all_command).
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
from typing import Callable, Iterator, NamedTuple, Optional

from toolchain.errors import DeviceError, ToolFailed, TorchdroidError
from toolchain.fsutil import pid_alive

from .adb import Device

log = logging.getLogger(__name__)

STALE_AFTER = 6 * 3600.0
TAKEN = "TAKEN"
PHONE_LOCK = "/data/local/tmp/.torchdroid-phone.torchdroid-lock"


class DeviceBusy(DeviceError):
    pass


_HELD: set = set()  # tokens of the locks this process holds now


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    started: float
    token: str = ""
    project: str = ""  # the deploy's project (deploy/plan.project_name: no spaces), for the phone lock's refusal

    @classmethod
    def parse(cls, text: str) -> Optional["Owner"]:
        parts = text.split()
        if len(parts) not in (3, 4, 5) or not parts[0].isdigit():
            return None
        try:
            return cls(int(parts[0]), parts[1], float(parts[2]), *parts[3:])
        except ValueError:
            return None

    def line(self) -> str:
        return f"{self.pid} {self.host} {self.started:.0f} {self.token} {self.project}".rstrip()


def lock_path(directory: str) -> str:
    head, _, name = directory.rstrip("/").rpartition("/")
    return f"{head}/.{name}.torchdroid-lock"


class Held:
    """A lock this run holds: who took it, where, and what the command run on taking it printed."""

    def __init__(self, owner: Owner, path: str, said: str = ""):
        self.owner = owner
        self.path = path
        self.said = said


def is_stale(owner: Optional[Owner], now: float, host: str) -> bool:
    if owner is None:  # no owner written: the taker died between mkdir and echo, or a foreign directory
        return True
    if owner.host == host and not pid_alive(owner.pid):
        return True
    if owner.host == host and owner.pid == os.getpid() and owner.token not in _HELD:
        return True  # an earlier deploy of this process lost the device before it could unlock
    return now - owner.started > STALE_AFTER


def new_owner(project: str = "") -> Owner:
    """Who this run is, for a lock it takes now."""
    return Owner(os.getpid(), socket.gethostname().split(".")[0] or "host", time.time(), secrets.token_hex(4),
                 project)


def take_command(path: str, me: Owner, then: str = "") -> str:
    """One attempt to take the lock at ``path``: prints TAKEN, or the current owner line (see answer); ``then``:
    a command run once the lock is taken, before TAKEN (its output precedes it)."""
    q, parent = shlex.quote(path), shlex.quote(path.rsplit('/', 1)[0])
    return (f"{{ [ -d {parent} ] || mkdir -p {parent}; }} && if mkdir {q} 2>/dev/null; then "
            f"echo {shlex.quote(me.line())} > {q}/owner && {f'{{ {then}; }}; ' if then else ''}echo {TAKEN}; "
            f"else cat {q}/owner 2>/dev/null; echo; fi")


def answer(output: str) -> Optional[str]:
    """take_command's output -> None when the lock was taken, else the current owner line."""
    return None if output.strip().endswith(TAKEN) else output.strip()


def _said(output: str) -> str:
    """What take_command's ``then`` printed (the output of a take, before TAKEN)."""
    return output.strip()[:-len(TAKEN)].strip() if output.strip().endswith(TAKEN) else ""


class Attempt(NamedTuple):
    """An attempt made in another round trip (the deploy's probe): who tried, take_command's output, its exit code."""

    owner: Owner
    output: str
    code: int


@dataclass(frozen=True)
class _Spec:
    """One lock: where, the command run on taking it, and how its refusals read."""

    path: str
    busy: Callable[[Device, Owner, str], DeviceBusy]  # (device, holder, path) -> the refusal
    what: str  # "the device directory's lock"
    then: str = ""


def _try_take(device: Device, spec: _Spec, me: Owner) -> str:
    """One attempt: take_command's output (see answer)."""
    return device.shell(take_command(spec.path, me, spec.then), check=True, what=f"taking {spec.what}").output


def _first_output(device: Device, spec: _Spec, me: Owner, attempt: Optional[Attempt]) -> str:
    """The output of the first attempt: the one made already (its failure raised as _try_take's), or a new one."""
    if attempt is None:
        return _try_take(device, spec, me)
    if attempt.code != 0:
        parent = spec.path.rsplit('/', 1)[0]
        raise ToolFailed(f"taking {spec.what} failed on {device.serial} (exit code {attempt.code})",
                         cause=f"command: {take_command(spec.path, me)}", tail=attempt.output.splitlines()[-15:],
                         remedy=f"check that {parent} can be created: "
                                f"adb -s {device.serial} shell ls -ld {shlex.quote(parent)}")
    return attempt.output


def _ours_in_use(owner: Optional[Owner], me: Owner) -> bool:
    """Held by another worker of this very process (the same device listed by two adb servers)."""
    return owner is not None and owner.pid == me.pid and owner.host == me.host and owner.token in _HELD


def _wait_turn(device: Device, spec: _Spec, me: Owner, output: str) -> str:
    """This run reaches the same device through another adb server: take turns; a lock without its owner line yet
    is being taken right now (mkdir, then the owner): give its taker time to write it."""
    unowned = 0
    while answer(output) is not None:
        owner = Owner.parse(answer(output))
        if not (_ours_in_use(owner, me) or owner is None and unowned < 20):
            break
        unowned = unowned + 1 if owner is None else 0
        time.sleep(0.5)
        output = _try_take(device, spec, me)
    return output


def _take(device: Device, spec: _Spec, me: Owner, output: str) -> str:
    """The lock taken (the output of the take that took it), a stale one taken over; DeviceBusy when a live run
    holds it."""
    output = _wait_turn(device, spec, me, output)
    held = answer(output)
    if held is None:
        return output
    owner = Owner.parse(held)
    if not is_stale(owner, time.time(), me.host):
        raise spec.busy(device, owner, spec.path)
    log.info("[%s] taking over a stale lock %s (%s)", device.serial, spec.path, held or "no owner")
    device.shell(f"rm -rf {shlex.quote(spec.path)}", check=True, what="removing a stale lock")
    output = _try_take(device, spec, me)
    if answer(output) is not None:
        raise DeviceBusy(f"busy: another torchdroid run took {spec.what} on {device.serial} just now",
                         remedy="wait for it to finish and deploy again")
    return output


@contextlib.contextmanager
def _holding(device: Device, spec: _Spec, me: Owner, attempt: Optional[Attempt] = None) -> Iterator[Held]:
    try:
        first = _first_output(device, spec, me, attempt)
    except BaseException:
        if attempt is not None:  # it may have been taken (the owner line not written): never leave it
            with contextlib.suppress(TorchdroidError):
                device.shell(f"rm -rf {shlex.quote(spec.path)}")
        raise
    output = _take(device, spec, me, first)
    _HELD.add(me.token)
    try:
        yield Held(me, spec.path, _said(output))
    finally:
        _HELD.discard(me.token)
        with contextlib.suppress(TorchdroidError):
            device.shell(f"rm -rf {shlex.quote(spec.path)}")


def _directory_busy(directory: str) -> Callable[[Device, Owner, str], DeviceBusy]:
    def busy(device: Device, owner: Owner, path: str) -> DeviceBusy:
        return DeviceBusy(
            f"busy: another torchdroid run (pid {owner.pid} on {owner.host}) is writing {directory} on {device.serial}",
            cause=f"its lock {path} was taken {time.time() - owner.started:.0f}s ago",
            remedy="wait for it to finish, or deploy into another directory with --project NAME; if that run "
                   f"is gone for good: adb -s {device.serial} shell rm -r {shlex.quote(path)}")
    return busy


def _phone_busy(device: Device, owner: Owner, path: str) -> DeviceBusy:
    project = f"project {owner.project}, " if owner.project else ""
    return DeviceBusy(
        f"busy: another torchdroid run ({project}pid {owner.pid} on {owner.host}) is using the phone {device.serial}",
        cause=f"it took the phone's lock {path} {time.time() - owner.started:.0f}s ago; two runs on one phone "
              "would time each other's benchmarks and change each other's settings",
        remedy="wait for it to finish and deploy again (or deploy to another phone with --serial); if that run is "
               f"gone for good: adb -s {device.serial} shell rm -r {shlex.quote(path)}")


@contextlib.contextmanager
def device_lock(device: Device, directory: str, attempt: Optional[Attempt] = None) -> Iterator[Held]:
    """Hold the lock of ``directory`` on ``device`` for the block; DeviceBusy when another run holds it.

    ``attempt``: the first try was made already, in a round trip the caller made anyway (take_command);
    whatever it took is released at the end of the block like a lock taken here.
    """
    me = attempt.owner if attempt is not None else new_owner()
    spec = _Spec(lock_path(directory), _directory_busy(directory), "the device directory's lock")
    with _holding(device, spec, me, attempt) as held:
        yield held


@contextlib.contextmanager
def phone_lock(device: Device, project: str, then: str = "") -> Iterator[Held]:
    """Hold the phone's lock (``PHONE_LOCK``) for the block: one torchdroid run per phone, across projects and
    device directories; DeviceBusy naming the run (project, pid, host) that holds it.  ``then``: run once taken
    (what it printed is ``Held.said``)."""
    with _holding(device, _Spec(PHONE_LOCK, _phone_busy, "the phone's lock", then), new_owner(project)) as held:
        yield held
