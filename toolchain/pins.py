"""Every pin torchdroid depends on, in one place.

A *lane* is one consistent set of pins: the PyTorch commit the Android runtime
is built from, the NDK revisions and host Python that commit builds with, the
torch that must convert models for it, the pytorch_android runtime the app
uses and the Gradle / Android Gradle Plugin versions.  Every artefact records
the lane and pins it was made with.

ExecuTorch, the successor of PyTorch Mobile (``torch.export`` -> ``.pte`` with a delegate, run by ExecuTorch's C++
runtime: on the host the ``executorch`` wheel's pybindings, on Android the AAR ``org.pytorch:executorch-android`` or a
runtime cross-built with the NDK), has one release pinned below; ``./run`` installs the same version next to torch, and
every ``.pte`` records the ExecuTorch and torch versions it was made with.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from .errors import ToolNotFound, UsageError

PYTORCH_REPO_URL = "https://github.com/pytorch/pytorch.git"

DEFAULT_ABI = "arm64-v8a"
DEFAULT_API_LEVEL = 29  # NNAPI as torch uses it needs Android 10 (API 29)
NNAPI_MIN_SDK = 29
ABIS = ("arm64-v8a", "armeabi-v7a", "x86_64", "x86")
ABI_ELF_MACHINE = {  # what `readelf -h` / e_machine says for each ABI
    "arm64-v8a": "AArch64",
    "armeabi-v7a": "ARM",
    "x86_64": "Advanced Micro Devices X86-64",
    "x86": "Intel 80386",
}


@dataclass(frozen=True)
class Lane:
    name: str
    description: str
    pytorch_commit: str  # a full SHA
    pytorch_ref: str  # the tag or date the SHA stands for (documentation only)
    torchvision_commit: Optional[str]
    ndk_min: str  # inclusive, as in source.properties Pkg.Revision
    ndk_max: str  # inclusive upper bound (major.minor.build)
    ndk_recommended: str  # the revision to tell users to install (e.g. "r21e")
    host_python_min: Tuple[int, int]
    host_python_max: Tuple[int, int]  # inclusive
    converter_torch: str  # the torch that must convert models for this runtime
    pytorch_android: Optional[str]  # Maven version of org.pytorch:pytorch_android, None: build the AAR
    gradle: str
    android_gradle_plugin: str
    compile_sdk: int
    notes: Tuple[str, ...] = field(default_factory=tuple)
    # Added for ndk_build (additive, with defaults):
    pytorch_date: str = ""  # commit date (ISO), used to pick the nearest preset for a custom --commit
    build_env: Tuple[Tuple[str, str], ...] = ()  # extra environment for scripts/build_android.sh
    verified: Tuple[str, ...] = ()  # which pins were checked against public sources, and how
    unverified: Tuple[str, ...] = ()  # which pins were NOT verified (say so in reports)
    # Added for the real upstream (issue 9; sources in docs/facts.md):
    ndk_recommended_revision: str = ""  # Pkg.Revision of ndk_recommended: what `sdkmanager 'ndk;REV'` installs
    vulkan_default_on: bool = False  # CMakeLists.txt turns USE_VULKAN on for ANDROID (needs the NDK's vulkan_wrapper)
    aar_gradle: str = ""  # the Gradle version android/gradle/wrapper of this commit runs (--aar)
    aar_android_gradle_plugin: str = ""  # the AGP android/build.gradle of this commit applies (--aar)
    app_runtime_available: bool = True  # False: make-app must use --aar (the repository or version is gone)
    app_runtime_unavailable_reason: str = ""
    # Issue 20: android/gradlew exists at this lane's commit (pytorch/pytorch#51067 added it in 2021-02); without it
    # upstream's AAR script needs a system Gradle torchdroid cannot pin, so build-android refuses --aar.
    aar_gradle_wrapper: bool = True

    def to_dict(self) -> Dict[str, object]:
        return {
            "name": self.name,
            "pytorch_commit": self.pytorch_commit,
            "pytorch_ref": self.pytorch_ref,
            "torchvision_commit": self.torchvision_commit,
            "ndk_range": [self.ndk_min, self.ndk_max],
            "ndk_recommended": self.ndk_recommended,
            "host_python_range": [".".join(map(str, self.host_python_min)), ".".join(map(str, self.host_python_max))],
            "converter_torch": self.converter_torch,
            "pytorch_android": self.pytorch_android,
            "gradle": self.gradle,
            "android_gradle_plugin": self.android_gradle_plugin,
            "compile_sdk": self.compile_sdk,
            "pytorch_date": self.pytorch_date,
            "build_env": dict(self.build_env),
            "unverified": list(self.unverified),
            "ndk_recommended_revision": self.ndk_recommended_revision,
            "vulkan_default_on": self.vulkan_default_on,
            "aar_gradle": self.aar_gradle,
            "aar_android_gradle_plugin": self.aar_android_gradle_plugin,
            "app_runtime_available": self.app_runtime_available,
            "aar_gradle_wrapper": self.aar_gradle_wrapper,
        }


LANES: Dict[str, Lane] = {
    "seed-2020": Lane(
        name="seed-2020",
        description="exactly the Nov 2020 PyTorch Mobile + NNAPI tutorials' setup",
        pytorch_commit="c19eb4ad73ebf16c7dc73229729ed95692472f6e",
        pytorch_ref="2020-11-06 nightly",
        torchvision_commit="052edcecef3eb0ae9fe9e4b256fa2a488f9f395b",
        ndk_min="19.2.5345600",  # r19c
        ndk_max="21.4.7075529",  # r21e
        ndk_recommended="r21e (21.4.7075529)",
        host_python_min=(3, 6),
        host_python_max=(3, 8),
        converter_torch="torch built from c19eb4ad73ebf16c7dc73229729ed95692472f6e (1.8.0.dev20201106)",
        pytorch_android="1.8.0-SNAPSHOT",
        gradle="6.7.1",
        android_gradle_plugin="4.1.3",
        compile_sdk=30,
        notes=("models converted by torch 2.x call Compilation.init2, which this runtime lacks",),
        pytorch_date="2020-11-06",
        verified=(
            "scripts/build_android.sh of this era overwrites ANDROID_NATIVE_API_LEVEL with 21 and passes "
            "-DBUILD_BINARY=OFF before the user's CMake arguments (read from pytorch/pytorch history)",
        ),
        unverified=(
            "the commit SHA, torchvision SHA and NDK r19c-r21e range are taken from the tutorials as given in "
            "issue 3; the script was not read at exactly c19eb4ad (not in the searchable index)",
        ),
        ndk_recommended_revision="21.4.7075529",
        vulkan_default_on=False,  # USE_VULKAN became ON-for-Android in Jan 2021 (pytorch/pytorch#51291)
        # no aar_gradle / aar_android_gradle_plugin: android/gradlew does not exist at this commit (added 2021-02,
        # pytorch/pytorch#51067), so build-android refuses --aar for this lane and no Gradle of upstream's applies
        app_runtime_available=False,
        aar_gradle_wrapper=False,
        app_runtime_unavailable_reason=(
            "pytorch_android 1.8.0-SNAPSHOT was only ever published to the OSSRH snapshot repository "
            "(oss.sonatype.org/content/repositories/snapshots), which Sonatype shut down on 2025-06-30; "
            "no release of that version exists on Maven Central"),
    ),
    "current": Lane(
        name="current",
        description="the newest PyTorch release that still ships scripts/build_android.sh (v2.8.x)",
        pytorch_commit="ba56102387ef21a3b04b357e5b183d48f0afefc7",
        pytorch_ref="v2.8.0",
        torchvision_commit=None,
        ndk_min="21.4.7075529",  # r21e
        ndk_max="28.99.99999999",
        ndk_recommended="r26d (26.3.11579264)",
        host_python_min=(3, 9),
        host_python_max=(3, 13),
        converter_torch="torch==2.8.0",
        pytorch_android=None,
        gradle="8.7",
        android_gradle_plugin="8.5.2",
        compile_sdk=34,
        notes=(
            "no pytorch_android of this version is published on Maven: build the AAR with `invoke build-android --aar`",
            "BUILD_LITE_INTERPRETER=0: the full JIT, so speed_benchmark_torch and the AAR load TorchScript (.pt) models",
        ),
        pytorch_date="2025-08-06",
        build_env=(("BUILD_LITE_INTERPRETER", "0"),),
        ndk_recommended_revision="26.3.11579264",
        vulkan_default_on=True,
        aar_gradle="6.8.3",
        aar_android_gradle_plugin="4.1.2",
        verified=(
            "v2.8.0 is ba56102387ef21a3b04b357e5b183d48f0afefc7 (release commit list and several pinned permalinks)",
            "its scripts/build_android.sh still overwrites ANDROID_NATIVE_API_LEVEL with 21, defaults "
            "BUILD_LITE_INTERPRETER to ON and BUILD_BINARY to OFF; user CMake arguments go last",
        ),
        unverified=(
            "NDK range: r21e is what PyTorch's own Android CI installed; the upper bound (r28) is an estimate, "
            "not a tested build",
            "pytorch_date is the v2.8.0 release date, not the commit date",
            "aar_gradle/aar_android_gradle_plugin: read from stored versions of android/ (AGP 4.1.2 in "
            "android/build.gradle; Gradle 6.8.3 since pytorch/pytorch#53567, but one stored wrapper names 8.1.1); "
            "build-android --aar reads the checkout's own files before choosing a JDK",
        ),
    ),
}
DEFAULT_LANE = "current"

# The app template's runtime when no lane AAR is used: the newest org.pytorch:pytorch_android on Maven Central
# (2.1.0, Oct 2023; pytorch/pytorch#154449 names it as the version users have).  See docs/facts.md.
PYTORCH_ANDROID_DEFAULT = "2.1.0"
# Flexible (16 KB) page sizes: the NDK's CMake toolchain option from r27 on, a linker flag before.
NDK_FLEXIBLE_PAGE_SIZES_MIN_MAJOR = 27
FLEXIBLE_PAGE_SIZES_ARG = "-DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON"
MAX_PAGE_SIZE_16K_LDFLAG = "-Wl,-z,max-page-size=16384"
# NNAPI is deprecated from Android 15 (API 35): the NDK marks its functions __NNAPI_DEPRECATED_IN(35).
NNAPI_DEPRECATED_SDK = 35
# Upstream build scripts need this much space: a full PyTorch checkout with submodules (~3 GB) plus one ABI's
# build tree (~5 GB).  Checked before fetching.
CHECKOUT_BYTES = 3 * 1024 ** 3
BUILD_TREE_BYTES = 5 * 1024 ** 3
CAMERAX_VERSION = "1.3.4"
# The generated app's other libraries (make-app): androidx.activity (ComponentActivity, a LifecycleOwner for
# CameraX) and, when the app links a local pytorch_android AAR, the runtime's own dependencies, which a
# file dependency does not bring in (the versions pytorch_android 1.13's POM names).
ANDROIDX_ACTIVITY_VERSION = "1.8.2"
FBJNI_VERSION = "0.2.2"
SOLOADER_VERSION = "0.10.5"
# `-SNAPSHOT` runtimes came from the OSSRH snapshot repository, which shut down on this date (docs/facts.md):
# make-app refuses them and asks for a locally built AAR.
OSSRH_SHUTDOWN = "2025-06-30"
# Every org.pytorch:pytorch_android on Maven Central (newest 2.1.0) links its .so files for 4 KB pages.
MAVEN_RUNTIME_PAGE_ALIGNMENT_SOURCE = "pytorch/pytorch#154449"


def lane(name: str) -> Lane:
    try:
        return LANES[name]
    except KeyError:
        raise UsageError(
            f"unknown lane {name!r}",
            remedy=f"use one of: {', '.join(LANES)} (--lane or config pytorch.lane)",
        ) from None


def maven_version(value: str, option: str = "--pytorch-android", example: str = "1.13.1") -> str:
    """A Maven version as given by a user (``1.13.1``, ``2.1.0-SNAPSHOT``): digits first, no spaces or quotes."""
    if not re.match(r"^[0-9][0-9A-Za-z.+_-]*$", value or ""):
        raise UsageError(f"{option} {value!r} is not a Maven version", remedy=f"pass e.g. {example}")
    return value


# --------------------------------------------------------------------------- ExecuTorch (the host tools)

# pip's version of the host tools (also in ./run's executorch_pins).
EXECUTORCH_VERSION = "1.5.1"
# The torch that executorch 1.5.1's wheel was installed beside on x86_64 (./run's torch_pins).
EXECUTORCH_TORCH = "2.14.1"
INSTALL_COMMAND = f".venv/bin/python -m pip install executorch=={EXECUTORCH_VERSION}"


def installed_version() -> Optional[str]:
    """The installed executorch distribution's version, without importing it (None when absent)."""
    if importlib.util.find_spec("executorch") is None:
        return None
    try:
        return importlib.metadata.version("executorch")
    except importlib.metadata.PackageNotFoundError:
        return None


