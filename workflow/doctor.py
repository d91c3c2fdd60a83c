"""`invoke doctor`: what this machine has for every stage, what is missing, and the fix.

Doctor asks the tools layer (:mod:`toolchain.tools`) and returns typed :class:`Check` facts.  Each fact has a
stable ``id`` (``build-android.ndk``, ``make-app.sdk``, ``deploy.devices`` ...) that code should match on; the
``name`` is for people and may change.  Never raises for a missing tool; tasks.py prints the table and
exits non-zero only with ``--strict``.
"""

from __future__ import annotations

import importlib.metadata as md
import logging
import os
import shutil
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional

from toolchain import pins
from toolchain.errors import TorchdroidError
from toolchain.tools import CMake, Jdk, Ninja, agp_min_java, gradle_java_range
from toolchain.tools.hostpython import HostPython
from toolchain.tools.ndk import Ndk, install_remedy, release_name
from toolchain.tools.programs import Adb, Ccache, GitTool, GradleOnPath, Program
from toolchain.tools.sdk import AndroidSdk

log = logging.getLogger(__name__)

OK, MISSING, WARN, INFO = "ok", "missing", "warn", "info"

NNAPI_MEANING = (
    f"NNAPI is deprecated from Android 15 (API {pins.NNAPI_DEPRECATED_SDK}): the NDK marks its functions "
    f"__NNAPI_DEPRECATED_IN({pins.NNAPI_DEPRECATED_SDK}). On such devices the vendor driver may be missing and "
    "NNAPI may run on its CPU fallback (nnapi-reference), so an 'NNAPI' latency there can be a CPU number; deploy and "
    "report mark those results")


@dataclass(frozen=True)
class Check:
    stage: str
    name: str  # for people (may change)
    status: str  # ok | missing | warn | info
    found: str
    fix: str = ""
    required: bool = False  # for the stage to work at all
    id: str = ""  # stable: "<stage>.<tool>", what code matches on

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

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self.env is None else self.env


def _guard(fn: Callable[[], List[Check]], stage: str, name: str, fact_id: str) -> List[Check]:
    try:
        return fn()
    except Exception as e:  # a doctor must never crash on a broken tool
        log.debug("doctor check %s failed", name, exc_info=True)
        return [Check(stage, name, WARN, f"check failed: {type(e).__name__}: {e}", "see the run log", id=fact_id)]


def _program(stage: str, name: str, tool: Program, required: bool, absent: str, fact_id: str,
             fix: str = "") -> Check:
    if not tool.found:
        return Check(stage, name, MISSING if required else absent, "not found", fix or tool.INSTALL, required,
                     fact_id)
    return Check(stage, name, OK, f"{tool.version_str} ({tool.path})", "", required, fact_id)


def _distribution(stage: str, name: str, dist: str, fix: str, fact_id: str) -> Check:
    try:
        return Check(stage, name, OK, md.version(dist), "", True, fact_id)
    except md.PackageNotFoundError:
        return Check(stage, name, MISSING, "not installed", fix, True, fact_id)


def _python_checks(s: DoctorSettings) -> List[Check]:
    out = [Check("all", "python", OK, f"{sys.version.split()[0]} ({sys.executable})", "", True, "all.python")]
    try:
        import torch

        xnn = bool(getattr(torch.backends, "xnnpack", None) and torch.backends.xnnpack.enabled)
        out.append(Check("convert", "torch", OK, f"{torch.__version__} (git {(torch.version.git_version or '?')[:12]})",
                         "", True, "convert.torch"))
        out.append(Check("convert", "XNNPACK", OK if xnn else INFO, "available" if xnn else "not in this torch build",
                         "" if xnn else "optional: only optimize_for_mobile's XNNPACK passes need it", False,
                         "convert.xnnpack"))
    except Exception as e:
        out.append(Check("convert", "torch", MISSING, f"cannot import: {e}", "pip install torch torchvision", True,
                         "convert.torch"))
    out.append(_distribution("convert", "torchvision", "torchvision", "pip install torchvision", "convert.torchvision"))
    out.append(_distribution("make-app", "cookiecutter", "cookiecutter", "pip install cookiecutter",
                             "make-app.cookiecutter"))
    return out


