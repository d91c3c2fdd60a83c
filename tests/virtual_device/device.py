"""A virtual Android device speaking the device side of the adb protocol over TCP.

The real adb server attaches it with ``adb connect 127.0.0.1:PORT``.  It serves
``shell`` (v1 and shell_v2 with exit codes), ``exec`` and ``sync`` (STAT, LIST,
SEND, RECV); shell commands run with the host ``/bin/sh`` inside a sandbox
directory in which ``/data``, ``/sdcard`` and ``/storage`` are mapped, with small
stand-ins for the Android-only commands: getprop, setprop, df and getconf as shell functions (prelude.sh, sourced
first; also on PATH), pm, am, logcat and dumpsys on PATH.

Run it as a process: ``python -m tests.virtual_device.device CONFIG.json``; it
prints ``LISTENING <port>`` once it accepts connections.  Config keys:

* ``state_dir``: where the sandbox (``root/``), the props and the logcat buffer live;
* ``props``: what ``getprop`` answers;
* ``model``/``product``/``device``: sent in the CNXN banner;
* ``authorized`` (default true): false withholds CNXN and asks for AUTH forever;
* ``silent``: never answer CNXN (a hung adbd; adb lists the device as ``offline``);
* ``env``: extra environment for shell commands (e.g. the stand-in's crash switch);
* ``free_kb``: what ``df`` reports as available on /data;
* ``cut_send``: ``{"match": "substr", "after": BYTES, "times": 1}`` drops the
  connection half-way through a matching sync SEND (an interrupted push);
* ``corrupt_send``: ``{"match": "substr", "at": BYTE, "times": 1}`` flips the byte at offset ``at`` of
  a matching sync SEND as it is stored (a bad cable or flash: the file arrives, its content differs);
* ``install_failure``: a ``pm install`` failure reason to report (e.g.
  ``INSTALL_FAILED_INSUFFICIENT_STORAGE``);
* ``app_bench``: ``{"cpu": ms, "nnapi": ms, "fell_back": bool, "crash": bool, "hang": bool}`` for
  ``am start`` (a crash logs a FATAL EXCEPTION, a hang stops after the warm-up progress line);
* ``am_error``: what ``am start`` prints instead of starting the activity (e.g. a SecurityException);
* ``logcat_fail``: ``logcat`` exits 1 with this message;
* ``setprop_denied``: ``setprop`` refuses every property (a phone whose shell user may not set them);
* ``page_size``: what ``getconf PAGE_SIZE`` answers (4096; 16384 on a 16 KB-page device);
* ``cpus``/``thermal_zones``: the cpufreq and thermal sysfs files; ``thermal_status`` (a list: the n-th
  ``dumpsys thermalservice`` answers the n-th entry, the last one after that) and ``battery``
  (``{"level", "status", "usb"}``) for ``dumpsys``;
* ``link_mb_s``: limit sync SEND to this many MB/s (a USB 2 phone pushes ~40 MB/s);
* ``props["ro.product.cpu.abi"]``: ``arm64-v8a`` makes the phone run AArch64 programs under qemu-user (the
  binfmt_misc entry ``./run test`` registers, ``aarch64_cpu.sh``); on other phones they fail as a foreign ELF does;
* ``tools_dir``: a directory of native tool stand-ins put first on the shell's PATH (tools.py: a
  ``sha256sum`` over the host's libcrypto; ``mv``, ``chmod``, ``mkdir``, ``rm`` that make the simple cases a
  few system calls).
"""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

A_SYNC = 0x434E5953
A_CNXN = 0x4E584E43
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_AUTH = 0x48545541
VERSION = 0x01000001
MAX_PAYLOAD = 1024 * 1024  # adbd's since Android 9 (adb.h MAX_PAYLOAD); the host adb server offers the same
SYNC_MAX_DATA = 64 * 1024
AUTH_TOKEN, AUTH_SIGNATURE, AUTH_RSAPUBLICKEY = 1, 2, 3

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))  # run as a script: its sibling arm64.py
from arm64 import cpu_argv  # noqa: E402

MAPPED = ("data", "sdcard", "storage", "sys")
_PATH_RE = re.compile(r"(^|[\s'\"=:;|&(<>])/(" + "|".join(MAPPED) + r")(?=/|\s|$|['\"])")


