"""CMake 4 and the PyTorch lanes (docs/facts.md F31).

PyTorch's bundled third-party projects declare `cmake_minimum_required` below 3.5 (protobuf, QNNPACK's clog), which
CMake 4 refuses at configure time.  torchdroid refuses CMake >= 4 for the PyTorch lanes before any work, with the
reason and the fix.  The fixture's third-party project (fakedep) declares 3.1 like them, so a real CMake 4 fails on
the fixture exactly where it fails on upstream, and `-DCMAKE_POLICY_VERSION_MINIMUM=3.5` (CMake's own escape hatch)
gets it through.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ndk_build import build_android
from tests.ndk_support import FAKEDEP_TREE, FIXTURE_TREE, build_settings, make_fake_ndk
from tests.ndk_support.fixtures import *  # noqa: F403 (fake_pytorch, fake_ndk, git file protocol)
from toolchain.errors import ToolNotFound

UPSTREAM_ERROR = "Compatibility with CMake < 3.5 has been removed from CMake"


def cmake4() -> Path | None:
    """A real CMake 4.x: $TORCHDROID_TEST_CMAKE4, or the one `./run test` installs into <venv>/cmake4."""
    for candidate in (os.environ.get("TORCHDROID_TEST_CMAKE4"), str(Path(sys.prefix) / "cmake4" / "bin" / "cmake")):
        if candidate and Path(candidate).is_file():
            out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
            if out.startswith("cmake version 4."):
                return Path(candidate)
    return None


def _fake_cmake(bin_dir: Path, version: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "cmake"
    exe.write_text(f"#!/bin/sh\necho 'cmake version {version}'\n")
    exe.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("lane", ["current", "seed-2020"])
def test_cmake_4_is_refused_before_any_work_with_the_reason_and_the_fix(tmp_path, fake_pytorch, fake_ndk, lane):
    bin_dir = _fake_cmake(tmp_path / "cmake4bin", "4.1.2")
    s = build_settings(tmp_path, fake_pytorch, fake_ndk, commit=None, lane=lane, lane_explicit=True,
                       env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    with pytest.raises(ToolNotFound) as ei:
        build_android(s)
    e = ei.value
    assert "CMake 4.1.2" in e.what and f"lane '{lane}'" in e.what and "too new" in e.what
    assert UPSTREAM_ERROR in e.cause and "pytorch/pytorch#150149" in e.cause
    assert 'pip install "cmake>=3.18,<4"' in e.remedy
    assert not (s.build_dir / "src").exists()  # refused before the fetch


def test_cmake_3_is_still_accepted(tmp_path, fake_pytorch, fake_ndk):
    from ndk_build.build import check_tools, resolve_target

    bin_dir = _fake_cmake(tmp_path / "cmake3bin", "3.31.6")
    s = build_settings(tmp_path, fake_pytorch, fake_ndk, env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
                       python=sys.executable)
    check_tools(s, resolve_target(s), s.env)  # no error


def _fixture_checkout(root: Path) -> Path:
    src = root / "pytorch"
    shutil.copytree(FIXTURE_TREE, src)
    shutil.copytree(FAKEDEP_TREE, src / "third_party" / "fakedep")
    return src


def _configure_with(cmake: Path, src: Path, ndk: Path, build_root: Path, *args: str) -> subprocess.CompletedProcess:
    """Upstream's way, without torchdroid: the fixture's scripts/build_android.sh with `cmake` first on PATH."""
    env = dict(os.environ, PATH=f"{cmake.parent}{os.pathsep}{os.environ['PATH']}", ANDROID_NDK=str(ndk),
               ANDROID_ABI="x86_64", BUILD_ROOT=str(build_root), MAX_JOBS="2", PYTHON=sys.executable)
    return subprocess.run(["bash", str(src / "scripts" / "build_android.sh"), "-DBUILD_BINARY=ON",
                           "-DUSE_VULKAN=OFF", *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(cmake4() is None, reason="no CMake 4.x: `./run test` installs one into <venv>/cmake4 "
                                             "(pip install 'cmake>=4,<5'), or set TORCHDROID_TEST_CMAKE4")
def test_the_fixture_fails_under_a_real_cmake_4_as_upstream_does(tmp_path):
    cmake = cmake4()
    src = _fixture_checkout(tmp_path)
    ndk = make_fake_ndk(tmp_path / "ndk", "26.3.11579264")
    failed = _configure_with(cmake, src, ndk, tmp_path / "b1")
    out = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert UPSTREAM_ERROR in out and "third_party/fakedep/CMakeLists.txt" in out
    # CMake's documented escape hatch gets the same tree through
    passed = _configure_with(cmake, src, ndk, tmp_path / "b2", "-DCMAKE_POLICY_VERSION_MINIMUM=3.5")
    assert passed.returncode == 0, passed.stdout[-2000:] + passed.stderr[-2000:]
    assert (tmp_path / "b2" / "install" / "bin" / "speed_benchmark_torch").is_file()


def test_the_fixture_builds_with_this_machines_cmake_3(tmp_path):
    cmake = Path(shutil.which("cmake"))
    version = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout
    if not version.startswith("cmake version 3."):
        pytest.skip(f"the cmake on PATH is not 3.x: {version.splitlines()[0]}")
    src = _fixture_checkout(tmp_path)
    ndk = make_fake_ndk(tmp_path / "ndk", "26.3.11579264")
    res = _configure_with(cmake, src, ndk, tmp_path / "b")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert UPSTREAM_ERROR not in res.stdout + res.stderr