def _host_python_check(s: DoctorSettings) -> List[Check]:
    lane = pins.lane(s.lane)
    name, fact_id = f"host Python for lane {lane.name}", "build-android.host-python"
    try:
        hp = HostPython.locate(s.python)
    except TorchdroidError as e:
        return [Check("build-android", name, WARN, e.what, e.remedy or "", False, fact_id)]
    try:
        hp.check(lane)
        status, fix = OK, ""
    except TorchdroidError as e:
        status, fix = WARN, e.remedy or e.what
    lacks = f"; lacks {', '.join(hp.missing_modules)}" if hp.missing_modules else ""
    return [Check("build-android", name, status, f"{hp.version_str} ({hp.path}){lacks}", fix, False, fact_id)]


def _converter_check(s: DoctorSettings) -> List[Check]:
    """Does the torch installed here match the lane's converter pin? (check-compat decides per model)"""
    lane = pins.lane(s.lane)
    try:
        here = md.version("torch")
    except md.PackageNotFoundError:
        return []
    same = f"=={here.split('+')[0]}" in lane.converter_torch
    found = f"torch {here} installed; lane {lane.name} converts with {lane.converter_torch}"
    fix = "" if same else (f"models converted here may use operators or a file format PyTorch {lane.pytorch_ref} "
                           "lacks: `invoke check-compat` says which; for a sure match install the lane's converter "
                           "in another environment")
    return [Check("convert", "converter for the lane", OK if same else INFO, found, fix, False,
                  "convert.lane-converter")]


def _ndk_checks(s: DoctorSettings) -> List[Check]:
    lane = pins.lane(s.lane)
    try:
        ndk = Ndk.locate(s.ndk, s.ndk_config, s.environ, lane)
    except TorchdroidError as e:
        return [Check("build-android", "Android NDK", WARN, e.what, install_remedy(lane), False, "build-android.ndk")]
    fits = ndk.fits(lane)
    span = f"{release_name(lane.ndk_min)}-{release_name(lane.ndk_max)}"
    out = [Check("build-android", "Android NDK", OK if fits else WARN,
                 f"{ndk.release} ({ndk.revision}) at {ndk.path} via {ndk.found_by}; lane {lane.name} wants {span}",
                 "" if fits else install_remedy(lane), False, "build-android.ndk")]
    pages = ("ANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON" if ndk.has_flexible_page_sizes_option
             else "-Wl,-z,max-page-size=16384 (NDK < r27)")
    vulkan = "--vulkan possible (vulkan_wrapper present)" if ndk.has_vulkan_wrapper else (
        "no vulkan_wrapper (r23+): builds use -DUSE_VULKAN=OFF, --vulkan is refused")
    out.append(Check("build-android", "NDK layout", INFO, f"{vulkan}; 16 KB pages via {pages}", "", False,
                     "build-android.ndk-layout"))
    return out


def _aar_jdk_check(s: DoctorSettings) -> List[Check]:
    """A JDK that upstream's Gradle (the lane's pins) accepts, for build-android --aar."""
    lane = pins.lane(s.lane)
    gradle, agp = lane.aar_gradle or lane.gradle, lane.aar_android_gradle_plugin or lane.android_gradle_plugin
    low, high = gradle_java_range(gradle)
    low = max(low, agp_min_java(agp))
    name = f"JDK for --aar (Gradle {gradle})"
    jdk = Jdk.find(low, high, s.environ)
    if jdk:
        return [Check("build-android", name, OK, f"Java {jdk.major} at {jdk.home} via {jdk.found_by}", "", False,
                      "build-android.aar-jdk")]
    found = ", ".join(f"{j.major}" for j in Jdk.all(s.environ)) or "none"
    return [Check("build-android", name, INFO, f"no JDK {low}-{high} (found: {found})",
                  "optional, for --aar only: install a JDK 11 (e.g. Temurin 11) and pass --java-home or set "
                  "JAVA_HOME", False, "build-android.aar-jdk")]


def _app_jdk_check(s: DoctorSettings) -> List[Check]:
    jdk = Jdk.find(17, 99, s.environ)
    if jdk:
        return [Check("make-app", "JDK (javac)", OK, f"Java {jdk.major} at {jdk.home} via {jdk.found_by}", "", False,
                      "make-app.jdk")]
    return [Check("make-app", "JDK (javac)", WARN, "no JDK 17+ found (JAVA_HOME, PATH, /usr/lib/jvm)",
                  "sudo apt-get install openjdk-17-jdk-headless (AGP 8 needs Java 17)", False, "make-app.jdk")]


