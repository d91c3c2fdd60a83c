"""Start a private real adb server and virtual devices attached to it (test-only)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, Optional

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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

    def start(self) -> "AdbServer":
        adb = shutil.which("adb")
        if adb is None:
            raise RuntimeError("adb is not installed (apt-get install adb; ./run test installs it)")
        log = open(self.workdir / "adb-server.log", "ab")
        self.proc = subprocess.Popen([adb, "-P", str(self.port), "nodaemon", "server"], env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"adb server exited: see {self.workdir / 'adb-server.log'}")
            time.sleep(0.05)
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
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


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
        cfg = self.state_dir / "config.json"
        cfg.write_text(json.dumps(self.config))
        self.proc = subprocess.Popen([sys.executable, str(HERE / "device.py"), str(cfg)], stdout=subprocess.PIPE,
                                     stderr=open(self.state_dir / "device.stderr", "ab"), text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"virtual device did not start: {line!r}; see {self.state_dir / 'device.stderr'}")
        self.port = int(line.split()[1])
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


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
