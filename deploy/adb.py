"""The adb tool: the adb servers of a run (addresses resolved once) and the devices on them.

Every call has a timeout; shell commands go through shell_v2 so the remote exit
code is always checked; file pushes use our own sync client (64 KiB chunks, four
per sendmsg(2), a socket timeout, a byte counter, pipelined SENDs).  The host protocol is spoken
here directly (HostConnection): a few dozen lines, no import cost, no sleep on close.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import socket
import stat as _stat
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from toolchain.errors import DeviceError, ToolFailed, ToolNotFound, UsageError

log = logging.getLogger(__name__)

DEFAULT_PORT = 5037
_SPLIT = "--torchdroid-df--"
SYNC_CHUNK = 64 * 1024  # the sync protocol's maximum DATA size
SEND_GROUP = 16  # DATA packets per sendmsg(2): 1 MB, an adb packet's payload (4 took more CPU here and in the adb server)
_DATA = struct.Struct("<4sI")  # a sync DATA header: b"DATA", length
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


def resolve_port(port: Optional[int]) -> int:
    """The port of the default server (deploy.adb_port, ANDROID_ADB_SERVER_PORT, 5037)."""
    return default_address(None, port).port


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


class AdbFailure(Exception):
    """The adb server answered FAIL (e.g. "device 'X' not found", "device offline")."""


class HostConnection:
    """One connection to an adb server speaking its host protocol: a 4-hex-digit length and a request,
    answered OKAY or FAIL + message (adb's protocol.txt).  Our own instead of adbutils' because that one
    sleeps 10 ms on every close, and a deploy makes a few connections on its critical path per device."""

    def __init__(self, host: str, port: int, timeout: float):
        self.conn = socket.create_connection((host, port), timeout=min(timeout, 10.0))
        self.conn.settimeout(timeout)
        self.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(self, text: str) -> None:
        raw = text.encode()
        self.conn.sendall(b"%04x" % len(raw) + raw)
        status = _recv_exact(self.conn, 4)
        if status == b"FAIL":
            raise AdbFailure(self.read_block())
        if status != b"OKAY":
            raise AdbFailure(f"unexpected answer {status!r} to {text.split(':', 1)[0]}")

    def read_block(self) -> str:
        return _recv_exact(self.conn, int(_recv_exact(self.conn, 4), 16)).decode("utf-8", "replace")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "HostConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AdbServer:
    """The adb server the user already runs (host/port configurable; ANDROID_ADB_SERVER_PORT honoured)."""

    def __init__(self, host: str = DEFAULT_HOST, port: Optional[int] = None, timeout: float = 30.0,
                 address: Optional[AdbAddress] = None):
        self.address = address or (AdbAddress(host, int(port), "deploy.adb_port") if port else default_address(host))
        self.host = self.address.host
        self.port = self.address.port
        self.timeout = timeout

    @classmethod
    def locate(cls, host: str, port: Optional[int], timeout: float = 30.0) -> "AdbServer":
        server = cls(host, port, timeout)
        server.verify()
        return server

    def connect(self, timeout: Optional[float] = None) -> HostConnection:
        return HostConnection(self.host, self.port, timeout or self.timeout)

    def verify(self, connect_timeout: float = 5.0) -> int:
        """Return the server's version; refuse politely when nothing listens."""
        try:
            with self.connect(connect_timeout) as c:
                c.request("host:version")
                return int(c.read_block(), 16)
        except (OSError, EOFError, ValueError, AdbFailure) as e:
            raise ToolNotFound(
                f"no adb server answers on {self.address} (from {self.address.source})",
                cause=f"{type(e).__name__}: {e}",
                remedy="start it with `adb start-server` (another port or host: `adb -P PORT start-server` there; "
                       "Debian: apt-get install adb), or "
                       "point --adb-server / deploy.servers (or deploy.adb_host / deploy.adb_port, "
                       "ANDROID_ADB_SERVER_PORT) at the servers you run",
            ) from e

    def devices(self) -> Dict[str, str]:
        """``{serial: state}`` for every device the server knows, including unusable ones (``no permissions
        (…udev…)`` is reported as ``no permissions``)."""
        with self.connect() as c:
            c.request("host:devices")
            text = c.read_block()
        out = {}
        for line in text.splitlines():
            serial, _, state = line.partition("\t")
            if serial and state:
                out[serial] = state.split(" (")[0].split(";")[0].strip()
        return out

    def device(self, serial: str, timeout: float = 120.0) -> "Device":
        return Device(self, serial, timeout)


def state_error(serial: str, state: str) -> DeviceError:
    return DeviceError(
        f"device {serial} is {state!r}, not ready for adb",
        cause="adb can see the device but may not use it",
        remedy=STATE_REMEDIES.get(state, "check `adb devices -l`; reconnect the device and run the deploy again"),
    )


class Device:
    """One device: shell with exit codes, getprop, and a sync client with timeouts."""

    def __init__(self, server: AdbServer, serial: str, timeout: float = 120.0):
        self.server = server
        self.serial = serial
        self.timeout = timeout

    def transport(self, service: str, timeout: Optional[float] = None) -> HostConnection:
        """A connection to ``service`` (``shell,v2:…``, ``sync:``) on this device, through its server."""
        c = self.server.connect(timeout or self.timeout)
        try:
            c.request(f"host:transport:{self.serial}")
            c.request(service)
            return c
        except BaseException:
            c.close()
            raise

    # ------------------------------------------------------------------ shell

    def _shell_v2(self, command: str, timeout: float) -> Tuple[int, str]:
        """Run ``command`` with the shell_v2 protocol: (exit code, stdout and stderr as they came)."""
        deadline = time.monotonic() + timeout
        out = bytearray()
        with self.transport(f"shell,v2:{command}", timeout) as c:
            while True:
                head = _recv_exact(c.conn, 5)
                data = _recv_exact(c.conn, struct.unpack("<I", head[1:])[0])
                if head[0] in (1, 2):  # stdout, stderr
                    out += data
                elif head[0] == 3:  # exit code
                    return (data[0] if data else 255), out.decode("utf-8", "replace")
                if time.monotonic() > deadline:
                    raise socket.timeout(f"no exit code within {timeout:g}s")

    def shell(self, command: str, timeout: Optional[float] = None, check: bool = False, what: str = "") -> ShellResult:
        log.debug("[%s] $ %s", self.serial, command)
        try:
            code, output = self._shell_v2(command, timeout or self.timeout)
        except socket.timeout as e:
            raise ToolFailed(
                f"`{command}` on {self.serial} did not finish within {timeout or self.timeout:g}s",
                cause=str(e),
                remedy="raise deploy.timeout, or check the device with `adb -s "
                       f"{self.serial} shell` (is it asleep or overloaded?)",
            ) from e
        except (AdbFailure, OSError, EOFError) as e:
            raise DeviceError(
                f"lost the connection to {self.serial} while running `{command}`",
                cause=f"{type(e).__name__}: {e}",
                remedy="reconnect the device (`adb devices` should list it as `device`) and run the deploy again",
            ) from e
        result = ShellResult(command, code, output)
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

    # ------------------------------------------------------------------ sync

    def _sync(self) -> HostConnection:
        try:
            return self.transport("sync:")
        except (AdbFailure, OSError, EOFError) as e:
            raise DeviceError(f"cannot open a sync connection to {self.serial}", cause=f"{type(e).__name__}: {e}",
                              remedy="reconnect the device (`adb devices` should list it as `device`) and deploy "
                                     "again") from e

    def sync_session(self) -> "SyncSession":
        """One sync connection for several pushes (opening one costs a round trip through the server)."""
        return SyncSession(self)


class SyncSession:
    """A sync connection to one device, opened on first use; every SEND on it is checked (OKAY/FAIL).

    ``send`` does not wait for the device's answer (adb's own push pipelines the same way): a caller
    that sends several files reads the answers with ``reply``, in order, from another thread, so the
    link never idles for a round trip between files.
    """

    def __init__(self, device: Device):
        self.device = device
        self._c = None
        self._aborted = False  # after a failure the session stays closed (no silent new connection)
        self._views: Optional[List[memoryview]] = None  # the send buffers, made on first use

    def __enter__(self) -> "SyncSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._c is not None:
            c, self._c = self._c, None
            try:
                c.conn.sendall(b"QUIT" + b"\0" * 4)
            except OSError:
                pass
            c.close()

    def abort(self) -> None:
        """Drop the connection without a goodbye (after a failure it is in no known state)."""
        self._aborted = True
        c, self._c = self._c, None
        if c is not None:
            with contextlib.suppress(OSError):
                c.conn.shutdown(socket.SHUT_RDWR)
            c.close()

    def send(self, local: Path, remote: str, mode: int = 0o644,
             on_bytes: Optional[Callable[[int], None]] = None) -> Tuple[int, int]:
        """SEND ``local`` as ``remote`` without waiting for the answer; return the bytes sent and the mtime
        sent with DONE (the device gives the file that modification time, as `adb push` does).

        The file is read into SEND_GROUP reused 64 KB buffers and each group goes out with one sendmsg(2):
        no new bytes objects and no joined copy per packet (the host sends to every device at once).  (With
        sendfile(2) per DATA packet this process used a little less CPU, but the adb server, which receives
        it, more: measured, see docs/deploy.md.)
        """
        serial = self.device.serial
        sent = 0
        if self._aborted:
            raise _interrupted(serial, Path(local).name, 0, EOFError("the sync connection was dropped after a failure"))
        if self._c is None:
            self._c = self.device._sync()
        try:
            raw = f"{remote},{_stat.S_IFREG | mode}".encode()
            sock = self._c.conn
            sock.sendall(b"SEND" + struct.pack("<I", len(raw)) + raw)
            if self._views is None:
                self._views = [memoryview(bytearray(SYNC_CHUNK)) for _ in range(SEND_GROUP)]
            with open(local, "rb", buffering=0) as f:
                while True:
                    frames = []
                    for view in self._views:
                        n = f.readinto(view)
                        if not n:
                            break
                        frames += (_DATA.pack(b"DATA", n), view[:n])
                    if not frames:
                        break
                    _send_frames(sock, frames)
                    group = sum(len(x) for x in frames[1::2])
                    sent += group
                    if on_bytes:
                        on_bytes(group)
            mtime = int(time.time())
            sock.sendall(b"DONE" + struct.pack("<I", mtime))
            return sent, mtime
        except (OSError, EOFError, AttributeError) as e:  # AttributeError: aborted by the reply reader
            self.abort()
            raise _interrupted(serial, Path(local).name, sent, e) from e

    def reply(self, remote: str, name: Optional[str] = None) -> None:
        """Read the device's answer to the oldest SEND not answered yet (of ``remote``, the file ``name``);
        raise DeviceError unless OKAY."""
        serial = self.device.serial
        c = self._c
        try:
            if c is None:
                raise EOFError("the sync connection is closed")
            reply = _recv_exact(c.conn, 8)
            if reply[:4] == b"FAIL":
                n = struct.unpack("<I", reply[4:])[0]
                msg = _recv_exact(c.conn, n).decode("utf-8", "replace")
                self.abort()
                raise DeviceError(
                    f"{serial} refused {remote}",
                    cause=msg,
                    remedy="check the device directory (deploy.device_dir) is writable: "
                           f"adb -s {serial} shell ls -ld {shlex.quote(str(Path(remote).parent))}",
                )
            if reply[:4] != b"OKAY":
                self.abort()
                raise DeviceError(f"unexpected sync reply {reply[:4]!r} from {serial} after pushing {remote}")
        except (OSError, EOFError) as e:
            self.abort()
            raise _interrupted(serial, name or Path(remote).name, None, e) from e


def _interrupted(serial: str, name: str, sent: Optional[int], e: BaseException) -> DeviceError:
    after = f" after {sent} bytes" if sent is not None else ""
    return DeviceError(
        f"the push of {name} to {serial} was interrupted{after}",
        cause=f"{type(e).__name__}: {e}",
        remedy="reconnect the device and run `invoke deploy` again: finished files are skipped and "
               "nothing half-pushed is ever left under a final name",
    )


def _send_frames(sock: socket.socket, frames: List) -> None:
    """Send ``frames`` (bytes and memoryviews) in order with sendmsg(2), however many calls it takes."""
    while frames:
        k = sock.sendmsg(frames)
        while frames and k >= len(frames[0]):
            k -= len(frames[0])
            frames = frames[1:]
        if frames and k:
            frames = [memoryview(frames[0])[k:], *frames[1:]]


def _recv_exact(sock, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def parse_getprop(out: str) -> Dict[str, str]:
    props = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("[") and "]: [" in line and line.endswith("]"):
            key, _, value = line[1:-1].partition("]: [")
            props[key] = value
    return props

