"""`invoke doctor`: what this machine has for every stage, what is missing, and the fix.

Never raises for a missing tool: every check becomes a :class:`Check` row; tasks.py prints
the table and exits non-zero only with ``--strict``.
"""

from __future__ import annotations

import importlib.metadata as md
import logging
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Mapping, Optional

from toolchain import pins
from toolchain.errors import TorchdroidError
from toolchain.runner import run

from .hostpython import HostPython
from .ndk import Ndk, release_name
from .sdk import AndroidSdk

log = logging.getLogger(__name__)

OK, MISSING, WARN, INFO = "ok", "missing", "warn", "info"


@dataclass(frozen=True)
class Check:
    stage: str
    name: str
    status: str  # ok | missing | warn | info
    found: str
    fix: str = ""
    required: bool = False  # for the stage to work at all

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DoctorSettings:
    lane: str = pins.DEFAULT_LANE
    ndk: Optional[str] = None
    ndk_config: Optional[str] = None
    sdk: Optional[str] = None
    python: Optional[str] = None
    adb_host: Optional[str] = None  # None: ANDROID_ADB_SERVER_ADDRESS or 127.0.0.1
    adb_port: Optional[int] = None
    env: Optional[Mapping[str, str]] = None
    servers: tuple = ()  # HOST:PORT of every adb server (deploy.servers / --adb-server)


def _first_line(argv: List[str]) -> Optional[str]:
    try:
        res = run(argv, check=False, timeout=30, what=f"`{Path(argv[0]).name}`")
    except TorchdroidError:
        return None
    lines = [ln for ln in res.lines if ln.strip()]
    return lines[0].strip() if lines and res.returncode == 0 else None


def _tool(stage: str, name: str, exe: str, version_args: List[str], fix: str, required: bool,
          absent: str = INFO) -> Check:
    """``absent``: the status when a tool that is not required is missing (INFO: a speed-up; WARN: a stage's tool)."""
    path = shutil.which(exe)
    if not path:
        return Check(stage, name, MISSING if required else absent, "not found", fix, required)
    version = _first_line([path, *version_args]) or "version unknown"
    return Check(stage, name, OK, f"{version} ({path})", "", required)


def _guard(fn: Callable[[], List[Check]], stage: str, name: str) -> List[Check]:
    try:
        return fn()
    except Exception as e:  # a doctor must never crash on a broken tool
        log.debug("doctor check %s failed", name, exc_info=True)
        return [Check(stage, name, WARN, f"check failed: {type(e).__name__}: {e}", "see the run log")]


def _python_checks(s: DoctorSettings) -> List[Check]:
    out = [Check("all", "python", OK, f"{sys.version.split()[0]} ({sys.executable})", "", True)]
    try:
        import torch

        xnn = bool(getattr(torch.backends, "xnnpack", None) and torch.backends.xnnpack.enabled)
        out.append(Check("convert", "torch", OK, f"{torch.__version__} (git {(torch.version.git_version or '?')[:12]})",
                         "", True))
        out.append(Check("convert", "XNNPACK", OK if xnn else INFO, "available" if xnn else "not in this torch build",
                         "" if xnn else "optional: only optimize_for_mobile's XNNPACK passes need it"))
    except Exception as e:
        out.append(Check("convert", "torch", MISSING, f"cannot import: {e}", "pip install torch torchvision", True))
    try:
        out.append(Check("convert", "torchvision", OK, md.version("torchvision"), "", True))
    except md.PackageNotFoundError:
        out.append(Check("convert", "torchvision", MISSING, "not installed", "pip install torchvision", True))
    try:
        out.append(Check("make-app", "cookiecutter", OK, md.version("cookiecutter"), "", True))
    except md.PackageNotFoundError:
        out.append(Check("make-app", "cookiecutter", MISSING, "not installed", "pip install cookiecutter", True))
    lane = pins.lane(s.lane)
    try:
        hp = HostPython.locate(s.python)
        try:
            hp.check(lane)
            status, fix = OK, ""
        except TorchdroidError as e:
            status, fix = WARN, e.remedy or e.what
        lacks = f"; lacks {', '.join(hp.missing_modules)}" if hp.missing_modules else ""
        out.append(Check("build-android", f"host Python for lane {lane.name}", status,
                         f"{hp.version_str} ({hp.path}){lacks}", fix, False))
    except TorchdroidError as e:
        out.append(Check("build-android", f"host Python for lane {lane.name}", WARN, e.what, e.remedy or ""))
    return out


def _ndk_checks(s: DoctorSettings) -> List[Check]:
    lane = pins.lane(s.lane)
    env = os.environ if s.env is None else s.env
    want = f"install NDK {lane.ndk_recommended} and set ANDROID_NDK (or --ndk / ndk.path)"
    try:
        ndk = Ndk.locate(s.ndk, s.ndk_config, env, lane)
    except TorchdroidError as e:
        return [Check("build-android", "Android NDK", WARN, e.what, want)]
    fits = ndk.fits(lane)
    span = f"{release_name(lane.ndk_min)}-{release_name(lane.ndk_max)}"
    return [Check("build-android", "Android NDK", OK if fits else WARN,
                  f"{ndk.release} ({ndk.revision}) at {ndk.path} via {ndk.found_by}; lane {lane.name} wants {span}",
                  "" if fits else want)]


