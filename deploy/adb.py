"""The adb tool: the user's adb server (through adbutils) and one device on it.

Every call has a timeout; shell commands go through shell_v2 so the remote exit
code is always checked; file pushes use our own sync client (64 KiB chunks, a
socket timeout, a byte counter) because adbutils' sync has no timeout.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import socket
import stat as _stat
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from toolchain.errors import DeviceError, ToolFailed, ToolNotFound

log = logging.getLogger(__name__)

DEFAULT_PORT = 5037
_SPLIT = "--torchdroid-df--"
SYNC_CHUNK = 64 * 1024  # the sync protocol's maximum DATA size
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


def resolve_port(port: Optional[int]) -> int:
    if port:
        return int(port)
    env = os.environ.get("ANDROID_ADB_SERVER_PORT")
    return int(env) if env and env.isdigit() else DEFAULT_PORT


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


class AdbServer:
    """The adb server the user already runs (host/port configurable; ANDROID_ADB_SERVER_PORT honoured)."""

    def __init__(self, host: str = "127.0.0.1", port: Optional[int] = None, timeout: float = 30.0):
        self.host = host
        self.port = resolve_port(port)
        self.timeout = timeout
        self._client = None

    @classmethod
    def locate(cls, host: str, port: Optional[int], timeout: float = 30.0) -> "AdbServer":
        server = cls(host, port, timeout)
        server.verify()
        return server

    @property
    def client(self):
        if self._client is None:
            import adbutils

            self._client = adbutils.AdbClient(host=self.host, port=self.port, socket_timeout=self.timeout)
        return self._client

    def verify(self) -> int:
        """Return the server's version; refuse politely when nothing listens."""
        try:
            with socket.create_connection((self.host, self.port), timeout=5):
                pass
            return int(self.client.server_version())
        except (OSError, Exception) as e:  # adbutils raises its own AdbError/AdbTimeout
            raise ToolNotFound(
                f"no adb server answers on {self.host}:{self.port}",
                cause=f"{type(e).__name__}: {e}",
                remedy="start it with `adb start-server` (Debian: apt-get install adb), or point "
                       "deploy.adb_host / deploy.adb_port (or ANDROID_ADB_SERVER_PORT) at the one you run",
            ) from e

    def devices(self) -> Dict[str, str]:
        """``{serial: state}`` for every device the server knows, including unusable ones."""
        return {info.serial: info.state for info in self.client.list()}

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
        self._dev = server.client.device(serial)

    # ------------------------------------------------------------------ shell

    def shell(self, command: str, timeout: Optional[float] = None, check: bool = False, what: str = "") -> ShellResult:
        from adbutils import AdbError, AdbTimeout

        log.debug("[%s] $ %s", self.serial, command)
        try:
            r = self._dev.shell2(command, timeout=timeout or self.timeout, v2=True)
        except AdbTimeout as e:
            raise ToolFailed(
                f"`{command}` on {self.serial} did not finish within {timeout or self.timeout:g}s",
                cause=str(e),
                remedy="raise deploy.timeout, or check the device with `adb -s "
                       f"{self.serial} shell` (is it asleep or overloaded?)",
            ) from e
        except (AdbError, OSError) as e:
            raise DeviceError(
                f"lost the connection to {self.serial} while running `{command}`",
                cause=f"{type(e).__name__}: {e}",
                remedy="reconnect the device (`adb devices` should list it as `device`) and run the deploy again",
            ) from e
        result = ShellResult(command, int(r.returncode), r.output)
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

    def _sync(self):
        c = self._dev.open_transport(timeout=self.timeout)
        c.send_command("sync:")
        c.check_okay()
        return c

    def sync_session(self) -> "SyncSession":
        """One sync connection for several pushes (opening one costs a round trip through the server)."""
        return SyncSession(self)

    def push_file(self, local: Path, remote: str, mode: int = 0o644,
                  on_bytes: Optional[Callable[[int], None]] = None) -> Tuple[int, str]:
        """Send ``local`` to ``remote`` with sync SEND; return the bytes sent and their sha256.

        Raises DeviceError when the device refuses the file or the connection drops.
        """
        with self.sync_session() as session:
            return session.push_file(local, remote, mode, on_bytes)


class SyncSession:
    """A sync connection to one device, opened on first use; every SEND on it is checked (OKAY/FAIL)."""

    def __init__(self, device: Device):
        self.device = device
        self._c = None

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

    def push_file(self, local: Path, remote: str, mode: int = 0o644,
                  on_bytes: Optional[Callable[[int], None]] = None, with_hash: bool = True) -> Tuple[int, Optional[str]]:
        """Send ``local`` to ``remote`` with sync SEND; return the bytes sent and their sha256 (None unless
        ``with_hash``: a caller that knows the hash to expect lets the device check it instead)."""
        serial = self.device.serial
        sent = 0
        digest = hashlib.sha256() if with_hash else None
        if self._c is None:
            self._c = self.device._sync()
        ok = False
        try:
            raw = f"{remote},{_stat.S_IFREG | mode}".encode()
            sock = self._c.conn
            sock.sendall(b"SEND" + struct.pack("<I", len(raw)) + raw)
            with open(local, "rb") as f:
                while True:
                    block = f.read(SYNC_CHUNK)
                    if not block:
                        break
                    sock.sendall(b"DATA" + struct.pack("<I", len(block)) + block)
                    if digest is not None:
                        digest.update(block)
                    sent += len(block)
                    if on_bytes:
                        on_bytes(len(block))
            sock.sendall(b"DONE" + struct.pack("<I", int(time.time())))
            reply = _recv_exact(sock, 8)
            if reply[:4] == b"FAIL":
                n = struct.unpack("<I", reply[4:])[0]
                msg = _recv_exact(sock, n).decode("utf-8", "replace")
                raise DeviceError(
                    f"{serial} refused {remote}",
                    cause=msg,
                    remedy="check the device directory (deploy.device_dir) is writable: "
                           f"adb -s {serial} shell ls -ld {shlex.quote(str(Path(remote).parent))}",
                )
            if reply[:4] != b"OKAY":
                raise DeviceError(f"unexpected sync reply {reply[:4]!r} from {serial} after pushing {remote}")
            ok = True
            return sent, digest.hexdigest() if digest is not None else None
        except (OSError, EOFError) as e:
            raise DeviceError(
                f"the push of {local.name} to {serial} was interrupted after {sent} bytes",
                cause=f"{type(e).__name__}: {e}",
                remedy="reconnect the device and run `invoke deploy` again: finished files are skipped and "
                       "nothing half-pushed is ever left under a final name",
            ) from e
        finally:
            if not ok:  # after a FAIL or a drop the connection is in no known state: never reuse it
                c, self._c = self._c, None
                if c is not None:
                    c.close()


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

