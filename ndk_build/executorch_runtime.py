"""`invoke build-android --lane executorch`: ExecuTorch's runtime and executor_runner for Android, from a pinned release.

Steps: NDK, CMake, Ninja, host C/C++ compiler and codegen Python checks -> the pinned checkout (with submodules) -> CMake configure with the android
preset and the options that make a benchmark-capable runner (XNNPACK on, executor_runner on, posix logging
so its per-iteration times reach ``adb shell``'s output) at the requested ABI and API level, 16 KB pages ->
``cmake --build --target executor_runner`` -> ELF verification (machine, API level note, LOAD alignment) ->
``<build_dir>/android/<abi>/executorch/build-info.json``.  Every option and its upstream source: docs/facts.md (E rows).

The runner is built twice, each in a build tree of its own (both incremental): ``executor_runner`` without the event
tracer, for the timing rounds, and ``executor_runner_traced`` with it, for the per-operator times.  A traced runner
profiles every run (an ETDumpGen on every method load, XNNPACK's basic profiling, ``model.etdump`` written at exit:
docs/facts.md TC3), so its times are not the model's.  ``android.executorch_event_tracer`` off: the untraced one only.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from toolchain import pins
from toolchain.elf import ABIS_16K, PAGE_16K, read_elf
from toolchain.errors import ToolFailed, ToolNotFound, UsageError, VerificationError
from toolchain.fsutil import atomic_copy, output_lock, sha256_file
from toolchain.layout import BUILD_INFO, Layout
from toolchain.pins import ABI_ELF_MACHINE
from toolchain.records import BuildInfo, now_iso
from toolchain.runner import run
from toolchain.settings import default
from toolchain.tools.git import Git
from toolchain.tools.ndk import Ndk, validate_api_level
from toolchain.tools.programs import CCompiler, CMake, CxxCompiler, Ninja, Program

from .gitsource import ensure_checkout

log = logging.getLogger(__name__)
ABIS = ("arm64-v8a", "x86_64")  # the ABIs ExecuTorch's CMakePresets.json has android presets for (E4)


@dataclass(frozen=True)
class RuntimeBuildSettings:
    build_dir: Path = Path(default("build_dir"))
    ndk: Optional[str] = None
    ndk_config: Optional[str] = None
    abi: str = "arm64-v8a"
    api_level: int = 29
    max_jobs: Optional[int] = None
    repo_url: Optional[str] = None
    commit: str = pins.RUNTIME_COMMIT
    source_dir: Optional[Path] = None
    git_jobs: int = 4
    env: Optional[Mapping[str, str]] = None
    event_tracer: bool = True  # devtools + event tracer: the runner takes --etdump_path (docs/facts.md EB rows)
    python: Optional[str] = None  # the Python ExecuTorch's code generators run with (default: the one running us)


@dataclass
class RuntimeBuild:
    build_info: BuildInfo
    runner: Path  # executor_runner, without the event tracer
    reused: bool
    seconds: float
    traced: Optional[Path] = None  # executor_runner_traced (None: android.executorch_event_tracer off)


@dataclass(frozen=True)
class BuiltRunner:
    """One verified runner in the output directory, and the configure line it was built with."""

    name: str
    event_tracer: bool
    path: Path
    cmake_args: List[str]
    elf: Dict[str, Any]

    def artefact(self) -> Dict[str, Any]:
        """Its entry in the build-info's ``artefacts`` (the deploy side picks the runner by ``event_tracer``)."""
        return {"name": self.name, "path": self.name, "kind": "binary", "sha256": sha256_file(self.path),
                "load_alignment": self.elf["load_alignment"], "event_tracer": self.event_tracer,
                "cmake_args": self.cmake_args}


def runner_variants(event_tracer: bool) -> List[tuple]:
    """(name, event tracer, build tree) of each runner to build: the untraced one always, the traced one if asked."""
    return [(pins.RUNNER, False, "cmake-out")] + ([(pins.RUNNER_TRACED, True, "cmake-out-traced")] if event_tracer else [])


def out_dir(build_dir: Path, abi: str) -> Path:
    return Layout(Path(build_dir).resolve()).executorch(abi)


