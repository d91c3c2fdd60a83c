"""Substitutes for build-android's physical boundary: a local "PyTorch" remote and a fixture NDK/SDK.

* :func:`make_fake_pytorch` creates bare git repositories (served over ``file://``, with
  ``uploadpack.allowReachableSHA1InWant``): a superproject with the files of
  ``pytorch_fixture/`` and a submodule ``third_party/fakedep``.  Its history is
  ``base`` (with a bulky blob) -> ``pinned`` (annotated tag ``v0.1.0``, branch ``release/0.1``)
  -> ``broken`` (tip; does not compile), so the pinned commit is not at the tip and a shallow
  fetch of it skips the bulk.
* :func:`make_fake_ndk` writes ``source.properties`` and a ``build/cmake/android.toolchain.cmake``
  that lets CMake use the host compiler (so the "Android" binary is a host x86-64 ELF).
* :func:`git_test_env` is the git configuration tests need for ``file://`` submodules.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

from toolchain.runner import run

HERE = Path(__file__).resolve().parent
FIXTURE_TREE = HERE / "pytorch_fixture"
FAKEDEP_TREE = HERE / "fakedep"

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
    "GIT_COMMITTER_NAME": "fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid",
}


def git_test_env() -> Dict[str, str]:
    """Allow file:// submodules (git >= 2.38.1 refuses them by default)."""
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow", "GIT_CONFIG_VALUE_0": "always"}


def _git(*args, cwd: Path) -> str:
    env = dict(GIT_IDENTITY)
    env.update(git_test_env())
    return run(["git", *args], cwd=cwd, env=env, what=f"fixture git {args[0]}").output.strip()


@dataclass(frozen=True)
class FakePytorch:
    url: str  # file:// URL of the bare superproject
    bare: Path
    dep_bare: Path
    base: str
    pinned: str
    broken: str  # the tip
    tag: str = "v0.1.0"  # an annotated tag on ``pinned``, branch ``release/0.1`` too (only with allow_sha)


def _bare_from(work: Path, bare: Path, allow_sha: bool) -> None:
    run(["git", "clone", "-q", "--bare", str(work), str(bare)], what="fixture clone --bare")
    _git("config", "uploadpack.allowReachableSHA1InWant", "true" if allow_sha else "false", cwd=bare)


# android/common.sh's check_gradle before pytorch/pytorch#51067 (2021-02) added android/gradlew: a system Gradle,
# `gradle` on PATH or $GRADLE_HOME/bin/gradle (the lookup of that era's scripts; docs/facts.md F32).
SEED_2020_CHECK_GRADLE = """check_gradle() {
  GRADLE_PATH=gradle
  GRADLE_NOT_FOUND_MSG="Unable to find gradle, please add it to PATH or set GRADLE_HOME"
  if [ ! -x "$(command -v gradle)" ]; then
    if [ -z "$GRADLE_HOME" ]; then
      echo "$GRADLE_NOT_FOUND_MSG"
      exit 1
    fi
    GRADLE_PATH=$GRADLE_HOME/bin/gradle
    if [ ! -f "$GRADLE_PATH" ]; then
      echo "$GRADLE_NOT_FOUND_MSG"
      exit 1
    fi
  fi
  echo "GRADLE_PATH:$GRADLE_PATH"
}
"""


def apply_seed_2020_layout(tree: Path) -> Path:
    """Turn a copy of ``pytorch_fixture`` into the seed-2020 (Nov 2020) layout: no Gradle wrapper under android/
    and a common.sh that looks for a system Gradle."""
    tree = Path(tree)
    (tree / "android" / "gradlew").unlink()
    shutil.rmtree(tree / "android" / "gradle" / "wrapper")
    common = tree / "android" / "common.sh"
    text = common.read_text()
    start = text.index("check_gradle() {")
    end = text.index("}\n", start) + 2
    common.write_text(text[:start] + SEED_2020_CHECK_GRADLE + text[end:])
    return tree


