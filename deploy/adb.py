"""The adb tool: the adb servers of a run (addresses resolved once) and the devices on them.

adbutils is the adb client (imported on first use: it takes ~0.6 s): devices, shell_v2 with exit codes, sync
push, ``pm install``.  This module resolves the servers' addresses, gives every call a timeout and turns
adbutils' exceptions into torchdroid's errors (what failed, why, what to do).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypeVar

from toolchain.errors import DeviceError, ToolFailed, ToolNotFound, UsageError

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_PORT = 5037
_SPLIT = "--torchdroid-df--"
STATE_REMEDIES = {
    "unauthorized": "unlock the phone and accept the \"Allow USB debugging?\" prompt (tick \"Always allow\"); "
                    "if no prompt appears: `adb kill-server`, replug the cable, and revoke/re-grant "
                    "USB debugging authorizations in Developer options",
    "offline": "the device stopped answering adb: replug the cable (or `adb reconnect offline`), "
               "then run the deploy again",
    "no permissions": "the udev rules do not let you open the USB device: add the Android udev rules "
                      "(Debian: apt-get install android-sdk-platform-tools-common) and replug",
    "recovery": "the device is in recovery mode: reboot it normally",
    "bootloader": "the device is in the bootloader: reboot it normally",
    "sideload": "the device is in sideload mode: reboot it normally",
}


DEFAULT_HOST = "127.0.0.1"
_HOST_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,252})$")  # a host name or an IPv4 address
_IPV6_RE = re.compile(r"^[0-9A-Fa-f:.]{2,45}$")
ADDRESS_REMEDY = ("give adb servers as HOST:PORT, e.g. --adb-server 127.0.0.1:5037 or --adb-server lab-pc2:5038 "
                  "(an IPv4 address or a host name: adbutils, the adb client, connects over IPv4 only); "
                  "the port is 1-65535")


@dataclass(frozen=True)
class AdbAddress:
    """Where an adb server listens, and where that was said (for messages)."""

    host: str
    port: int
    source: str = "default"

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def key(self) -> Tuple[str, int]:
        return self.host.lower(), self.port

    @classmethod
    def parse(cls, text: object, source: str = "--adb-server") -> "AdbAddress":
        """``HOST:PORT``, ``[IPV6]:PORT`` or adb's ``tcp:HOST:PORT``; anything else is a UsageError."""
        raw = str(text).strip()
        value = raw[4:] if raw.startswith("tcp:") else raw
        if value.startswith("["):
            host, sep, port = value[1:].partition("]:")
            ok_host = bool(_IPV6_RE.match(host))
        else:
            host, sep, port = value.rpartition(":")
            ok_host = bool(_HOST_RE.match(host)) and not host.endswith(".")
        if not sep or not host:
            raise UsageError(f"adb server {raw!r} ({source}) has no port", remedy=ADDRESS_REMEDY)
        if not ok_host:
            raise UsageError(f"adb server {raw!r} ({source}): {host!r} is not a host name or address",
                             remedy=ADDRESS_REMEDY)
        return cls(host, parse_port(port, f"adb server {raw!r} ({source})"), source)


def parse_port(text: object, what: str) -> int:
    value = str(text).strip()
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise UsageError(f"{what}: the port {value!r} is not a number from 1 to 65535", remedy=ADDRESS_REMEDY)
    return int(value)