def event_tracer_args(on: bool) -> List[str]:
    """The android preset turns the event tracer off and devtools on; the tracer requires devtools (EB1-EB3)."""
    if not on:
        return ["-DEXECUTORCH_ENABLE_EVENT_TRACER=OFF"]
    return ["-DEXECUTORCH_BUILD_DEVTOOLS=ON", "-DEXECUTORCH_ENABLE_EVENT_TRACER=ON"]


def cmake_args(src: Path, build: Path, ndk: Ndk, abi: str, api_level: int, event_tracer: bool = True,
               python: Optional[Path] = None) -> List[str]:
    """The configure command line: upstream's android preset, then what makes the runner (docs/facts.md E4-E9)."""
    return [
        "-S", str(src), "-B", str(build), "-G", "Ninja",  # ninja is required, not optional, for this lane (E16)
        f"-DCMAKE_TOOLCHAIN_FILE={ndk.toolchain_file}",
        f"-DANDROID_ABI={abi}",
        # Without it the NDK builds for its minimum (21): upstream's own set(ANDROID_PLATFORM android-30) runs after
        # project() and changes nothing (E5, F34).
        f"-DANDROID_PLATFORM=android-{api_level}",
        # The codegen Python (torchgen, yaml); unset, CMake would take whatever python3 it finds (E14).
        *([f"-DPYTHON_EXECUTABLE={python}"] if python else []),
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DEXECUTORCH_BUILD_PRESET_FILE={src / 'tools' / 'cmake' / 'preset' / 'android.cmake'}",
        "-DEXECUTORCH_BUILD_XNNPACK=ON",
        "-DEXECUTORCH_BUILD_EXECUTOR_RUNNER=ON",  # off by default when a preset file is given (E6)
        "-DEXECUTORCH_BUILD_EXTENSION_EVALUE_UTIL=ON",  # required by the runner (E6)
        "-DEXECUTORCH_BUILD_EXTENSION_RUNNER_UTIL=ON",
        "-DEXECUTORCH_PAL_DEFAULT=posix",  # the android PAL logs to logcat only; posix writes stderr (E7)
        "-DEXECUTORCH_BUILD_ANDROID_JNI=OFF",  # the JNI library is the AAR's business, not the runner's
        *event_tracer_args(event_tracer),
        *ndk.page_size_args(),
    ]


def check_tools(s: RuntimeBuildSettings) -> tuple:
    if s.abi not in ABIS:
        raise UsageError(f"ExecuTorch has no Android preset for ABI {s.abi!r}", remedy=f"use one of: {', '.join(ABIS)}")
    validate_api_level(s.api_level)
    ndk = Ndk.locate(s.ndk, s.ndk_config, s.env)
    if ndk.major < pins.NDK_MIN_MAJOR:
        raise ToolNotFound(f"NDK {ndk.release} ({ndk.path}) is too old for ExecuTorch {pins.EXECUTORCH_VERSION}",
                           cause=f"its CMake build needs NDK r{pins.NDK_MIN_MAJOR} or newer",
                           remedy=f"install NDK {pins.NDK_RECOMMENDED} (what ExecuTorch's CI uses) and pass --ndk DIR")
    cmake = check_cmake(s.abi, s.env)
    Ninja.locate(s.env).require(why="build-android --lane executorch configures with -G Ninja (docs/facts.md E16)")
    for var, program in (("CC", CCompiler), ("CXX", CxxCompiler)):
        host_compiler(var, program, s.env)
    return ndk, cmake, check_python(s.python)