def identity() -> Dict[str, Optional[str]]:
    """What a ``.pte`` record says about the tools that made it."""
    out: Dict[str, Optional[str]] = {"version": installed_version(), "pinned": EXECUTORCH_VERSION, "git_version": None}
    if out["version"] is not None:
        try:
            from executorch import version as et_version  # small module, no torch import

            out["git_version"] = getattr(et_version, "git_version", None)
        except ImportError:
            pass
    return out


def require_executorch() -> str:
    """The installed version, or a ToolNotFound saying how to get the pinned one."""
    version = installed_version()
    if version is None:
        raise ToolNotFound(
            "ExecuTorch is not installed in this Python environment",
            cause="the ExecuTorch lane (convert --format executorch, its host check and benchmark) needs the "
            "executorch package: torch.export lowering, the XNNPACK partitioner and the host runtime",
            remedy=f"run `./run main` (installs it on x86_64 next to torch {EXECUTORCH_TORCH}) or `{INSTALL_COMMAND}`; "
            "or leave executorch out of --format",
        )
    return version


def version_note(version: str) -> Optional[str]:
    """A warning line when the installed executorch is not the pinned one (None when it is)."""
    if version.split("+")[0] != EXECUTORCH_VERSION:
        return (f"executorch {version} is installed but torchdroid pins {EXECUTORCH_VERSION}: the .pte files record "
                f"the installed version; install the pinned one with `{INSTALL_COMMAND}`")
    return None