def _sdk_checks(s: DoctorSettings) -> List[Check]:
    sdk = AndroidSdk.find(s.sdk, s.environ)
    if sdk:
        out = [Check("make-app", "Android SDK", OK, f"{sdk.path} via {sdk.found_by}", "", False, "make-app.sdk")]
    else:
        try:
            AndroidSdk.require(s.sdk, s.environ, why="build-app and --aar")
            why, fix = "not found", ""
        except TorchdroidError as e:
            why, fix = f"{e.what}: {e.cause}", e.remedy or ""
        out = [Check("make-app", "Android SDK", WARN, why, fix, False, "make-app.sdk")]
    gradle = GradleOnPath.locate(s.environ)
    out.append(Check("make-app", "Gradle", OK if gradle.found else INFO,
                     str(gradle.path) if gradle.found else "not on PATH",
                     "" if gradle.found else "optional: without it make-app writes gradlew but no "
                                             "gradle-wrapper.jar; install Gradle (make-app then adds the jar for "
                                             f"Gradle {pins.LANES[pins.DEFAULT_LANE].gradle}) or open the app in "
                                             "Android Studio", False,
                     "make-app.gradle"))
    return out


def _devices_check(name: str, listing) -> Check:
    if not listing.up:
        return Check("deploy", name, INFO, f"no adb server on {listing.address} (not started by doctor)",
                     "`adb start-server` (or `adb -P PORT start-server` on that host), then `adb devices`", False,
                     "deploy.devices")
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
                 ", ".join(f"{serial} ({state})" for serial, state in states) or "none attached", fix, False,
                 "deploy.devices")


def _adb_checks(s: DoctorSettings) -> List[Check]:
    """adb itself, then one "devices" row per adb server (the deploy's own resolution of the servers)."""
    from deploy.adb import Adb as AdbServers  # deploy owns how servers are resolved
    from deploy.servers import list_servers

    out = [_program("deploy", "adb", Adb.locate(s.environ), False, WARN, "deploy.adb")]
    try:
        adb = AdbServers.locate(s.servers, s.adb_host, s.adb_port, env=s.environ, timeout=5)
    except TorchdroidError as e:
        out.append(Check("deploy", "devices", WARN, e.what, e.remedy or "", False, "deploy.devices"))
        return out
    several = len(adb.addresses) > 1
    for listing in list_servers(adb):
        check = _devices_check(f"devices ({listing.address})" if several else "devices", listing)
        out.append(check if not several else Check(**{**check.to_dict(), "id": f"deploy.devices@{listing.address}"}))
    return out


def _build_tools(s: DoctorSettings) -> List[Check]:
    env = s.environ
    git, cmake = GitTool.locate(env), CMake.locate(env)
    out = [_program("build-android", "git", git, True, MISSING, "build-android.git"),
           _program("build-android", "cmake", cmake, True, MISSING, "build-android.cmake")]
    if cmake.found and cmake.version and cmake.version < (3, 18):
        out[-1] = Check("build-android", "cmake", WARN, f"{cmake.version_str} ({cmake.path}): PyTorch needs >= 3.18",
                        "pip install 'cmake>=3.18' (or a newer CMake on PATH)", True, "build-android.cmake")
    elif cmake.found and cmake.version and cmake.version >= (4,):  # docs/facts.md F31
        out[-1] = Check("build-android", "cmake", WARN,
                        f"{cmake.version_str} ({cmake.path}): too new for the PyTorch lanes (CMake 4 refuses their "
                        "third-party projects' cmake_minimum_required < 3.5)",
                        'pip install "cmake>=3.18,<4" (or a CMake 3.x first on PATH)', True, "build-android.cmake")
    elif cmake.found and cmake.version and cmake.version < pins.CMAKE_MIN_ARM:  # docs/facts.md TC1
        out[-1] = Check("build-android", "cmake", INFO,
                        f"{cmake.version_str} ({cmake.path}): enough for the PyTorch lanes; --lane executorch for "
                        "arm64-v8a needs >= 3.26 (ExecuTorch's Arm kernels use $<BUILD_LOCAL_INTERFACE:...>)",
                        f'pip install "{pins.CMAKE_PIP_SPEC}" and put it first on PATH', True,
                        "build-android.cmake")
    ninja = Ninja.locate(env)
    out.append(_program("build-android", "ninja", ninja, False, WARN, "build-android.ninja",
                        "sudo apt-get install ninja-build (or pip install ninja): required for --lane executorch, "
                        "which configures with -G Ninja (docs/facts.md E16); the PyTorch lanes' build_android.sh "
                        "falls back to make"))
    if not ninja.found:
        out[-1] = Check("build-android", "ninja", WARN, "not found: --lane executorch cannot build without it "
                        "(the PyTorch lanes can, more slowly)", out[-1].fix, False, "build-android.ninja")
    out.append(_program("build-android", "ccache", Ccache.locate(env), False, INFO, "build-android.ccache",
                        "optional, faster rebuilds: sudo apt-get install ccache"))
    return out


