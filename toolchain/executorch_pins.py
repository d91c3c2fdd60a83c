"""The ExecuTorch lane's pins, in one place (``./run`` installs the same version next to torch).

ExecuTorch is the successor of PyTorch Mobile: ``torch.export`` -> ``.pte`` with a delegate, run by
ExecuTorch's C++ runtime (host: the ``executorch`` wheel's pybindings; Android: the AAR
``org.pytorch:executorch-android`` or a runtime cross-built with the NDK).  Every ``.pte`` torchdroid
writes records the ExecuTorch and torch versions it was made with.
"""

from __future__ import annotations

import importlib.metadata
import re
import importlib.util
from typing import Dict, Optional

from .errors import ToolNotFound
from .pins import MATCHES, UNVERIFIED, PinNote

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


# --------------------------------------------------------------------------- the Android runtime (build-android --lane executorch)

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


# --------------------------------------------------------------------------- how far each pin was checked (toolchain/pins.py)

PIN_NOTES: Dict[str, PinNote] = {
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


def _version_tuple(version: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0].split("-")[0])[:3])


def app_runtime_older(app_version: str, exporter: str = EXECUTORCH_VERSION) -> bool:
    """True when org.pytorch:executorch-android ``app_version`` is an older release than the exporter's.

    ExecuTorch makes no forward-compatibility promise (docs/facts.md EA8): such an app may fail in Module.load."""
    return _version_tuple(app_version) < _version_tuple(exporter)