# --------------------------------------------------------------------------- ExecuTorch's Android runtime (build-android --lane executorch)

RUNTIME_REPO = "https://github.com/pytorch/executorch.git"
RUNTIME_TAG = f"v{EXECUTORCH_VERSION}"
# The commit the executorch 1.5.1 wheel was built from (its executorch/version.py git_version): the runtime
# that runs the .pte files this converter writes.  docs/facts.md E1.
RUNTIME_COMMIT = "3b60683923245cf472b7323426920e15623ba361"
RUNTIME_LANE = f"executorch-{EXECUTORCH_VERSION}"
NDK_RECOMMENDED = "r28c"  # what ExecuTorch's CI installs (docs/facts.md E2)
NDK_MIN_MAJOR = 26  # older NDKs lack the C++17/20 library parts the runtime's CMake expects (not checked: E2)
CMAKE_MIN = (3, 24)  # CMakeLists.txt cmake_minimum_required (E3)
# On Arm, kernels/optimized/CMakeLists.txt links its fp16 kernels with $<BUILD_LOCAL_INTERFACE:...> (CMake 3.26+): an
# older CMake configures and then fails at generate time (docs/facts.md TC1, pytorch/executorch#22570).
CMAKE_MIN_ARM = (3, 26)
CMAKE_ARM_ABIS = ("arm64-v8a",)
# The fix that works on Debian 12 (apt's cmake is 3.25.1): CMake from PyPI, below 4 as upstream's own
# requirements-dev.txt pins it (TC2).
CMAKE_PIP_SPEC = "cmake>=3.26,<4"
RUNNER = "executor_runner"  # built without the event tracer: what the timing rounds run (TC3)
RUNNER_TRACED = "executor_runner_traced"  # the same runner with the event tracer: per-operator times (ETDump)
# The runner's per-iteration line (examples/portable/executor_runner/executor_runner.cpp, E8).
RUNNER_ITERATION_RE = r"Iteration (\d+) of (\d+): ([0-9.]+) ms"