def _nnapi_note(s: DoctorSettings) -> List[Check]:
    return [Check("deploy", "NNAPI on Android 15+", INFO, "deprecated from API 35", NNAPI_MEANING, False,
                  "deploy.nnapi-deprecation")]


def _executorch_check(s: DoctorSettings) -> List[Check]:
    """The ExecuTorch lane's package (convert --format executorch, bench-executorch): installed and pinned?"""
    version = pins.installed_version()
    if version is None:
        return [Check("convert", "executorch", INFO, "not installed",
                      f"optional, for --format executorch: `{pins.INSTALL_COMMAND}`", False, "convert.executorch")]
    note = pins.version_note(version)
    return [Check("convert", "executorch", WARN if note else OK, version, note or "", False, "convert.executorch")]


def _compiler_check(s: DoctorSettings) -> List[Check]:
    """A host C and C++ compiler: verify builds the host NNAPI library with it, build-android --lane executorch
    builds flatc for the host."""
    found = {lang: next(filter(None, map(shutil.which, names)), None)
             for lang, names in (("C", ("cc", "gcc", "clang")), ("C++", ("c++", "g++", "clang++")))}
    missing = [lang for lang, path in found.items() if path is None]
    if missing:
        return [Check("verify", "C/C++ compiler", WARN, f"no host {' or '.join(missing)} compiler",
                      "install one (Debian: `sudo apt-get install g++`): verify builds the host NNAPI library with "
                      "it, and build-android --lane executorch builds flatc for the host", False, "verify.compiler")]
    return [Check("verify", "C/C++ compiler", OK, f"{found['C']}, {found['C++']}", "", False, "verify.compiler")]


SECTIONS = (  # (stage, name, id, function): the order of the table
    ("all", "python", "all.python", _python_checks),
    ("convert", "converter for the lane", "convert.lane-converter", _converter_check),
    ("convert", "executorch", "convert.executorch", _executorch_check),
    ("verify", "C/C++ compiler", "verify.compiler", _compiler_check),
    ("build-android", "host Python", "build-android.host-python", _host_python_check),
    ("build-android", "build tools", "build-android.tools", _build_tools),
    ("build-android", "Android NDK", "build-android.ndk", _ndk_checks),
    ("build-android", "JDK for --aar", "build-android.aar-jdk", _aar_jdk_check),
    ("make-app", "JDK", "make-app.jdk", _app_jdk_check),
    ("make-app", "Android SDK", "make-app.sdk", _sdk_checks),
    ("deploy", "adb", "deploy.adb", _adb_checks),
    ("deploy", "NNAPI", "deploy.nnapi-deprecation", _nnapi_note),
)


def run_doctor(s: DoctorSettings) -> List[Check]:
    checks: List[Check] = []
    for stage, name, fact_id, fn in SECTIONS:
        checks += _guard(lambda fn=fn: fn(s), stage, name, fact_id)
    return checks


MACHINE_IDS = ("build-android.ndk", "make-app.sdk", "deploy.adb")  # what `invoke all` decides by


def machine_checks(s: DoctorSettings) -> List[Check]:
    """Only the rows `invoke all` decides by (NDK, SDK, adb devices): no torch import, no other tool probed."""
    checks: List[Check] = []
    for stage, name, fact_id, fn in SECTIONS:
        if fact_id in MACHINE_IDS:
            checks += _guard(lambda fn=fn: fn(s), stage, name, fact_id)
    return checks


def by_id(checks: List[Check]) -> Dict[str, Check]:
    """The facts keyed by their stable id (what workflow and other code should look rows up by)."""
    return {c.id: c for c in checks if c.id}


def problems(checks: List[Check]) -> List[Check]:
    """What --strict fails on: anything missing or not fitting."""
    return [c for c in checks if c.status in (MISSING, WARN)]