_HEADER = struct.Struct("<6I")
WINDOW = 2 * MAX_PAYLOAD  # bytes a stream takes in before its reader caught up (then OKAY waits for it)
SPARE_BUFFERS = 8  # WRTE buffers a connection keeps for reuse (a stream has up to four: WINDOW + the one it reads)
SMALL_PAYLOAD = 64 * 1024  # smaller WRTE payloads get a buffer of their own size
THROTTLE_STEP = 0.01  # the link emulation sleeps once it is this far ahead of the link (not per DATA packet)


class Closed(Exception):
    pass


class Stream:
    """One adb stream: incoming WRTE payloads through a queue, outgoing WRTE one at a time.

    The payloads are read where they lie (a memoryview of the unread part of the current one), in buffers
    the connection reuses: sync DATA goes from the packet the connection received straight into the file.
    Flow control as adbd's: a WRTE is answered OKAY while less than WINDOW bytes wait to be read, else only
    once the reader caught up, so a slow reader (the emulated link) holds the sender back instead of the
    device buffering whole files.
    """

    def __init__(self, conn: "Connection", local_id: int, remote_id: int):
        self.conn = conn
        self.local_id = local_id
        self.remote_id = remote_id
        self.incoming: "queue.SimpleQueue[tuple | None]" = queue.SimpleQueue()
        self.view = memoryview(b"")  # the unread part of the payload being read
        self.buffer: "bytearray | None" = None  # the connection's buffer that payload is in
        self.lock = threading.Lock()
        self.waiting = 0  # bytes received and not yet taken by the reader
        self.owed = False  # an OKAY withheld until the reader catches up
        self.okay = threading.Event()
        self.okay.set()
        self.closed = False

    def deliver(self, buffer: bytearray, n: int) -> None:
        """A WRTE payload (connection thread): queue it, answer OKAY unless the reader is WINDOW behind."""
        with self.lock:
            self.waiting += n
            self.owed = self.waiting > WINDOW
            owe = self.owed
        self.incoming.put((buffer, n))
        if not owe:
            self.conn.send(A_OKAY, self.local_id, self.remote_id)

    def _more(self, timeout=None) -> None:
        if self.buffer is not None:
            self.view.release()
            self.conn.give_back(self.buffer)
            self.buffer = None
        item = self.incoming.get(timeout=timeout)
        if item is None:
            raise Closed()
        self.buffer, n = item
        self.view = memoryview(self.buffer)[:n]
        with self.lock:
            self.waiting -= n
            pay = self.owed and self.waiting <= WINDOW
            self.owed = self.owed and not pay
        if pay:
            self.conn.send(A_OKAY, self.local_id, self.remote_id)

    def pieces(self, n: int):
        """The next ``n`` bytes as memoryviews of the payloads they arrived in (valid until the next read)."""
        while n:
            if not self.view:
                self._more()
            piece, self.view = self.view[:n], self.view[n:]
            n -= len(piece)
            yield piece

    def read_exact(self, n: int) -> bytes:
        if len(self.view) >= n:
            out, self.view = bytes(self.view[:n]), self.view[n:]
            return out
        return b"".join(bytes(p) for p in self.pieces(n))

    def read_some(self, timeout=None) -> bytes:
        if not self.view:
            self._more(timeout)
        out, self.view = bytes(self.view), self.view[len(self.view):]
        return out

    def write(self, data: bytes) -> None:
        limit = self.conn.max_payload
        for i in range(0, len(data), limit):
            piece = data[i:i + limit]
            while not self.okay.wait(0.5):
                if self.closed or self.conn.dead:
                    raise Closed()
            if self.closed:
                raise Closed()
            self.okay.clear()
            self.conn.send(A_WRTE, self.local_id, self.remote_id, piece)

    def close(self) -> None:
        if self.buffer is not None:  # the service is done with it
            self.view.release()
            self.conn.give_back(self.buffer)
            self.buffer = None
        if not self.closed:
            self.closed = True
            self.conn.send(A_CLSE, self.local_id, self.remote_id)
            self.conn.streams.pop(self.local_id, None)