# --------------------------------------------------------------------------- the app's runtime (make-app on a .pte)

# org.pytorch:executorch-android: the AAR with the Java API (org.pytorch.executorch.Module/Tensor/EValue) and
# libexecutorch.so, at the exporter's release: ExecuTorch promises no forward compatibility (a .pte written by a newer
# ExecuTorch may not load in an older runtime, runtime/COMPATIBILITY.md), so the app's runtime must not be older than
# EXECUTORCH_VERSION (docs/facts.md EA7, EA8).  `--executorch-android VER` (app.executorch_android) or a locally built
# AAR (`--executorch-aar PATH`) is the user's explicit override; make-app then warns when it is older.
EXECUTORCH_ANDROID_ARTIFACT = "org.pytorch:executorch-android"
EXECUTORCH_ANDROID_DEFAULT = "1.5.1"
# What the AAR's own build.gradle depends on (an AAR file carries no POM, so a local one needs them named): EA5.
EXECUTORCH_ANDROID_FBJNI = "0.7.0"
EXECUTORCH_ANDROID_NATIVELOADER = "0.10.5"
EXECUTORCH_ANDROID_MIN_SDK = 23  # the library's minSdk: an app below it fails Gradle's manifest merge (EA5)
EXECUTORCH_ANDROID_COMPILE_SDK = 34  # the library's compileSdk (EA5)
EXECUTORCH_ANDROID_ABIS = ("arm64-v8a", "x86_64")  # the ABIs the published AAR carries (EA6)
EXECUTORCH_JNI_LIBRARY = "libexecutorch.so"  # jni/<abi>/ of the AAR (scripts/build_android_library.sh, EA6)
# Delegates linked into the default AAR: XNNPACK always, the portable kernels (EA6); Vulkan only when the AAR is
# built with EXECUTORCH_BUILD_VULKAN=ON (off by default), so a Vulkan program needs --executorch-aar.
EXECUTORCH_ANDROID_DELEGATES = ("xnnpack", "portable")