def check_cmake(abi: str, env: Optional[Mapping[str, str]] = None) -> CMake:
    """CMake new enough for ExecuTorch at ``abi``: 3.24 (E3), 3.26 on Arm, where kernels/optimized uses
    ``$<BUILD_LOCAL_INTERFACE:...>`` and an older CMake fails only at generate time (docs/facts.md TC1, TC2)."""
    if abi not in pins.CMAKE_ARM_ABIS:
        return CMake.locate(env).require(pins.CMAKE_MIN, why=f"ExecuTorch {pins.EXECUTORCH_VERSION} needs it")
    venv_bin = Path(sys.executable).parent
    return CMake.locate(env).require(
        pins.CMAKE_MIN_ARM,
        why=f"ExecuTorch {pins.EXECUTORCH_VERSION}'s {abi} build: kernels/optimized/CMakeLists.txt links its Arm fp16 "
            "kernels with $<BUILD_LOCAL_INTERFACE:...>, which CMake added in 3.26; an older CMake fails at generate "
            "time (pytorch/executorch#22570, docs/facts.md TC1)",
        remedy=f'`{sys.executable} -m pip install "{pins.CMAKE_PIP_SPEC}"` (Debian 12\'s apt cmake is 3.25), then '
               f'`export PATH="{venv_bin}:$PATH"` so that build-android finds it first')


def host_compiler(var: str, program: type, env: Optional[Mapping[str, str]] = None) -> Path:
    """The host compiler ExecuTorch builds flatc/flatcc with (E15): ``$CC``/``$CXX`` as CMake takes them, else on PATH."""
    env = os.environ if env is None else env
    why = ("ExecuTorch builds flatc and flatcc for this machine while it cross-compiles the runtime "
           "(third-party/CMakeLists.txt, docs/facts.md E15)")
    given = (env.get(var) or "").split()
    if given:
        found = shutil.which(given[0], path=env.get("PATH"))
        if not found:
            raise ToolNotFound(f"{var}={env.get(var)!r} names no program ({program.NAME} for the host)", cause=why,
                               remedy=f"set {var} to an installed {program.NAME} or unset it; {program.INSTALL}")
        return Path(found)
    found_program: Program = program.locate(env)
    if not found_program.found:
        raise ToolNotFound(f"no host {program.NAME} ({', '.join(program.EXE)}) on PATH", cause=why,
                           remedy=program.INSTALL)
    return Path(str(found_program.path))


# What ExecuTorch's code generators import (codegen/gen.py, tools/gen_oplist.py; torchgen ships with torch): E14.
CODEGEN_MODULES = {"torch": "torch", "torchgen": "torch", "yaml": "pyyaml"}
_PROBE = ("import sys, importlib.util as u; print(sys.executable); "
          f"print(' '.join(m for m in {tuple(CODEGEN_MODULES)!r} if u.find_spec(m) is None))")


def check_python(configured: Optional[str] = None) -> Path:
    """The Python ExecuTorch's CMake runs its code generators with: it must import torch (torchgen) and yaml (E14)."""
    exe = configured or sys.executable
    found = shutil.which(exe) if not Path(exe).is_absolute() else (exe if os.access(exe, os.X_OK) else None)
    option = "--python (config pytorch.python)"
    if not found:
        raise ToolNotFound(f"the Python {exe!r} for ExecuTorch's code generation was not found",
                           remedy=f"pass {option} with an interpreter path that has torch and pyyaml")
    try:
        res = run([found, "-c", _PROBE], what=f"`{found}` (probing torch, torchgen, yaml)", timeout=60)
    except ToolFailed as e:
        raise ToolNotFound(f"the Python {found} for ExecuTorch's code generation does not run", cause=e.what,
                           remedy=f"pass {option} with a working interpreter that has torch and pyyaml") from e
    lines = res.lines + ["", ""]
    missing = lines[1].split()
    if missing:
        packages = " ".join(dict.fromkeys(CODEGEN_MODULES[m] for m in missing))
        raise ToolNotFound(
            f"the Python {found} for ExecuTorch's code generation cannot import {', '.join(missing)}",
            cause="ExecuTorch's build runs `PYTHON -m codegen.gen`, which imports torchgen (shipped with torch) and "
                  "yaml; CMake does not check this when it configures, so the build would fail late "
                  "(docs/facts.md E14)",
            remedy=f"`{found} -m pip install {packages}`, or pass {option} with a Python that has them "
                   "(e.g. torchdroid's .venv/bin/python)")
    return Path(lines[0] or found)