def default_address(host: Optional[str] = None, port: Optional[int] = None,
                    env: Optional[Mapping[str, str]] = None) -> AdbAddress:
    """The one server when none is listed, resolved as the adb client does (-H/-P, then its variables).

    ``host``/``port`` play adb's ``-H``/``-P`` (deploy.adb_host / deploy.adb_port): given either, adb
    ignores ``ADB_SERVER_SOCKET``; otherwise ``ADB_SERVER_SOCKET=tcp:HOST:PORT`` wins.  What is still
    missing comes from ``ANDROID_ADB_SERVER_ADDRESS`` / ``ANDROID_ADB_SERVER_PORT``, then 127.0.0.1:5037.
    """
    env = os.environ if env is None else env
    if not host and not port and env.get("ADB_SERVER_SOCKET", "").startswith("tcp:"):
        return _socket_address(env["ADB_SERVER_SOCKET"])
    host, host_from = _given_or_env(host, "deploy.adb_host", env, "ANDROID_ADB_SERVER_ADDRESS")
    port, port_from = _given_or_env(port, "deploy.adb_port", env, "ANDROID_ADB_SERVER_PORT")
    source = " and ".join(x for x in (host_from, port_from) if x) or "default"
    port = parse_port(port, port_from) if port else DEFAULT_PORT
    host = str(host or DEFAULT_HOST)
    if not _HOST_RE.match(host) and not _IPV6_RE.match(host):
        raise UsageError(f"the adb server host {host!r} ({host_from}) is not a host name or address",
                         remedy=ADDRESS_REMEDY)
    return AdbAddress(host, port, source)


def _given_or_env(value: object, name: str, env: Mapping[str, str], var: str) -> Tuple[object, Optional[str]]:
    """``(value, where it came from)``: the given one, else the environment variable's, else (None, None)."""
    if value:
        return value, name
    if env.get(var):
        return env[var], var
    return None, None


def _socket_address(spec: str) -> AdbAddress:
    """``ADB_SERVER_SOCKET``: ``tcp:HOST:PORT`` or ``tcp:PORT``."""
    if spec.count(":") >= 2:
        return AdbAddress.parse(spec, "ADB_SERVER_SOCKET")
    return AdbAddress(DEFAULT_HOST, parse_port(spec[4:], "ADB_SERVER_SOCKET"), "ADB_SERVER_SOCKET")


def resolve_servers(servers: Sequence[object] = (), host: Optional[str] = None, port: Optional[int] = None,
                    env: Optional[Mapping[str, str]] = None, source: str = "--adb-server") -> Tuple[AdbAddress, ...]:
    """Every adb server of a run: ``servers`` (--adb-server / deploy.servers) or the one default_address."""
    if not servers:
        return (default_address(host, port, env),)
    out: Dict[Tuple[str, int], AdbAddress] = {}
    for text in servers:
        address = AdbAddress.parse(text, source)
        if address.key in out:
            raise UsageError(f"the adb server {address} is listed twice ({source})",
                             cause=f"two of the values given name the same server: {out[address.key]} and {text!r}",
                             remedy="list every adb server once; " + ADDRESS_REMEDY)
        out[address.key] = address
    return tuple(out.values())


class Adb:
    """The adb tool of a run: the servers it talks to, resolved once (see resolve_servers).

    torchdroid never starts an adb server itself; ``server(address)`` is a client of one, whose
    ``verify()`` says whether it answers.
    """

    def __init__(self, addresses: Sequence[AdbAddress], timeout: float = 30.0):
        if not addresses:
            raise UsageError("no adb server to talk to", remedy=ADDRESS_REMEDY)
        self.addresses = tuple(addresses)
        self.timeout = timeout

    @classmethod
    def locate(cls, servers: Sequence[object] = (), host: Optional[str] = None, port: Optional[int] = None,
               env: Optional[Mapping[str, str]] = None, timeout: float = 30.0, source: str = "--adb-server") -> "Adb":
        return cls(resolve_servers(servers, host, port, env, source), timeout)

    def server(self, address: AdbAddress) -> "AdbServer":
        return AdbServer(address.host, address.port, self.timeout, address=address)

    def servers(self) -> List["AdbServer"]:
        return [self.server(a) for a in self.addresses]


@dataclass(frozen=True)
class ShellResult:
    command: str
    code: int
    output: str

    @property
    def ok(self) -> bool:
        return self.code == 0

    def tail(self, n: int = 15) -> List[str]:
        return self.output.splitlines()[-n:]


@functools.lru_cache(maxsize=None)
def _adbutils():
    """adbutils, imported on first use (~0.6 s; `invoke --list` must stay instant)."""
    import adbutils

    return adbutils