# --------------------------------------------------------------------------- how far each pin was checked

PINS_CHECKED_ON = "2026-11-26"
NEWEST = f"newest known on {PINS_CHECKED_ON}"  # needs at least two independent sources (docs/facts.md)
UNVERIFIED = "unverified"  # fewer than two sources: never called the newest
MATCHES = "matches"  # deliberately equal to another pin or upstream file (no claim that it is the newest)


@dataclass(frozen=True)
class PinNote:
    """What torchdroid knows about one pin: ``NEWEST`` (two or more independent sources), ``MATCHES`` (what it is
    kept equal to) or ``UNVERIFIED``; ``facts`` are the docs/facts.md rows that hold the sources."""

    status: str
    facts: Tuple[str, ...] = ()
    sources: Tuple[str, ...] = ()
    why: str = ""

    def describe(self) -> str:
        refs = f" (docs/facts.md {', '.join(self.facts)})" if self.facts else ""
        return f"{self.status}{': ' + self.why if self.why else ''}{refs}"


# Every version pin of this module: the module constant's name, or LANES.<lane>.<field>.
PIN_NOTES: Dict[str, PinNote] = {
    "PYTORCH_ANDROID_DEFAULT": PinNote(NEWEST, ("F18", "PN1"), (
        "pytorch/pytorch#154449 names 2.1.0 as the version users have",
        "public build files depend on org.pytorch:pytorch_android:2.1.0; none on 2.2+ (find_string)")),
    "CAMERAX_VERSION": PinNote(UNVERIFIED, ("PN1",), why="a CameraX the template compiles with; public builds use "
                                                         "newer ones (1.4.1), so not the newest"),
    "ANDROIDX_ACTIVITY_VERSION": PinNote(UNVERIFIED, ("PN1",), why="compiles with the template; not the newest"),
    "FBJNI_VERSION": PinNote(UNVERIFIED, ("PN1",), why="what pytorch_android 1.13's POM names (POM not re-read)"),
    "SOLOADER_VERSION": PinNote(UNVERIFIED, ("PN1",), why="what pytorch_android 1.13's POM names (POM not re-read)"),
    "LANES.seed-2020.pytorch_commit": PinNote(MATCHES, ("PN1",), why="the Nov 2020 tutorials' nightly (issue 3)"),
    "LANES.seed-2020.ndk_recommended": PinNote(MATCHES, ("PN1",), why="the tutorials' NDK range (not re-read)"),
    "LANES.seed-2020.converter_torch": PinNote(MATCHES, ("PN1",), why="the runtime's own commit"),
    "LANES.seed-2020.pytorch_android": PinNote(MATCHES, ("F19",), why="android/gradle.properties VERSION_NAME"),
    "LANES.seed-2020.gradle": PinNote(UNVERIFIED, ("PN1",)),
    "LANES.seed-2020.android_gradle_plugin": PinNote(UNVERIFIED, ("PN1",)),
    "LANES.current.pytorch_commit": PinNote(NEWEST, ("F17", "PN1"), (
        "pytorch/pytorch#167186 quotes the commit that deleted scripts/build_android.sh before v2.9.0",
        "pytorch/pytorch#158475"), why="the newest release that still ships scripts/build_android.sh (v2.8.0)"),
    "LANES.current.ndk_recommended": PinNote(UNVERIFIED, ("PN1",), why="r26d is torchdroid's choice: no upstream source "
                                                                     "recommends an NDK for v2.8.0 (PyTorch's own CI "
                                                                     "installed r21e)"),
    "LANES.current.converter_torch": PinNote(MATCHES, ("PN1",), why="the runtime's release"),
    "LANES.current.gradle": PinNote(UNVERIFIED, ("PN1",)),
    "LANES.current.android_gradle_plugin": PinNote(UNVERIFIED, ("PN1",)),
    "LANES.current.aar_gradle": PinNote(UNVERIFIED, ("F12",), why="two stored wrappers disagree (6.8.3, 8.1.1)"),
    "LANES.current.aar_android_gradle_plugin": PinNote(UNVERIFIED, ("F12",)),
    "EXECUTORCH_VERSION": PinNote(UNVERIFIED, ("E1", "PN1"), why="installed and measured here; no second source that "
                                                                 "no later release exists"),
    "EXECUTORCH_TORCH": PinNote(MATCHES, ("E1",), why="the torch executorch 1.5.1 installs beside"),
    "RUNTIME_COMMIT": PinNote(MATCHES, ("E1",), why="git_version of the installed executorch 1.5.1 wheel"),
    "NDK_RECOMMENDED": PinNote(MATCHES, ("E2",), why="what ExecuTorch's CI installs"),
    "EXECUTORCH_ANDROID_DEFAULT": PinNote(MATCHES, ("EA7", "EA8"), (
        "public Android build files of independent projects depend on org.pytorch:executorch-android:1.5.1",
        "a public audit of the Maven Central AAR executorch-android 1.5.1 (its sha256)"),
        why="equal to EXECUTORCH_VERSION, the exporter; not called the newest: docs.pytorch.org has an ExecuTorch "
            "documentation version 1.6 (EA7)"),
    "EXECUTORCH_ANDROID_FBJNI": PinNote(MATCHES, ("EA5",), why="what the AAR's build.gradle declares"),
    "EXECUTORCH_ANDROID_NATIVELOADER": PinNote(MATCHES, ("EA5",), why="what the AAR's build.gradle declares"),
}
LANE_PIN_FIELDS = ("pytorch_commit", "ndk_recommended", "converter_torch", "pytorch_android", "gradle",
                   "android_gradle_plugin", "aar_gradle", "aar_android_gradle_plugin")


def _version_tuple(version: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0].split("-")[0])[:3])


def app_runtime_older(app_version: str, exporter: str = EXECUTORCH_VERSION) -> bool:
    """True when org.pytorch:executorch-android ``app_version`` is an older release than the exporter's.

    ExecuTorch makes no forward-compatibility promise (docs/facts.md EA8): such an app may fail in Module.load."""
    return _version_tuple(app_version) < _version_tuple(exporter)
