"""Devices across several adb servers: who answers, what each one lists, which devices a run takes.

A lab reaches its phones through adb servers on several hosts (``adb -H host -P port``, SSH tunnels,
device farms speaking the same protocol).  Each server is asked in parallel; a server that does not
answer is isolated: it becomes a problem of its own (and the devices named for the run that it may
hold become problems with that reason), while the devices of the other servers are deployed.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import DeviceError, ToolNotFound, TorchdroidError, command

from .adb import Adb, AdbAddress, AdbServer

log = logging.getLogger(__name__)


@dataclass
class ServerListing:
    """One adb server and what it said: ``{serial: state}``, or the error when it did not answer."""

    address: AdbAddress
    server: Optional[AdbServer]
    devices: Dict[str, str]
    error: Optional[TorchdroidError] = None

    @property
    def up(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Target:
    """A device a run works on: its server, serial and adb state, and a label unique within the run; a phone lent
    by a farm (deploy/stf.py) also names the farm (``origin``) and can say why it went away (``lost``)."""

    server: Optional[AdbServer]
    address: AdbAddress
    serial: str
    state: str
    label: str
    origin: str = ""  # where the phone came from, for the records: "" = its adb server
    lost: Optional[Callable[[], Optional[str]]] = field(default=None, compare=False)

    @property
    def source(self) -> str:
        """What the records name as the phone's server: its farm, else its adb server."""
        return self.origin or str(self.address)


@dataclass(frozen=True)
class Unreachable:
    """Something the run could not work on: a server that is down, or a named device it may hold."""

    address: AdbAddress
    serial: str  # "" for the server itself
    error: TorchdroidError


def list_servers(adb: Adb) -> List[ServerListing]:
    """Ask every server for its devices, in parallel (a dead remote host costs one connect timeout)."""

    def ask(server: AdbServer) -> ServerListing:
        try:
            return ServerListing(server.address, server, server.devices())
        except TorchdroidError as e:
            return ServerListing(server.address, None, {}, e)
        except Exception as e:  # anything else: the server went away while it answered
            return ServerListing(server.address, None, {}, ToolNotFound(
                f"the adb server {server.address} stopped answering", cause=f"{type(e).__name__}: {e}",
                remedy="check it with `adb -H HOST -P PORT devices` and run the deploy again"))

    servers = adb.servers()
    with ThreadPoolExecutor(max_workers=max(1, len(servers)), thread_name_prefix="adb-list") as pool:
        return list(pool.map(ask, servers))


def select(listings: Sequence[ServerListing], serials: Sequence[str],
           rerun: Sequence[str] = ("invoke", "deploy")) -> Tuple[List[Target], List[Unreachable]]:
    """The devices of a run (all of every live server, or the named ``serials``) and what cannot be reached;
    ``rerun``: the command that deploys them again, named in the remedies.

    Raises when nothing at all can be worked on: every server down (ToolNotFound), no devices, or named
    serials that no live server knows while every server answered (DeviceError).
    """
    up = [ls for ls in listings if ls.up]
    down = [Unreachable(ls.address, "", ls.error) for ls in listings if not ls.up]
    if not up:
        raise _all_down(listings)
    found = [(ls, serial, state) for ls in up for serial, state in ls.devices.items()
             if not serials or serial in serials]
    missing = [s for s in serials if not any(serial == s for _ls, serial, _st in found)]
    if not down:
        _refuse_nothing_to_do(up, found, missing)
    unreachable = down + [Unreachable(down[0].address, s, _maybe_there(s, down, rerun)) for s in missing]
    return _targets(found, len(listings) > 1), unreachable


def _refuse_nothing_to_do(up: Sequence[ServerListing], found: list, missing: Sequence[str]) -> None:
    """Every server answered: a --serial none of them lists, or no device at all, is the user's to fix."""
    if missing:
        if len(up) == 1:
            known = f"it knows: {', '.join(up[0].devices) or 'no devices'}"
        else:
            known = "they know: " + (", ".join(f"{serial} ({ls.address})" for ls in up for serial in ls.devices)
                                     or "no devices")
        raise DeviceError(f"no device {', '.join(missing)} on {_names(up)}", cause=known,
                          remedy="check `adb devices -l` and the --serial values")
    if not found:
        raise DeviceError(f"no devices on {_names(up)}",
                          remedy="connect a phone with USB debugging enabled (or `adb connect HOST:PORT`) "
                                 "and check `adb devices`")


def _targets(found, several: bool) -> List[Target]:
    counts: Dict[str, int] = {}
    for _ls, serial, _state in found:
        counts[serial] = counts.get(serial, 0) + 1
    return [Target(ls.server, ls.address, serial, state,
                   f"{serial}@{ls.address}" if several and counts[serial] > 1 else serial)
            for ls, serial, state in found]


def _names(listings: Sequence[ServerListing]) -> str:
    """``the adb server A`` or ``the adb servers A, B``."""
    return f"the adb server{'s' if len(listings) > 1 else ''} " + ", ".join(str(ls.address) for ls in listings)


def _all_down(listings: Sequence[ServerListing]) -> ToolNotFound:
    if len(listings) == 1:
        return listings[0].error
    return ToolNotFound(
        f"none of the {len(listings)} adb servers answers: {', '.join(str(ls.address) for ls in listings)}",
        cause="; ".join(f"{ls.address}: {ls.error.what}" for ls in listings),
        remedy="start them (`adb -P PORT start-server` on each host, or the SSH tunnels to them), or fix "
               "--adb-server / deploy.servers",
    )


def _maybe_there(serial: str, down: Sequence[Unreachable], rerun: Sequence[str]) -> DeviceError:
    names = ", ".join(str(d.address) for d in down)
    return DeviceError(
        f"device {serial} was not found: the adb server(s) {names} did not answer",
        cause=f"no server that answered lists {serial}; it may be on {names} ({down[0].error.what})",
        remedy=f"start that server (or its tunnel) and deploy again with `{command(*rerun, '--serial', serial)}`",
    )

