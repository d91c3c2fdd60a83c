"""Start a private real adb server and virtual devices attached to it (test-only)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterator, Optional, Sequence

from .tools import tools_dir

HERE = Path(__file__).resolve().parent
STANDARD_PROPS = {
    "ro.product.cpu.abi": "arm64-v8a",
    "ro.product.cpu.abilist": "arm64-v8a,armeabi-v7a,armeabi",
    "ro.build.version.sdk": "30",
    "ro.build.version.release": "11",
    "ro.product.model": "Virtual Pixel",
    "ro.product.manufacturer": "torchdroid",
    "ro.board.platform": "sdm670",
    "ro.soc.model": "SDM670",
}


def _die_with_parent() -> None:  # runs in the child before exec: SIGTERM it when the test process dies
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a TCP socket listening on ``port`` (Linux /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{cols[9]}]")
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return True
    return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_HELD: list = []  # this process's held dead port: (its context, the port), entered once, never left


def held_dead_port() -> int:
    """A :func:`dead_port` held for the rest of this process: for what outlives one block (the adversarial suite's
    clean environment, a module's environment), instead of assuming some fixed port (1, 9) is unused."""
    if not _HELD:
        held = dead_port()
        _HELD.append((held, held.__enter__()))
    return _HELD[0][1]


class AdbServer:
    """``adb -P PORT nodaemon server`` with a private HOME/TMPDIR; no USB, emulator or mDNS scanning."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.port = free_port()
        self.home = self.workdir / "adb-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.proc: Optional[subprocess.Popen] = None
        self._clients: list = []
        self.env = dict(os.environ)
        self.env.update({
            "HOME": str(self.home), "TMPDIR": str(self.home), "ADB_USB": "0", "ADB_EMU": "0", "ADB_MDNS": "0",
            "ANDROID_ADB_SERVER_PORT": str(self.port),
        })
        self.env.pop("ANDROID_SERIAL", None)

    def start(self, attempts: int = 5) -> "AdbServer":
        """Start the server on a fresh port; another suite may take a port between pick and bind: retry."""
        adb = shutil.which("adb")
        if adb is None:
            raise RuntimeError("adb is not installed (apt-get install adb; ./run test installs it)")
        for _ in range(attempts):
            if self._start_once(adb):
                return self
            self.port = free_port()
            self.env["ANDROID_ADB_SERVER_PORT"] = str(self.port)
        raise RuntimeError(f"adb server did not start after {attempts} ports: see {self.workdir / 'adb-server.log'}")

    def _start_once(self, adb: str) -> bool:
        log = open(self.workdir / "adb-server.log", "ab")
        self.proc = subprocess.Popen([adb, "-P", str(self.port), "nodaemon", "server"], env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:  # e.g. "Address already in use" (adb takes ~0.5 s to give up)
                return False
            if _listens(self.proc.pid, self.port):  # the listener is ours, not another suite's
                return True
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("adb server did not start listening")

    def adb(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(["adb", "-P", str(self.port), *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def states(self) -> Dict[str, str]:
        out = self.adb("devices").stdout
        return dict(line.split("\t")[:2] for line in out.splitlines()[1:] if "\t" in line)

    def connect(self, port: int, want: str = "device", timeout: float = 15) -> str:
        serial = f"127.0.0.1:{port}"
        if want == "offline":  # `adb connect` waits 10 s for a handshake that never comes: do not wait with it
            client = subprocess.Popen(["adb", "-P", str(self.port), "connect", serial], env=self.env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self._clients.append(client)
        else:
            self.adb("connect", serial, timeout=timeout)
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.states().get(serial)
            if state == want:
                return serial
            time.sleep(0.05)
        raise RuntimeError(f"{serial} is {state!r}, not {want!r} after {timeout}s")

    def disconnect(self, serial: str) -> None:
        self.adb("disconnect", serial, timeout=15)

    def stop(self) -> None:
        for client in self._clients:
            if client.poll() is None:
                client.kill()
            client.wait()
        if self.proc is not None:
            terminate(self.proc)


def terminate(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class VirtualDeviceProcess:
    """One virtual device in its own process (so it does not share the test's GIL)."""

    def __init__(self, state_dir: Path, props: Optional[dict] = None, **config):
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.config = {"state_dir": str(self.state_dir), "props": {**STANDARD_PROPS, **(props or {})}}
        self.config.setdefault("model", self.config["props"].get("ro.product.model", "Virtual"))
        self.config.update(config)
        self.proc: Optional[subprocess.Popen] = None
        self.port: Optional[int] = None
        self.serial: Optional[str] = None

    @property
    def root(self) -> Path:
        return self.state_dir / "root"

    def path(self, device_path: str) -> Path:
        return self.root / device_path.lstrip("/")

    def start(self) -> "VirtualDeviceProcess":
        return self.launch().ready()

    def launch(self) -> "VirtualDeviceProcess":
        """Start the process without waiting for it (``ready`` waits): many devices start in parallel."""
        if "tools_dir" not in self.config:  # native stand-ins (a SHA-NI sha256sum), when they build here
            built = tools_dir()
            self.config["tools_dir"] = str(built) if built else None
        cfg = self.state_dir / "config.json"
        cfg.write_text(json.dumps(self.config))
        with open(self.state_dir / "device.stderr", "ab") as err:
            self.proc = subprocess.Popen([sys.executable, str(HERE / "device.py"), str(cfg)], stdout=subprocess.PIPE,
                                         stderr=err, text=True, preexec_fn=_die_with_parent)
        return self

    def ready(self) -> "VirtualDeviceProcess":
        line = self.proc.stdout.readline()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"virtual device did not start: {line!r}; see {self.state_dir / 'device.stderr'}")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc)
            if self.proc.stdout:
                self.proc.stdout.close()