def make_fake_pytorch(root: Path, bulk_bytes: int = 200_000, allow_sha: bool = True,
                      extra_commits: int = 0, seed_2020_layout: bool = False) -> FakePytorch:
    """Create the bare repositories under ``root`` and return their URLs and commit SHAs (``seed_2020_layout``:
    the android/ directory as it was at lane seed-2020's commit, see :func:`apply_seed_2020_layout`)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    dep_work = root / "work-fakedep"
    shutil.copytree(FAKEDEP_TREE, dep_work)
    _git("init", "-q", "-b", "main", cwd=dep_work)
    _git("add", "-A", cwd=dep_work)
    _git("commit", "-q", "-m", "fakedep 1", cwd=dep_work)
    (dep_work / "NEWS").write_text("a later fakedep commit the superproject does not use\n")
    _git("add", "-A", cwd=dep_work)
    _git("commit", "-q", "-m", "fakedep 2", cwd=dep_work)
    dep_bare = root / "fakedep.git"
    _bare_from(dep_work, dep_bare, allow_sha)
    dep_pinned = _git("rev-parse", "HEAD~1", cwd=dep_work)

    work = root / "work-pytorch"
    shutil.copytree(FIXTURE_TREE, work)
    if seed_2020_layout:
        apply_seed_2020_layout(work)
    _git("init", "-q", "-b", "main", cwd=work)
    rnd = os.urandom(bulk_bytes)
    (work / "third_party").mkdir(exist_ok=True)
    (work / "third_party" / "old_bulk.bin").write_bytes(rnd)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "base with bulk", cwd=work)
    for i in range(extra_commits):
        (work / "third_party" / "old_bulk.bin").write_bytes(os.urandom(bulk_bytes))
        _git("commit", "-q", "-am", f"history {i}", cwd=work)
    base = _git("rev-parse", "HEAD", cwd=work)
    (work / "third_party" / "old_bulk.bin").unlink()
    _git("submodule", "add", "-q", dep_bare.as_uri(), "third_party/fakedep", cwd=work)
    _git("-C", "third_party/fakedep", "checkout", "-q", dep_pinned, cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "pinned: drop bulk, add fakedep submodule", cwd=work)
    pinned = _git("rev-parse", "HEAD", cwd=work)
    if allow_sha:  # an advertised ref on the pinned commit would let even a strict server serve it by SHA
        _git("tag", "-a", "v0.1.0", "-m", "fixture release", cwd=work)
        _git("branch", "release/0.1", cwd=work)
    src = work / "binaries" / "speed_benchmark_torch.cc"
    src.write_text(src.read_text() + "\nthis line does not compile;\n")
    _git("commit", "-q", "-am", "broken tip", cwd=work)
    broken = _git("rev-parse", "HEAD", cwd=work)
    bare = root / "pytorch.git"
    _bare_from(work, bare, allow_sha)
    return FakePytorch(bare.as_uri(), bare, dep_bare, base, pinned, broken)


TOOLCHAIN_FIXTURE = """\
# Fixture standing in for the NDK's build/cmake/android.toolchain.cmake: it takes the Android variables like the
# real one and, like it, picks the compiler by ANDROID_ABI: arm64-v8a gets Debian's aarch64 cross compiler (real
# AArch64 ELFs; the virtual arm64 phones run them under qemu-user), every other ABI the host compiler.
set(ANDROID TRUE)
if(NOT ANDROID_ABI)
  set(ANDROID_ABI armeabi-v7a)  # the real toolchain file's default ABI
endif()
if(ANDROID_ABI STREQUAL "arm64-v8a" AND NOT TORCHDROID_FIXTURE_HOST_ONLY)
  find_program(FIXTURE_AARCH64_CC aarch64-linux-gnu-gcc)
  find_program(FIXTURE_AARCH64_CXX aarch64-linux-gnu-g++)
  if(FIXTURE_AARCH64_CC AND FIXTURE_AARCH64_CXX)
    set(CMAKE_SYSTEM_NAME Linux)
    set(CMAKE_SYSTEM_PROCESSOR aarch64)
    set(CMAKE_C_COMPILER ${FIXTURE_AARCH64_CC})
    set(CMAKE_CXX_COMPILER ${FIXTURE_AARCH64_CXX})
  endif()
endif()
# The API level is settled here, while project() runs, as the real toolchain file does it (docs/facts.md F34):
# ANDROID_NATIVE_API_LEVEL stands for ANDROID_PLATFORM when that is unset; with neither, the minimum for 64-bit ABIs
# (21).  It reaches the compiler the way the real target triple does, through flags fixed now: a project that sets
# ANDROID_PLATFORM after project() changes nothing (ExecuTorch's CMakeLists does, E5).
if(ANDROID_NATIVE_API_LEVEL AND NOT ANDROID_PLATFORM)
  if(ANDROID_NATIVE_API_LEVEL MATCHES "^android-")
    set(ANDROID_PLATFORM ${ANDROID_NATIVE_API_LEVEL})
  else()
    set(ANDROID_PLATFORM android-${ANDROID_NATIVE_API_LEVEL})
  endif()
endif()
if(NOT ANDROID_PLATFORM)
  set(ANDROID_PLATFORM android-21)
endif()
string(REPLACE "android-" "" ANDROID_PLATFORM_LEVEL "${ANDROID_PLATFORM}")
if(NOT ANDROID_NATIVE_API_LEVEL)
  set(ANDROID_NATIVE_API_LEVEL 21)
endif()
set(CMAKE_C_FLAGS_INIT "${CMAKE_C_FLAGS_INIT} -DFIXTURE_NDK_API_LEVEL=${ANDROID_PLATFORM_LEVEL}")
set(CMAKE_CXX_FLAGS_INIT "${CMAKE_CXX_FLAGS_INIT} -DFIXTURE_NDK_API_LEVEL=${ANDROID_PLATFORM_LEVEL}")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ANDROID_ABI ANDROID_NATIVE_API_LEVEL ANDROID_PLATFORM ANDROID_NDK
     TORCHDROID_FIXTURE_HOST_ONLY)