class Connection:
    def __init__(self, device: "VirtualDevice", sock: socket.socket):
        self.device = device
        self.sock = sock
        self.lock = threading.Lock()
        self.streams: dict = {}
        self.next_id = 1
        self.max_payload = 4096
        self.dead = False
        self.spare: list = []  # WRTE buffers the streams gave back (no new memory, no page faults per packet)

    def send(self, cmd: int, arg0: int, arg1: int, data: bytes = b"") -> None:
        check = sum(data) & 0xFFFFFFFF if len(data) <= 4096 else 0
        header = _HEADER.pack(cmd, arg0, arg1, len(data), check, cmd ^ 0xFFFFFFFF)
        with self.lock:
            try:
                self.sock.sendall(header + data)
            except OSError:
                self.dead = True
                raise Closed() from None

    def recv_into(self, view: memoryview) -> None:
        """Fill ``view`` from the socket (one system call while the sender keeps up)."""
        got, n = 0, len(view)
        while got < n:
            k = self.sock.recv_into(view[got:], n - got, socket.MSG_WAITALL)
            if not k:
                raise Closed()
            got += k

    def recv_exact(self, n: int) -> bytes:
        out = bytearray(n)
        with memoryview(out) as view:
            self.recv_into(view)
        return bytes(out)

    def give_back(self, buffer: bytearray) -> None:
        if len(buffer) == MAX_PAYLOAD and len(self.spare) < SPARE_BUFFERS:
            self.spare.append(buffer)

    def receive_write(self, arg0: int, arg1: int, length: int) -> None:
        """A WRTE: its payload read into a reusable buffer and handed to its stream."""
        if length <= SMALL_PAYLOAD:  # a shell's or a sync request's packet: a buffer of its own
            buffer = bytearray(length)
        else:
            buffer = self.spare.pop() if self.spare else bytearray(MAX_PAYLOAD)
        with memoryview(buffer)[:length] as view:
            self.recv_into(view)
        stream = self.streams.get(arg1)
        if stream is not None:
            stream.deliver(buffer, length)
        else:
            self.give_back(buffer)
            self.send(A_CLSE, 0, arg0)

    def drop(self) -> None:
        """Cut the transport, as a yanked cable would."""
        self.dead = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def serve(self) -> None:
        try:
            while True:
                cmd, arg0, arg1, length, _check, magic = _HEADER.unpack(self.recv_exact(24))
                if magic != cmd ^ 0xFFFFFFFF or length > MAX_PAYLOAD:
                    self.device.log(f"bad adb packet header (cmd={cmd:#x}, magic={magic:#x}, length={length})")
                    return
                if cmd == A_WRTE and length:
                    self.receive_write(arg0, arg1, length)
                else:
                    self.handle(cmd, arg0, arg1, self.recv_exact(length) if length else b"")
        except (Closed, OSError):
            pass
        finally:
            self.dead = True
            for s in list(self.streams.values()):
                s.closed = True
                s.incoming.put(None)
            try:
                self.sock.close()
            except OSError:
                pass

    def banner(self) -> bytes:
        cfg = self.device.config
        return (
            f"device::ro.product.name={cfg.get('product', 'virtual')};"
            f"ro.product.model={cfg.get('model', 'Virtual')};"
            f"ro.product.device={cfg.get('device', 'virtual')};"
            f"features=shell_v2,cmd\0"
        ).encode()

    def handle(self, cmd: int, arg0: int, arg1: int, data: bytes) -> None:
        if cmd == A_CNXN:
            self.max_payload = min(arg1 or 4096, MAX_PAYLOAD)
            if self.device.config.get("silent"):
                return  # a hung adbd: the server shows the device as offline
            if self.device.config.get("authorized", True):
                self.send(A_CNXN, VERSION, MAX_PAYLOAD, self.banner())
            else:
                self.send(A_AUTH, AUTH_TOKEN, 0, os.urandom(20))
        elif cmd == A_AUTH:
            if arg0 == AUTH_SIGNATURE and not self.device.config.get("authorized", True):
                self.send(A_AUTH, AUTH_TOKEN, 0, os.urandom(20))
            # AUTH_RSAPUBLICKEY: the user would have to tap "allow" on the phone; nobody does.
        elif cmd == A_OPEN:
            service = data.rstrip(b"\0").decode("utf-8", "replace")
            local_id = self.next_id
            self.next_id += 1
            stream = Stream(self, local_id, arg0)
            handler = self.device.service_for(service)
            if handler is None:
                self.send(A_CLSE, 0, arg0)
                return
            self.streams[local_id] = stream
            self.send(A_OKAY, local_id, arg0)
            threading.Thread(target=self._run_service, args=(handler, stream, service), daemon=True).start()
        elif cmd == A_WRTE:  # an empty one (receive_write takes the others)
            stream = self.streams.get(arg1)
            self.send(A_OKAY if stream is not None else A_CLSE, arg1 if stream is not None else 0, arg0)
        elif cmd == A_OKAY:
            stream = self.streams.get(arg1)
            if stream is not None:
                stream.okay.set()
        elif cmd == A_CLSE:
            stream = self.streams.pop(arg1, None)
            if stream is not None:
                stream.closed = True
                stream.incoming.put(None)

    def _run_service(self, handler, stream: Stream, service: str) -> None:
        try:
            handler(stream)
        except Closed:
            pass
        except Exception as e:  # a bug in the stand-in: report it on the stream and in the device log
            self.device.log(f"service {service!r} failed: {type(e).__name__}: {e}")
        finally:
            try:
                stream.close()
            except Closed:
                pass