def verify_runner(binary: Path, abi: str, api_level: int) -> Dict[str, Any]:
    """Machine, Android API level note and LOAD alignment of the built runner, read from its ELF."""
    elf = read_elf(binary)
    problems = []
    if elf.machine != ABI_ELF_MACHINE.get(abi):
        problems.append(f"machine {elf.machine}, expected {ABI_ELF_MACHINE.get(abi)}")
    if elf.android_api_level != api_level:
        problems.append(f"Android API level note {elf.android_api_level}, expected {api_level}")
    if abi in ABIS_16K and not elf.supports_page_size(PAGE_16K):
        problems.append(f"LOAD alignment {elf.load_alignment}, needs {PAGE_16K} for 16 KB page devices")
    if problems:
        raise VerificationError(f"the built {binary.name} is not what was asked for: {'; '.join(problems)}",
                                remedy="check --ndk and the CMake output in the log; rebuild with --clean")
    return elf.to_dict()


def build_runtime(s: RuntimeBuildSettings, log_path: Path) -> RuntimeBuild:
    t0 = time.monotonic()
    ndk, cmake, python = check_tools(s)
    out = out_dir(s.build_dir, s.abi)
    src = Path(s.source_dir).resolve() if s.source_dir else Layout(Path(s.build_dir).resolve()).checkout("executorch", s.commit)
    with output_lock(out, "invoke build-android --lane executorch"):
        checkout = ensure_checkout(Git.locate(log_path), s.repo_url or pins.RUNTIME_REPO, s.commit, src, s.git_jobs)
        runners = [build_runner(s, cmake.path, ndk, python, src, out / tree, out / name, traced, log_path)
                   for name, traced, tree in runner_variants(s.event_tracer)]
        info = BuildInfo.create(out / BUILD_INFO, _record(s, checkout, ndk, runners))
    traced = next((r.path for r in runners if r.event_tracer), None)
    return RuntimeBuild(info, runners[0].path, False, time.monotonic() - t0, traced)


def build_runner(s: RuntimeBuildSettings, cmake: Path, ndk: Ndk, python: Path, src: Path, build: Path, dest: Path,
                 event_tracer: bool, log_path: Path) -> BuiltRunner:
    """Configure ``build`` (incremental: the tree is kept), build executor_runner, copy it to ``dest``, verify it."""
    what = "with the event tracer" if event_tracer else "without the event tracer"
    args = cmake_args(src, build, ndk, s.abi, s.api_level, event_tracer, python)
    run([cmake, *args], log_path=log_path, what=f"ExecuTorch CMake configure ({pins.RUNNER} {what})")
    jobs = str(s.max_jobs or os.cpu_count() or 1)
    run([cmake, "--build", str(build), "--target", pins.RUNNER, "-j", jobs], log_path=log_path,
        what=f"building ExecuTorch's {pins.RUNNER} ({what})")
    runner = atomic_copy(build / pins.RUNNER, dest)
    os.chmod(runner, 0o755)
    return BuiltRunner(dest.name, event_tracer, runner, args, verify_runner(runner, s.abi, s.api_level))


def _record(s: RuntimeBuildSettings, checkout, ndk: Ndk, runners: List[BuiltRunner]) -> Dict[str, Any]:
    args = runners[0].cmake_args  # the untraced runner's; each artefact records its own
    return {"lane": pins.RUNTIME_LANE, "runtime": "executorch", "tag": pins.RUNTIME_TAG, "commit": s.commit,
            "repo_url": s.repo_url or pins.RUNTIME_REPO, "source_dir": str(checkout.path),
            "ndk": {"path": str(ndk.path), "revision": ndk.revision, "recommended": pins.NDK_RECOMMENDED},
            "abi": s.abi, "api_level": s.api_level, "cmake_args": args, "built": now_iso(),
            "python": next((a.split("=", 1)[1] for a in args if a.startswith("-DPYTHON_EXECUTABLE=")), None),
            "page_alignment": {r.name: r.elf["load_alignment"] for r in runners},
            "elf": {r.name: r.elf for r in runners},
            # which runner has the event tracer: each artefact's "event_tracer" (the traced one takes --etdump_path)
            "artefacts": [r.artefact() for r in runners],
            "executorch_version": pins.EXECUTORCH_VERSION}