@contextlib.contextmanager
def adb_with_devices(workdir: Path, devices: Dict[str, dict], ) -> Iterator[tuple]:
    """Start a server and the named devices; yield ``(server, {name: VirtualDeviceProcess})``.

    A device config with ``authorized=False`` is connected and left ``unauthorized``, one with
    ``silent=True`` is left ``offline``.
    Devices are disconnected before they are stopped.
    """
    workdir = Path(workdir)
    server = AdbServer(workdir).start()
    started: Dict[str, VirtualDeviceProcess] = {}
    try:
        for name, cfg in devices.items():
            dev = VirtualDeviceProcess(workdir / f"dev-{name}", **cfg).start()
            started[name] = dev
            want = "offline" if cfg.get("silent") else "device" if cfg.get("authorized", True) else "unauthorized"
            dev.serial = server.connect(dev.port, want=want)
        yield server, started
    finally:
        for dev in started.values():
            if dev.serial:
                with contextlib.suppress(Exception):
                    server.disconnect(dev.serial)
        for dev in started.values():
            dev.stop()
        server.stop()


@contextlib.contextmanager
def dead_port() -> Iterator[int]:
    """A port on 127.0.0.1 where nothing listens while the block runs (a server that is down: connection refused).

    A socket holds the port, bound and never listening, and without SO_REUSEADDR, so no other socket can bind it
    meanwhile; a connection to a bound port without a listener is refused at once.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def _want(cfg: dict) -> str:
    return "offline" if cfg.get("silent") else "device" if cfg.get("authorized", True) else "unauthorized"


@contextlib.contextmanager
def adb_servers_with_devices(workdir: Path, servers: Dict[str, Dict[str, dict]],
                             down: Sequence[str] = ()) -> Iterator[tuple]:
    """Several real adb servers, each with its own virtual devices, and servers that are ``down``.

    Yields ``({server name: AdbServer}, {device name: VirtualDeviceProcess}, {down name: port})``; device
    names are unique across servers.  Device processes start in parallel and are connected in parallel
    (16 devices on 4 servers take a few seconds); everything stops at the end, as in adb_with_devices.
    """
    workdir = Path(workdir)
    started: Dict[str, AdbServer] = {}
    devices: Dict[str, VirtualDeviceProcess] = {}
    owner: Dict[str, AdbServer] = {}
    dead = contextlib.ExitStack()
    try:
        for sname, devs in servers.items():
            started[sname] = AdbServer(workdir / f"server-{sname}").start()
            for dname, cfg in devs.items():
                if dname in devices:
                    raise ValueError(f"device name {dname!r} is used twice")
                devices[dname] = VirtualDeviceProcess(workdir / f"dev-{dname}", **cfg).launch()
                owner[dname] = started[sname]
        for dev in devices.values():
            dev.ready()
        with ThreadPoolExecutor(max_workers=8) as pool:
            serials = pool.map(lambda n: owner[n].connect(devices[n].port, want=_want(devices[n].config)), devices)
            for name, serial in zip(list(devices), serials):
                devices[name].serial = serial
        yield started, devices, {name: dead.enter_context(dead_port()) for name in down}
    finally:
        dead.close()
        for name, dev in devices.items():
            if dev.serial:
                with contextlib.suppress(Exception):
                    owner[name].disconnect(dev.serial)
        for dev in devices.values():
            dev.stop()
        for server in started.values():
            server.stop()