class Link:
    """The device's USB link (``link_mb_s``; 0: unlimited), one for all its sync SENDs: a packet is stored when the
    link would have carried it after what was sent before it, by this SEND or by another at the same time (they
    share the link as on a phone).  A SEND alone on the link is paced from its start (time this process lost is
    made up, as before the link was shared); an idle link saves nothing up.  Sleeps once it is THROTTLE_STEP ahead,
    not per DATA packet (each sleep is a wake-up of this process: with 16 devices on two cores they add up)."""

    def __init__(self, mb_s: float):
        self.rate = mb_s * 1e6
        self.free_at = 0.0  # when the link has carried everything sent so far
        self.lock = threading.Lock()

    def carry(self, n: int, started: float, last: bool = False) -> None:
        """Wait (when far enough ahead, or at a SEND's ``last`` packet) until the link carried ``n`` more bytes of
        a SEND that began at ``started``."""
        if not self.rate:
            return
        with self.lock:
            self.free_at = max(self.free_at, started) + n / self.rate
            ahead = self.free_at - time.monotonic()
        if ahead > THROTTLE_STEP or last and ahead > 0:
            time.sleep(ahead)


class VirtualDevice:
    def __init__(self, config: dict):
        self.config = config
        self.state = Path(config["state_dir"]).resolve()
        self.root = self.state / "root"
        for d in ("data/local/tmp", "data/app", "sdcard", "storage/emulated/0"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        props = config.get("props", {})
        (self.state / "props.json").write_text(json.dumps(props))
        (self.state / "props.txt").write_text("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))
        (self.state / "free_kb").write_text(str(int(config.get("free_kb", 20 * 1024 * 1024))))
        (self.state / "device.json").write_text(json.dumps(config))
        (self.state / "page_size").write_text(str(int(config.get("page_size", 4096))) + "\n")
        if config.get("setprop_denied"):
            (self.state / "setprop_denied").write_text("1\n")
        self.write_sysfs(config)
        self.cut = dict(config.get("cut_send") or {})
        self.link = Link(float(config.get("link_mb_s") or 0))
        self.corrupt = dict(config.get("corrupt_send") or {})
        self.connections: list = []

    def write_sysfs(self, config: dict) -> None:
        """The sysfs files a shell user reads on a phone: cpufreq per CPU (kHz), thermal zones (millidegrees)."""
        cpus = config.get("cpus", [{"governor": "schedutil", "cur": 1785600, "max": 2016000}] * 4)
        for i, cpu in enumerate(cpus):
            d = self.root / f"sys/devices/system/cpu/cpu{i}/cpufreq"
            d.mkdir(parents=True, exist_ok=True)
            (d / "scaling_governor").write_text(f"{cpu.get('governor', 'schedutil')}\n")
            (d / "scaling_cur_freq").write_text(f"{int(cpu.get('cur', 1785600))}\n")
            (d / "cpuinfo_max_freq").write_text(f"{int(cpu.get('max', 2016000))}\n")
        zones = config.get("thermal_zones", [{"type": "cpu-0-0-usr", "temp": 38500}, {"type": "battery", "temp": 29000}])
        for i, zone in enumerate(zones):
            d = self.root / f"sys/class/thermal/thermal_zone{i}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "type").write_text(f"{zone['type']}\n")
            (d / "temp").write_text(f"{int(zone['temp'])}\n")

    # ------------------------------------------------------------------ helpers

    def log(self, text: str) -> None:
        with open(self.state / "device.log", "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {text}\n")

    def host_path(self, device_path: str) -> Path:
        p = os.path.normpath("/" + device_path.lstrip("/"))
        return self.root / p.lstrip("/")

    def map_command(self, cmd: str) -> str:
        return _PATH_RE.sub(lambda m: f"{m.group(1)}{self.root}/{m.group(2)}", cmd)

    def unmap_output(self, out: bytes) -> bytes:
        return out.replace(str(self.root).encode() + b"/", b"/")

    def service_for(self, service: str):
        if service.startswith("shell"):
            head, _, cmd = service.partition(":")
            opts = head.split(",")[1:]
            v2 = "v2" in opts
            return lambda s: self.shell(s, cmd, v2)
        if service.startswith("exec:"):
            return lambda s: self.shell(s, service[5:], False)
        if service == "sync:":
            return self.sync
        return None

    # ------------------------------------------------------------------ shell

    @property
    def cpu_abi(self) -> str:
        return str((self.config.get("props") or {}).get("ro.product.cpu.abi", ""))

    def run_command(self, cmd: str) -> tuple:
        tools = self.config.get("tools_dir")  # native stand-ins built by the harness (tools.py), first
        env = {
            "PATH": (f"{tools}:" if tools else "") + f"{HERE / 'vbin'}:/usr/bin:/bin",
            "HOME": str(self.root / "data/local/tmp"),
            "TMPDIR": str(self.root / "data/local/tmp"),
            "VDEV_STATE": str(self.state),
            "VDEV_ROOT": str(self.root),
            "VDEV_PYTHON": sys.executable,
            "VDEV_PRELUDE": str(HERE / "prelude.sh"),
            # the phone's CPU: AArch64 programs run (under qemu-user, aarch64_cpu.sh) only on an arm64-v8a phone
            "VDEV_CPU_ABI": self.cpu_abi,
            "LC_ALL": "C",
        }
        if os.environ.get("TORCHDROID_WARM_PYTHON"):  # the test run's warm python (tests/warm_python.py)
            env.update({k: os.environ[k] for k in ("TORCHDROID_WARM_PYTHON", "TORCHDROID_WARM_PYTHON_OWNER")})
            env.update({"VDEV_PYTHON": str(HERE.parent / "warm-python"), "VDEV_HOST_PYTHON": sys.executable})
        env.update({k: str(v) for k, v in (self.config.get("env") or {}).items()})
        self.log(f"shell: {cmd}")
        proc = subprocess.run(  # in the phone CPU's own binfmt_misc where the kernel allows it (arm64.py)
            [*cpu_argv(self.cpu_abi), "/bin/sh", "-c", '. "$VDEV_PRELUDE"\n' + self.map_command(cmd)],  # getprop, df, getconf: functions
            cwd=self.root, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600,
        )
        return proc.returncode, self.unmap_output(proc.stdout), self.unmap_output(proc.stderr)

    def shell(self, stream: Stream, cmd: str, v2: bool) -> None:
        if not cmd.strip():
            if v2:
                stream.write(b"\x03" + struct.pack("<I", 1) + b"\x00")
            return
        code, out, err = self.run_command(cmd)
        if v2:
            packet = b""
            if out:
                packet += b"\x01" + struct.pack("<I", len(out)) + out
            if err:
                packet += b"\x02" + struct.pack("<I", len(err)) + err
            packet += b"\x03" + struct.pack("<I", 1) + bytes([code & 0xFF])
            stream.write(packet)
        else:
            stream.write(out + err)

    # ------------------------------------------------------------------ sync

    def sync(self, stream: Stream) -> None:
        while True:
            try:
                head = stream.read_exact(8)
            except Closed:
                return
            req, length = head[:4], struct.unpack("<I", head[4:])[0]
            if req == b"QUIT":
                return
            arg = stream.read_exact(length).decode("utf-8", "replace")
            if req == b"STAT":
                p = self.host_path(arg)
                try:
                    st = os.lstat(p)
                    stream.write(b"STAT" + struct.pack("<III", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime)))
                except OSError:
                    stream.write(b"STAT" + struct.pack("<III", 0, 0, 0))
            elif req == b"LIST":
                p = self.host_path(arg)
                out = b""
                try:
                    names = sorted(os.listdir(p))
                except OSError:
                    names = []
                for name in [".", ".."] + names:
                    try:
                        st = os.lstat(p / name)
                    except OSError:
                        continue
                    raw = name.encode()
                    out += b"DENT" + struct.pack("<IIII", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime), len(raw)) + raw
                stream.write(out + b"DONE" + b"\0" * 16)
            elif req == b"SEND":
                self.sync_send(stream, arg)
            elif req == b"RECV":
                self.sync_recv(stream, arg)
            else:
                self.sync_fail(stream, f"unknown sync request {req!r}")
                return

    @staticmethod
    def sync_fail(stream: Stream, msg: str) -> None:
        raw = msg.encode()
        stream.write(b"FAIL" + struct.pack("<I", len(raw)) + raw)

    def sync_send(self, stream: Stream, arg: str) -> None:
        path, _, mode_s = arg.rpartition(",")
        if not path:
            path, mode_s = arg, "33188"
        mode = int(mode_s) & 0o7777 if mode_s.isdigit() else 0o644
        target = self.host_path(path)
        self.log(f"sync SEND {path}")
        cut = self.cut if self.cut.get("times", 0) > 0 and self.cut.get("match", "") in path else None
        bad = self.corrupt if self.corrupt.get("times", 0) > 0 and self.corrupt.get("match", "") in path else None
        written = 0
        error = None
        link, started = self.link, time.monotonic()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            f = open(target, "wb")  # like adbd: straight into the named file
        except OSError as e:
            f, error = None, f"{path}: {e.strerror}"
        try:
            while True:
                head = stream.read_exact(8)
                kind, n = head[:4], struct.unpack("<I", head[4:])[0]
                if kind == b"DATA":
                    if n > SYNC_MAX_DATA:
                        error = f"sync data chunk of {n} bytes is larger than {SYNC_MAX_DATA}"
                        break
                    for piece in stream.pieces(n):
                        if bad is not None and written <= int(bad.get("at", 0)) < written + len(piece):
                            piece = self.corrupted(piece, int(bad["at"]) - written, path)
                            bad["times"] -= 1
                        if f is not None:
                            f.write(piece)
                        written += len(piece)
                    link.carry(n, started)
                    if cut is not None and written >= int(cut.get("after", 0)):
                        cut["times"] -= 1
                        f.flush()
                        self.log(f"cutting the connection after {written} bytes of {path}")
                        stream.conn.drop()
                        raise Closed()
                elif kind == b"DONE":
                    link.carry(0, started, last=True)
                    if f is not None:
                        f.close()
                        os.chmod(target, mode)
                        os.utime(target, (n, n))
                        f = None
                    break
                else:
                    error = f"unexpected sync packet {kind!r} during SEND"
                    break
        finally:
            if f is not None:
                f.close()
        if error:
            self.sync_fail(stream, error)
        else:
            stream.write(b"OKAY" + b"\0" * 4)

    def corrupted(self, piece: memoryview, k: int, path: str) -> bytearray:
        """``piece`` with its byte ``k`` flipped (corrupt_send)."""
        out = bytearray(piece)
        out[k] ^= 0xFF
        self.log(f"corrupting byte {self.corrupt['at']} of {path}")
        return out

    def sync_recv(self, stream: Stream, arg: str) -> None:
        try:
            with open(self.host_path(arg), "rb") as f:
                while True:
                    block = f.read(SYNC_MAX_DATA)
                    if not block:
                        break
                    stream.write(b"DATA" + struct.pack("<I", len(block)) + block)
        except OSError as e:
            self.sync_fail(stream, f"{arg}: {e.strerror}")
            return
        stream.write(b"DONE" + b"\0" * 4)

    # ------------------------------------------------------------------ server

    def serve_forever(self, announce=print) -> None:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", int(self.config.get("port", 0))))
        lsock.listen(4)
        announce(f"LISTENING {lsock.getsockname()[1]}")
        while True:
            sock, _ = lsock.accept()
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, sock)
            threading.Thread(target=conn.serve, daemon=True).start()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    config = json.loads(Path(argv[0]).read_text())
    VirtualDevice(config).serve_forever(lambda line: (print(line), sys.stdout.flush()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