def _answers(host: str, port: int, timeout: float) -> None:
    """Raise OSError unless something accepts a TCP connection on ``host:port``, as adbutils connects (IPv4).

    Asked before adbutils first connects: adbutils runs `adb start-server` when nothing answers, and torchdroid
    only talks to the servers the user runs (and says how to start one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect((host, port))


class AdbServer:
    """The adb server the user already runs (host/port configurable; ANDROID_ADB_SERVER_PORT honoured).

    Two adbutils clients: one whose sockets time out (``timeout``: shell, install, listings) and one whose
    sockets block, for sync pushes: adbutils' push writes each packet with one ``send`` and does not look at
    how much was taken, which a socket with a timeout (non-blocking underneath) may cut short; a blocking one
    takes all of it.  Device.push bounds a push by its progress instead."""

    def __init__(self, host: str = DEFAULT_HOST, port: Optional[int] = None, timeout: float = 30.0,
                 address: Optional[AdbAddress] = None):
        self.address = address or (AdbAddress(host, int(port), "deploy.adb_port") if port else default_address(host))
        self.host = self.address.host
        self.port = self.address.port
        self.timeout = timeout
        self.transport_ids: Dict[str, int] = {}  # serial -> adb's transport id, from the last devices()
        self._clients: Dict[Optional[float], object] = {}

    @classmethod
    def locate(cls, host: str, port: Optional[int], timeout: float = 30.0) -> "AdbServer":
        server = cls(host, port, timeout)
        server.verify()
        return server

    def client(self, timeout: Optional[float] = None, blocking: bool = False):
        """An ``adbutils.AdbClient`` of this server whose sockets time out after ``timeout`` seconds (default: the
        server's), or ``blocking`` ones (for sync push)."""
        key = None if blocking else (timeout or self.timeout)
        if key not in self._clients:
            self._clients[key] = _adbutils().AdbClient(self.host, self.port, socket_timeout=key)
        return self._clients[key]

    def verify(self, connect_timeout: float = 5.0) -> int:
        """Return the server's version; refuse politely when nothing listens."""
        return self._ask(lambda: self.client(connect_timeout).server_version(), connect_timeout)

    def devices(self) -> Dict[str, str]:
        """``{serial: state}`` for every device the server knows, including unusable ones; refuses politely (as
        verify) when nothing listens."""
        infos = self._ask(lambda: self.client().list(extended=True), 5.0)
        self.transport_ids = {d.serial: int(d.tags["transport_id"]) for d in infos
                              if d.tags.get("transport_id", "").isdigit()}
        # adbutils splits adb's lines on blanks: "no permissions (...udev...)" arrives as "no"
        return {d.serial: "no permissions" if d.state == "no" else d.state for d in infos}

    def connect(self, address: str, timeout: float) -> str:
        """``adb connect ADDRESS`` through this server (a phone's remote port, deploy/stf.py): what adb said
        ("connected to ...", "failed to connect to ..."); refuses politely (verify) when nothing listens, before
        adbutils could start a server of its own.  adbutils' AdbError/AdbTimeout are the caller's: the phone's."""
        self.verify()
        return self.client(timeout).connect(address, timeout=timeout)

    def disconnect(self, address: str) -> str:
        """``adb disconnect ADDRESS`` (adb's answer, never an error for an address it does not know); refuses politely
        (verify) when nothing listens."""
        self.verify()
        return self.client().disconnect(address)

    def _ask(self, question: Callable[[], T], connect_timeout: float) -> T:
        """The answer to ``question`` (an adbutils call), asked only when something listens on the server's
        address (see _answers); a ToolNotFound naming the fix when nothing answers."""
        if ":" in self.host:
            raise UsageError(f"the adb server {self.address} (from {self.address.source}) has an IPv6 address",
                             cause="adbutils, torchdroid's adb client, connects over IPv4 only",
                             remedy="give the server's IPv4 address or a host name, or forward an IPv4 port to it "
                                    "(`ssh -L 5037:localhost:5037 HOST`)")
        adbutils = _adbutils()
        try:
            _answers(self.host, self.port, connect_timeout)
            return question()
        except (OSError, EOFError, ValueError, adbutils.AdbError) as e:
            raise ToolNotFound(
                f"no adb server answers on {self.address} (from {self.address.source})",
                cause=f"{type(e).__name__}: {e}",
                remedy="start it with `adb start-server` (another port or host: `adb -P PORT start-server` there; "
                       "Debian: apt-get install adb), or "
                       "point --adb-server / deploy.servers (or deploy.adb_host / deploy.adb_port, "
                       "ANDROID_ADB_SERVER_PORT) at the servers you run",
            ) from e

    def adbutils_device(self, serial: str, blocking: bool = False):
        """``serial`` as an ``adbutils.AdbDevice`` (see client() for ``blocking``).  By its transport id when
        devices() saw it: adbutils then opens each transport with one connection (by serial it first asks
        the server's version on another)."""
        client, tid = self.client(blocking=blocking), self.transport_ids.get(serial)
        return client.device(transport_id=tid) if tid else client.device(serial)

    def device(self, serial: str, timeout: float = 120.0, rerun: str = "invoke deploy") -> "Device":
        return Device(self, serial, timeout, rerun)


class _Progress:
    """A source as sync push reads it, with the time of the last read (Device.push's stall check)."""

    def __init__(self, source: BinaryIO):
        self.source = source
        self.last = time.monotonic()

    def read(self, n: int = -1) -> bytes:
        data = self.source.read(n)
        self.last = time.monotonic()
        return data

    def close(self) -> None:
        self.source.close()


def state_error(serial: str, state: str) -> DeviceError:
    return DeviceError(
        f"device {serial} is {state!r}, not ready for adb",
        cause="adb can see the device but may not use it",
        remedy=STATE_REMEDIES.get(state, "check `adb devices -l`; reconnect the device and run the deploy again"),
    )


class Device:
    """One device: shell with exit codes (shell_v2), getprop, sync push and ``pm install``, all with timeouts."""

    def __init__(self, server: AdbServer, serial: str, timeout: float = 120.0, rerun: str = "invoke deploy"):
        self.server = server
        self.serial = serial
        self.timeout = timeout
        self.rerun = rerun  # the command that deploys again (an interrupted push's remedy names it)
        self._device = None

    @property
    def adbutils(self):
        """This device as an ``adbutils.AdbDevice`` (its sockets time out)."""
        if self._device is None:
            self._device = self.server.adbutils_device(self.serial)
        return self._device

    def shell(self, command: str, timeout: Optional[float] = None, check: bool = False, what: str = "") -> ShellResult:
        adbutils = _adbutils()
        timeout = timeout or self.timeout
        log.debug("[%s] $ %s", self.serial, command)
        try:
            res = self.adbutils.shell2(command, timeout=timeout, v2=True)
        except adbutils.AdbTimeout as e:
            raise ToolFailed(
                f"`{command}` on {self.serial} did not finish within {timeout:g}s",
                cause=str(e),
                remedy="raise deploy.timeout, or check the device with `adb -s "
                       f"{self.serial} shell` (is it asleep or overloaded?)",
            ) from e
        except (adbutils.AdbError, OSError, EOFError) as e:
            raise self._lost(f"running `{command}`", e) from e
        result = ShellResult(command, res.returncode, res.output)
        log.debug("[%s] exit %d: %s", self.serial, result.code, result.output[-2000:])
        if check and not result.ok:
            raise ToolFailed(
                f"{what or 'a command'} failed on {self.serial} (exit code {result.code})",
                cause=f"command: {command}",
                tail=result.tail(),
                remedy=f"try it by hand: adb -s {self.serial} shell {shlex.quote(command)}",
            )
        return result

    def probe(self, df_path: str, then: str = "") -> Tuple[Dict[str, str], str, str]:
        """Properties, ``df -k PATH`` output and the output of the command ``then``, in one round trip."""
        res = self.shell(f"getprop; echo {_SPLIT}; (df -k {shlex.quote(df_path)} 2>/dev/null || df -k /data); "
                         f"echo {_SPLIT}; {then or 'true'}", check=True, what="reading the device properties")
        props, _, rest = res.output.partition(_SPLIT)
        df, _, then_out = rest.partition(_SPLIT)
        return parse_getprop(props), df, then_out

    def push(self, source: BinaryIO, remote: str, mode: int, name: str) -> None:
        """Send what ``source`` reads to ``remote`` (adbutils' sync push, as `adb push`) and wait for the device's
        answer; ``name``: the local file's name, for messages.  Given up when nothing was read for ``timeout``
        seconds: the push runs on a blocking socket (see AdbServer), in a thread of its own that is left behind
        then (a daemon: it ends with the process, or when the connection drops)."""
        watched, outcome, done = _Progress(source), [], threading.Event()

        def work() -> None:
            try:
                self.server.adbutils_device(self.serial, blocking=True).sync.push(watched, remote, mode)
            except BaseException as e:  # handed to the waiting thread
                outcome.append(e)
            finally:
                done.set()

        threading.Thread(target=work, name=f"push-{self.serial}", daemon=True).start()
        while not done.wait(0.5):
            if time.monotonic() - watched.last > self.timeout:
                raise self._interrupted(name, TimeoutError(f"no progress for {self.timeout:g}s"))
        if outcome and isinstance(outcome[0], (_adbutils().AdbError, OSError, EOFError)):
            raise self._push_error(outcome[0], remote, name) from outcome[0]
        if outcome:
            raise outcome[0]

    def _push_error(self, e: BaseException, remote: str, name: str) -> DeviceError:
        if str(e) == "FAIL":  # the device answered, and said no
            return DeviceError(
                f"{self.serial} refused {remote}",
                cause="the device's sync service answered FAIL",
                remedy="check the device directory (deploy.device_dir) is writable: "
                       f"adb -s {self.serial} shell ls -ld {shlex.quote(remote.rsplit('/', 1)[0])}",
            )
        return self._interrupted(name, e)

    def _interrupted(self, name: str, e: BaseException) -> DeviceError:
        return DeviceError(
            f"the push of {name} to {self.serial} was interrupted",
            cause=f"{type(e).__name__}: {e}",
            remedy=f"reconnect the device and run `{self.rerun}` again: finished files are skipped and "
                   "nothing half-pushed is ever left under a final name",
        )

    def pull(self, remote: str, local: Path) -> None:
        """``remote`` to ``local`` (adbutils' sync pull, as `adb pull`), written beside it first, then renamed."""
        adbutils = _adbutils()
        part = local.with_name(local.name + ".part")
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.adbutils.sync.pull(remote, part)
            os.replace(part, local)
        except (adbutils.AdbError, OSError, EOFError) as e:
            part.unlink(missing_ok=True)
            raise self._lost(f"pulling {remote}", e) from e

    def install(self, remote: str) -> Optional[str]:
        """``pm install -r -t REMOTE``: None when it succeeded, else what pm printed.  (adbutils' install_remote;
        never its install(), which uninstalls an app signed with another key, and with it the app's data.)"""
        adbutils = _adbutils()
        try:
            self.adbutils.install_remote(remote, flags=["-r", "-t"])
        except adbutils.AdbInstallError as e:
            return e.output
        except (adbutils.AdbError, OSError, EOFError) as e:
            raise self._lost(f"installing {remote}", e) from e
        return None

    def _lost(self, doing: str, e: BaseException) -> DeviceError:
        return DeviceError(f"lost the connection to {self.serial} while {doing}", cause=f"{type(e).__name__}: {e}",
                           remedy="reconnect the device (`adb devices` should list it as `device`) and run the deploy "
                                  "again")

def parse_getprop(out: str) -> Dict[str, str]:
    props = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("[") and "]: [" in line and line.endswith("]"):
            key, _, value = line[1:-1].partition("]: [")
            props[key] = value
    return props

