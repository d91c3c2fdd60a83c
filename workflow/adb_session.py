"""The adb server policy of `invoke all`: use a running server; start one only if needed, say so, stop it after.

`invoke deploy` and `invoke doctor` never start a server (they say how to).  `invoke all` wants to know
whether a phone is attached, so when adb is installed, the server is local and none answers, it
starts one for the run, prints that it did, and stops exactly that server (its port) at the end.  With no port
asked for (deploy.adb_port, ANDROID_ADB_SERVER_PORT), that server gets a free port of its own, never the shared
5037: a server the user (or an IDE) starts on 5037 meanwhile is not the one this run stops.  The run's stages
find it through ANDROID_ADB_SERVER_PORT, set for the run and put back after.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
from typing import Callable, Iterator, Optional, Sequence

log = logging.getLogger(__name__)

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def answers(host: str, port: int, timeout: float = 2.0) -> bool:
    """Does an adb server answer (its version) on ``host:port``?"""
    from deploy.adb import AdbServer
    from toolchain.errors import TorchdroidError

    try:
        AdbServer(host, port).verify(timeout)
        return True
    except TorchdroidError:
        return False


def listening(host: str, port: int, timeout: float = 2.0) -> bool:
    """Does anything listen on ``host:port``?  The kernel completes the connection for a listening socket, so the
    answer does not depend on how soon the process behind it is scheduled (``answers`` asks the server itself, which
    a loaded machine may not let reply within ``timeout``)."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def adb_server_for_run(host: Optional[str], port: Optional[int], say: Callable[[str], None],
                       servers: Sequence[str] = ()) -> Iterator[bool]:
    """Yield True when this run started the server (and will stop it), False when it uses one or none.

    With explicit ``servers`` (deploy.servers) nothing is started: those are the user's servers.
    """
    from deploy.adb import default_address

    if servers:  # the user's servers: deploy reads no adb variable either
        yield False
        return
    asked = bool(port) or any(os.environ.get(v) for v in ("ANDROID_ADB_SERVER_PORT", "ADB_SERVER_SOCKET"))
    address = default_address(host, port)  # resolved as deploy resolves it (a bad value: UsageError)
    host, port = address.host, address.port
    adb = shutil.which("adb")
    if host not in LOCAL_HOSTS or adb is None or listening(host, port):  # a server (or anything) there is not ours
        yield False
        return
    from toolchain.runner import run

    port = port if asked else free_port()
    env = {"ANDROID_ADB_SERVER_PORT": str(port)}
    before = os.environ.get("ANDROID_ADB_SERVER_PORT")
    started = False
    try:  # from the start on: a signal that lands while the server starts still stops it
        run([adb, "-P", str(port), "start-server"], env=env, check=False, timeout=60, what="`adb start-server`")
        started = listening(host, port)  # not answers(): a server slow to reply under load is still this run's
        if started:
            say(f"started an adb server on port {port} to look for phones; it is stopped at the end of this run")
        os.environ["ANDROID_ADB_SERVER_PORT"] = str(port)
        yield started
    finally:
        _put_back("ANDROID_ADB_SERVER_PORT", before)
        if started or listening(host, port):  # nothing listened there before this run started it
            run([adb, "-P", str(port), "kill-server"], env=env, check=False, timeout=60, what="`adb kill-server`")
            log.debug("stopped the adb server this run started (port %d)", port)  # as its start was announced


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's choice), for a server of this run's own."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _put_back(name: str, value: Optional[str]) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