def _sdk_checks(s: DoctorSettings) -> List[Check]:
    env = os.environ if s.env is None else s.env
    sdk = AndroidSdk.find(s.sdk, env)
    out = [Check("make-app", "Android SDK", OK if sdk else WARN,
                 f"{sdk.path} via {sdk.found_by}" if sdk else "not found (ANDROID_HOME / ANDROID_SDK_ROOT)",
                 "" if sdk else "install the command-line tools and set ANDROID_HOME (needed for build-app and --aar)")]
    gradle = shutil.which("gradle")
    out.append(Check("make-app", "Gradle", OK if gradle else INFO, gradle or "not on PATH",
                     "" if gradle else f"optional: the generated app ships a Gradle "
                                       f"{pins.LANES[pins.DEFAULT_LANE].gradle} wrapper"))
    return out


def _adb_checks(s: DoctorSettings) -> List[Check]:
    """adb itself, then one "devices" row per adb server (the deploy's own resolution of the servers)."""
    from deploy.adb import Adb
    from deploy.servers import list_servers

    env = os.environ if s.env is None else s.env
    out = [_tool("deploy", "adb", "adb", ["version"], "sudo apt-get install adb (or the SDK's platform-tools)",
                 False, WARN)]
    try:
        adb = Adb.locate(s.servers, s.adb_host, s.adb_port, env=env, timeout=5)
    except TorchdroidError as e:
        out.append(Check("deploy", "devices", WARN, e.what, e.remedy or ""))
        return out
    several = len(adb.addresses) > 1
    for listing in list_servers(adb):
        name = f"devices ({listing.address})" if several else "devices"
        out.append(_devices_check(name, listing))
    return out


def _devices_check(name: str, listing) -> Check:
    if not listing.up:
        return Check("deploy", name, INFO, f"no adb server on {listing.address} (not started by doctor)",
                     "`adb start-server` (or `adb -P PORT start-server` on that host), then `adb devices`")
    states = sorted(listing.devices.items())
    not_ready = [serial for serial, state in states if state != "device"]
    if not states:
        fix = "connect a phone with USB debugging on and accept the prompt"
    elif not_ready:
        fix = (f"{', '.join(not_ready)}: unlock the phone and accept the USB debugging prompt (unauthorized), "
               f"or reconnect it (offline: `adb reconnect`)")
    else:
        fix = ""
    ready = len(states) - len(not_ready)  # one ready phone is enough to deploy; the others get the fix
    return Check("deploy", name, OK if ready else WARN,
                 ", ".join(f"{serial} ({state})" for serial, state in states) or "none attached", fix)


def run_doctor(s: DoctorSettings) -> List[Check]:
    checks: List[Check] = []
    checks += _guard(lambda: _python_checks(s), "all", "python")
    for name, exe, args, fix, required in (
        ("git", "git", ["--version"], "sudo apt-get install git", True),
        ("cmake", "cmake", ["--version"], "sudo apt-get install cmake (or pip install cmake)", True),
        ("ninja", "ninja", ["--version"], "optional, faster builds: sudo apt-get install ninja-build", False),
        ("ccache", "ccache", ["--version"], "optional, faster rebuilds: sudo apt-get install ccache", False),
        ("readelf", "readelf", ["--version"], "optional, verifies the binary: sudo apt-get install binutils", False),
    ):
        checks += _guard(lambda: [_tool("build-android", name, exe, args, fix, required)], "build-android", name)
    checks += _guard(lambda: _ndk_checks(s), "build-android", "Android NDK")
    checks += _guard(lambda: [_tool("make-app", "JDK (javac)", "javac", ["-version"],
                                    "sudo apt-get install openjdk-17-jdk-headless", False, WARN)], "make-app", "JDK")
    checks += _guard(lambda: _sdk_checks(s), "make-app", "Android SDK")
    checks += _guard(lambda: _adb_checks(s), "deploy", "adb")
    return checks


def machine_checks(s: DoctorSettings) -> List[Check]:
    """Only the rows `invoke all` decides by (NDK, SDK, adb devices): no torch import, no other tool probed."""
    return (_guard(lambda: _ndk_checks(s), "build-android", "Android NDK")
            + _guard(lambda: _sdk_checks(s), "make-app", "Android SDK")
            + _guard(lambda: _adb_checks(s), "deploy", "adb"))


def problems(checks: List[Check]) -> List[Check]:
    """What --strict fails on: anything missing or not fitting."""
    return [c for c in checks if c.status in (MISSING, WARN)]
