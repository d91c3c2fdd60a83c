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
from dataclasses import dataclass
from typing import BinaryIO, Dict, List, Mapping, Optional, Sequence, Tuple

from toolchain.errors import DeviceError, ToolFailed, ToolNotFound, UsageError

log = logging.getLogger(__name__)

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
                  "(an IPv6 address in brackets: [::1]:5037); the port is 1-65535")


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
    """``(adbutils, Client)``: the library, imported on first use, and its client with these changes:

    - it never starts an adb server: adbutils runs `adb start-server` when none answers, and torchdroid only
      talks to the servers the user runs (and says how to start one);
    - it connects with ``socket.create_connection`` (IPv6 addresses and a connect timeout), sets TCP_NODELAY
      (adbutils sends a sync DATA header, its data and DONE in separate small writes: with Nagle's algorithm the
      last one waited for the server's delayed ACK, ~40 ms per file) and closes without adbutils' 10 ms sleep
      (every answer is read before a connection is closed; a deploy opens a few per file);
    - a ``send`` on its socket sends every byte: adbutils' sync push ignores what ``send`` returns, and on a socket
      with a timeout ``send`` may take only part of a buffer;
    - the server's version, which adbutils asks before every transport, is asked once per client.
    """
    import adbutils
    from adbutils.errors import AdbConnectionError

    class SendAll:
        def __init__(self, sock: socket.socket):
            self.sock = sock

        def send(self, data: bytes) -> int:
            self.sock.sendall(data)
            return len(data)

        def __getattr__(self, name: str):
            return getattr(self.sock, name)

    class Connection(adbutils.AdbConnection):
        def __init__(self, host: str, port: int, connect_timeout: float):
            self._address = (host, port, connect_timeout)
            super().__init__(host, port)

        @property
        def conn(self) -> SendAll:
            return SendAll(super().conn)

        def _safe_connect(self) -> socket.socket:
            host, port, connect_timeout = self._address
            try:
                sock = socket.create_connection((host, port), timeout=connect_timeout)
            except OSError as e:
                raise AdbConnectionError(f"connect to adb server failed: {e}") from e
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock

        def close(self) -> None:
            if not self.closed:
                self.conn.close()
            super().close()  # nothing left to shut down: no sleep

    class Client(adbutils.AdbClient):
        def __init__(self, host: str, port: int, timeout: float):
            super().__init__(host, port, socket_timeout=timeout)
            self.timeout = timeout
            self._version: Optional[int] = None

        def make_connection(self, timeout: Optional[float] = None) -> Connection:
            c = Connection(self.host, self.port, min(timeout or self.timeout, 10.0))
            c.conn.settimeout(timeout or self.timeout)
            return c

        def server_version(self) -> int:
            if self._version is None:
                self._version = super().server_version()
            return self._version

    return adbutils, Client


class AdbServer:
    """The adb server the user already runs (host/port configurable; ANDROID_ADB_SERVER_PORT honoured)."""

    def __init__(self, host: str = DEFAULT_HOST, port: Optional[int] = None, timeout: float = 30.0,
                 address: Optional[AdbAddress] = None):
        self.address = address or (AdbAddress(host, int(port), "deploy.adb_port") if port else default_address(host))
        self.host = self.address.host
        self.port = self.address.port
        self.timeout = timeout
        self._client = None

    @classmethod
    def locate(cls, host: str, port: Optional[int], timeout: float = 30.0) -> "AdbServer":
        server = cls(host, port, timeout)
        server.verify()
        return server

    def client(self, timeout: Optional[float] = None):
        """An adbutils client of this server (``timeout``: a new one with that socket timeout)."""
        if timeout is not None:
            return _adbutils()[1](self.host, self.port, timeout)
        if self._client is None:
            self._client = _adbutils()[1](self.host, self.port, self.timeout)
        return self._client

    def verify(self, connect_timeout: float = 5.0) -> int:
        """Return the server's version; refuse politely when nothing listens."""
        adbutils = _adbutils()[0]
        try:
            return self.client(connect_timeout).server_version()
        except (OSError, EOFError, ValueError, adbutils.AdbError) as e:
            raise ToolNotFound(
                f"no adb server answers on {self.address} (from {self.address.source})",
                cause=f"{type(e).__name__}: {e}",
                remedy="start it with `adb start-server` (another port or host: `adb -P PORT start-server` there; "
                       "Debian: apt-get install adb), or "
                       "point --adb-server / deploy.servers (or deploy.adb_host / deploy.adb_port, "
                       "ANDROID_ADB_SERVER_PORT) at the servers you run",
            ) from e

    def devices(self) -> Dict[str, str]:
        """``{serial: state}`` for every device the server knows, including unusable ones."""
        # adbutils splits adb's lines on blanks: "no permissions (...udev...)" arrives as "no"
        return {d.serial: "no permissions" if d.state == "no" else d.state for d in self.client().list()}

    def device(self, serial: str, timeout: float = 120.0, rerun: str = "invoke deploy") -> "Device":
        return Device(self, serial, timeout, rerun)


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
        """This device as an ``adbutils.AdbDevice``."""
        if self._device is None:
            self._device = self.server.client().device(self.serial)
        return self._device

    def shell(self, command: str, timeout: Optional[float] = None, check: bool = False, what: str = "") -> ShellResult:
        adbutils = _adbutils()[0]
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
        """Send what ``source`` reads to ``remote`` (sync SEND, as `adb push`) and wait for the device's answer;
        ``name``: the local file's name, for messages."""
        adbutils = _adbutils()[0]
        try:
            self.adbutils.sync.push(source, remote, mode)
        except (adbutils.AdbError, OSError, EOFError) as e:
            if str(e) == "FAIL":  # the device answered, and said no
                raise DeviceError(
                    f"{self.serial} refused {remote}",
                    cause="the device's sync service answered FAIL",
                    remedy="check the device directory (deploy.device_dir) is writable: "
                           f"adb -s {self.serial} shell ls -ld {shlex.quote(remote.rsplit('/', 1)[0])}",
                ) from e
            raise DeviceError(
                f"the push of {name} to {self.serial} was interrupted",
                cause=f"{type(e).__name__}: {e}",
                remedy=f"reconnect the device and run `{self.rerun}` again: finished files are skipped and "
                       "nothing half-pushed is ever left under a final name",
            ) from e

    def install(self, remote: str) -> Optional[str]:
        """``pm install -r -t REMOTE``: None when it succeeded, else what pm printed.  (adbutils' install_remote;
        never its install(), which uninstalls an app signed with another key, and with it the app's data.)"""
        adbutils = _adbutils()[0]
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