"""
# NDK r27+: the toolchain file takes ANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES and links the 64-bit ABIs for 16 KB pages.
FLEXIBLE_PAGE_SIZES_FIXTURE = """\
if(ANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES AND ANDROID_ABI MATCHES "^(arm64-v8a|x86_64)$")
  string(APPEND CMAKE_SHARED_LINKER_FLAGS_INIT " -Wl,-z,max-page-size=16384")
  string(APPEND CMAKE_EXE_LINKER_FLAGS_INIT " -Wl,-z,max-page-size=16384")
endif()
"""
VULKAN_WRAPPER_H = "#pragma once\nint InitVulkan(void);\n"
VULKAN_WRAPPER_CPP = '#include "vulkan_wrapper.h"\nint InitVulkan(void) { return 1; }\n'

# The revisions the fixtures stand in for (Pkg.Revision in source.properties) and their layouts.
NDK_REVISIONS = {"r21e": "21.4.7075529", "r23c": "23.2.8568313", "r26d": "26.3.11579264", "r27c": "27.2.12479018"}


def make_fake_ndk(root: Path, revision: str = "21.4.7075529", host_only: bool = False) -> Path:
    """An NDK directory with the layout of ``revision`` where it matters to torchdroid and PyTorch:

    * every revision: ``source.properties`` (Pkg.Revision), ``build/cmake/android.toolchain.cmake``,
      ``toolchains/llvm/prebuilt/linux-x86_64/bin/``;
    * up to r22: ``sources/third_party/vulkan/src/common/vulkan_wrapper.{h,cpp}`` (removed in r23);
    * up to r21: ``platforms/android-N`` (removed in r22: the sysroot under toolchains/llvm has them);
    * r27+: the toolchain file honours ``ANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES``;
    * ``host_only``: a broken NDK whose toolchain compiles every ABI with the host compiler (what torchdroid's ELF
      checks must catch).
    """
    root = Path(root)
    major = int(revision.split(".", 1)[0])
    (root / "build" / "cmake").mkdir(parents=True, exist_ok=True)
    (root / "toolchains" / "llvm" / "prebuilt" / "linux-x86_64" / "bin").mkdir(parents=True, exist_ok=True)
    (root / "source.properties").write_text(f"Pkg.Desc = Android NDK\nPkg.Revision = {revision}\n")
    toolchain = ("set(TORCHDROID_FIXTURE_HOST_ONLY TRUE)\n" if host_only else "") + TOOLCHAIN_FIXTURE \
        + (FLEXIBLE_PAGE_SIZES_FIXTURE if major >= 27 else "")
    (root / "build" / "cmake" / "android.toolchain.cmake").write_text(toolchain)
    if major <= 22:
        wrapper = root / "sources" / "third_party" / "vulkan" / "src" / "common"
        wrapper.mkdir(parents=True, exist_ok=True)
        (wrapper / "vulkan_wrapper.h").write_text(VULKAN_WRAPPER_H)
        (wrapper / "vulkan_wrapper.cpp").write_text(VULKAN_WRAPPER_CPP)
    if major <= 21:
        (root / "platforms" / "android-29" / "arch-arm64").mkdir(parents=True, exist_ok=True)
    return root


def make_ndk_release(parent: Path, release: str) -> Path:
    """``make_ndk_release(tmp, "r26d")`` -> ``tmp/android-ndk-r26d`` with that revision's layout."""
    return make_fake_ndk(Path(parent) / f"android-ndk-{release}", NDK_REVISIONS[release])


def make_fake_sdk(root: Path) -> Path:
    root = Path(root)
    (root / "platforms" / "android-34").mkdir(parents=True, exist_ok=True)
    (root / "platform-tools").mkdir(exist_ok=True)
    return root


def make_fake_jdk(root: Path, version: str = "11.0.22") -> Path:
    """A JDK home as torchdroid and the fixture gradlew see it: ``release`` (JAVA_VERSION) and ``bin/javac``."""
    root = Path(root)
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "release").write_text(f'IMPLEMENTOR="fixture"\nJAVA_VERSION="{version}"\n')
    for tool in ("java", "javac"):
        exe = root / "bin" / tool
        exe.write_text(f'#!/bin/sh\necho "{tool} {version}"\n')
        exe.chmod(0o755)
    return root


def build_settings(tmp_path: Path, remote: "FakePytorch", ndk, **kw):
    """build-android settings for a fixture build: x86_64 (host ELF), API 29, 2 jobs, no ANDROID_* from here."""
    from ndk_build import BuildSettings

    base = dict(build_dir=Path(tmp_path) / "build", commit=remote.pinned, repo_url=remote.url,
                ndk=str(ndk) if ndk else None, abi="x86_64", api_level=29, max_jobs=2,
                env={"PATH": os.environ["PATH"]})
    base.update(kw)
    return BuildSettings(**base)
