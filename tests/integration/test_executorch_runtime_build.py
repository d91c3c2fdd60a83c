"""build-android's ExecuTorch lane against the fixture ExecuTorch tree and fixture NDKs (real cmake, ninja, git, cc).

The fixture tree encodes ExecuTorch's real build interface (docs/facts.md E rows); the cases below show
the lane's options are the ones that make a runner, and that the fixture fails where the real build would.
"""

import dataclasses
import shutil
import subprocess

import pytest

from ndk_build import executorch_runtime as rt
from tests.executorch_support.runtime import fake_pte, make_fake_executorch
from tests.ndk_support import NDK_REVISIONS, make_fake_ndk, make_ndk_release
from tests.ndk_support.fixtures import ccache_dir, git_file_protocol  # noqa: F401 (fixtures)
from toolchain.elf import read_elf
from toolchain.errors import ToolFailed, ToolNotFound, VerificationError
from toolchain.records import BuildInfo

pytestmark = [pytest.mark.slow,  # ExecuTorch's runner configured and built with CMake (~50 s)
              pytest.mark.skipif(not rt.CMake.locate().found, reason="needs cmake")]


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    return make_fake_executorch(tmp_path_factory.mktemp("et-remote"))


@pytest.fixture(scope="module")
def ndks(tmp_path_factory):
    root = tmp_path_factory.mktemp("et-ndks")
    return {r: make_ndk_release(root, r) for r in ("r23c", "r27c")}


def _settings(tmp_path, remote, ndk, abi="x86_64", **kw):
    """x86_64: the fixture NDK keeps the host compiler, so the host ABI is the one whose machine check can pass."""
    return rt.RuntimeBuildSettings(build_dir=tmp_path / "build", ndk=str(ndk), repo_url=remote.url,
                                   commit=remote.commit, max_jobs=2, env={}, abi=abi, **kw)


def test_the_runner_is_built_verified_and_recorded(tmp_path, remote, ndks, tiny_lane):
    result = rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"]), tmp_path / "build.log")
    info = BuildInfo.load(result.build_info.path)
    assert info.lane == "executorch-1.5.1" and info.get("api_level") == 29 and info.get("abi") == "x86_64"
    assert info.get("commit") == remote.commit
    elf = read_elf(result.runner)
    assert elf.android_api_level == 29 and elf.load_alignment >= 16384
    assert info.get("page_alignment") == {"executor_runner": elf.load_alignment}
    art = info.artefact("executor_runner")
    assert art == result.runner.resolve()
    args = info.get("cmake_args")
    assert "-DEXECUTORCH_BUILD_EXECUTOR_RUNNER=ON" in args and "-DANDROID_PLATFORM=android-29" in args
    python = next(a for a in args if a.startswith("-DPYTHON_EXECUTABLE="))  # the codegen Python, checked (E14)
    assert info.get("python") == python.split("=", 1)[1]
    # the default: devtools and the event tracer on (EB1-EB4), recorded, the runner writes an ETDump
    assert {"-DEXECUTORCH_BUILD_DEVTOOLS=ON", "-DEXECUTORCH_ENABLE_EVENT_TRACER=ON"} <= set(args)
    assert info.get("event_tracer") is True
    import sys

    model = tiny_lane[0] / "tiny-fp32-portable.pte"
    run = subprocess.run([str(result.runner), f"--model_path={model}", "--num_executions=3", "--cpu_threads=1",
                          f"--etdump_path={tmp_path / 'm.etdump'}"], capture_output=True, text=True,
                         env={"VDEV_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and run.stderr.count("Iteration ") == 3, run.stderr
    assert (tmp_path / "m.etdump").stat().st_size > 0


def test_the_event_tracer_needs_devtools(tmp_path, remote, ndks, monkeypatch):
    """EB2: EXECUTORCH_ENABLE_EVENT_TRACER=ON without EXECUTORCH_BUILD_DEVTOOLS fails at configure."""
    real = rt.cmake_args
    monkeypatch.setattr(rt, "cmake_args", lambda *a: [x.replace("DEVTOOLS=ON", "DEVTOOLS=OFF") for x in real(*a)])
    with pytest.raises(ToolFailed, match="configure"):
        rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"]), tmp_path / "build.log")
    assert "'EXECUTORCH_BUILD_DEVTOOLS'" in (tmp_path / "build.log").read_text()  # CMake wraps the message


def test_without_the_tracer_the_runner_has_no_etdump_path(tmp_path, remote, ndks, monkeypatch):
    """EB1/EB4: the android preset leaves the event tracer off; such a runner refuses --etdump_path (gflags)."""
    real = rt.cmake_args
    monkeypatch.setattr(rt, "cmake_args", lambda *a: [x for x in real(*a) if "EVENT_TRACER" not in x])
    result = rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"]), tmp_path / "build.log")
    run = subprocess.run([str(result.runner), f"--model_path={fake_pte(tmp_path / 'm.pte')}", "--etdump_path=x"],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "unknown command line flag" in run.stderr


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-g++") is None, reason="./run test installs g++-aarch64-linux-gnu")
def test_the_default_abi_gets_an_aarch64_runner_and_a_wrong_machine_is_refused(tmp_path, remote, ndks):
    """arm64-v8a: the fixture NDK's toolchain, like the real one, compiles AArch64 code; an NDK whose toolchain
    makes x86-64 code for it fails the ELF machine check."""
    built = rt.build_runtime(_settings(tmp_path / "ok", remote, ndks["r27c"], abi="arm64-v8a"), tmp_path / "ok.log")
    assert read_elf(built.runner).machine == "AArch64"
    broken = make_fake_ndk(tmp_path / "host-only-ndk", NDK_REVISIONS["r27c"], host_only=True)
    with pytest.raises(VerificationError, match="expected AArch64"):
        rt.build_runtime(_settings(tmp_path / "bad", remote, broken, abi="arm64-v8a"), tmp_path / "bad.log")


def test_without_the_runner_option_nothing_is_built(tmp_path, remote, ndks, monkeypatch):
    """E6: with the android preset the runner is off by default; the fixture, like upstream, then has no target."""
    real = rt.cmake_args
    monkeypatch.setattr(rt, "cmake_args", lambda *a: [x for x in real(*a) if "EXECUTOR_RUNNER" not in x])
    with pytest.raises(ToolFailed, match="executor_runner"):
        rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"]), tmp_path / "build.log")


def test_the_runner_needs_its_extensions(tmp_path, remote, ndks, monkeypatch):
    real = rt.cmake_args
    monkeypatch.setattr(rt, "cmake_args",
                        lambda *a: [x for x in real(*a) if "EXTENSION_EVALUE_UTIL" not in x] + ["-DEXECUTORCH_BUILD_EXTENSION_EVALUE_UTIL=OFF"])
    with pytest.raises(ToolFailed, match="configure"):
        rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"]), tmp_path / "build.log")


def test_without_android_platform_the_runner_gets_the_ndk_minimum_not_30(tmp_path, remote, ndks, monkeypatch):
    """E5, F34: upstream's set(ANDROID_PLATFORM android-30) comes after project(), when the NDK toolchain has fixed the
    compiler's API level: without -DANDROID_PLATFORM the runner is built for the NDK's minimum (21), even when 30 was
    what the user wanted. The ELF check catches it."""
    real = rt.cmake_args
    monkeypatch.setattr(rt, "cmake_args", lambda *a: [x for x in real(*a) if "ANDROID_PLATFORM" not in x])
    with pytest.raises(VerificationError, match="API level note 21, expected 30"):
        rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"], api_level=30), tmp_path / "build.log")


def _python_without_torch(tmp_path):
    """A working python3 that imports neither torch nor yaml (-S: no site-packages at all)."""
    system = shutil.which("python3", path="/usr/bin:/bin")
    exe = tmp_path / "bare-python" / "python3"
    exe.parent.mkdir()
    exe.write_text(f'#!/bin/sh\nexec {system} -S "$@"\n')
    exe.chmod(0o755)
    return exe


def test_a_python_without_torch_or_yaml_is_refused_before_any_work(tmp_path, remote, ndks):
    """E14: the codegen Python is checked (torch, torchgen, yaml) before anything is fetched or configured."""
    python = _python_without_torch(tmp_path)
    with pytest.raises(ToolNotFound, match="cannot import torch, torchgen, yaml") as e:
        rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"], python=str(python)), tmp_path / "build.log")
    assert "pip install torch pyyaml" in e.value.remedy and "--python" in e.value.remedy
    assert not (tmp_path / "build" / "src").exists() and not (tmp_path / "build" / "android").exists()


def test_the_fixture_fails_in_the_build_without_a_python_that_has_torchgen(tmp_path, remote, ndks, monkeypatch):
    """E14: like upstream, the fixture configures with a Python lacking torchgen and fails late, in the codegen step:
    the failure torchdroid's check_python now prevents."""
    python = _python_without_torch(tmp_path)
    monkeypatch.setattr(rt, "check_python", lambda configured=None: python)
    log = tmp_path / "build.log"
    with pytest.raises(ToolFailed, match="building ExecuTorch's executor_runner"):
        rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"]), log)
    text = log.read_text()
    assert "Build files have been written" in text and "No module named" in text
    assert f"-DPYTHON_EXECUTABLE={python}" in text


def _bin_dir(tmp_path, *tools):
    d = tmp_path / "bin"
    d.mkdir(exist_ok=True)
    for tool in tools:
        (d / tool).symlink_to(shutil.which(tool))
    return str(d)


@pytest.mark.parametrize("tools,extra,message", [
    (("cmake", "git", "cc", "c++"), {}, "Ninja is not installed"),
    (("cmake", "git", "ninja", "cc"), {}, "no host C\\+\\+ compiler"),
    (("cmake", "git", "ninja", "c++"), {}, "no host C compiler"),
    (("cmake", "git", "ninja", "cc", "c++"), {"CXX": "clang++-404"}, "CXX='clang\\+\\+-404' names no program"),
])
def test_missing_ninja_or_host_compiler_is_refused_before_any_work(tmp_path, remote, ndks, tools, extra, message):
    """E15, E16: the lane configures with -G Ninja and builds flatc/flatcc for the host: both checked first."""
    env = {"PATH": _bin_dir(tmp_path, *tools), **extra}
    with pytest.raises(ToolNotFound, match=message):
        rt.build_runtime(dataclasses.replace(_settings(tmp_path, remote, ndks["r27c"]), env=env),
                         tmp_path / "build.log")
    assert not (tmp_path / "build" / "src").exists()


def test_the_android_pal_would_hide_the_timings(tmp_path, remote, ndks, monkeypatch):
    """E7: the preset's android PAL logs to logcat; without the posix override the runner prints no times."""
    real = rt.cmake_args
    monkeypatch.setattr(rt, "cmake_args", lambda *a: [x for x in real(*a) if "PAL_DEFAULT" not in x])
    result = rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"], event_tracer=False), tmp_path / "build.log")
    run = subprocess.run([str(result.runner), f"--model_path={fake_pte(tmp_path / 'm.pte')}", "--num_executions=2"],
                         capture_output=True, text=True)
    assert run.returncode == 0 and "Iteration" not in run.stderr


def test_an_old_ndk_is_refused_before_fetching(tmp_path, remote, ndks):
    with pytest.raises(ToolNotFound, match="r28c"):
        rt.build_runtime(_settings(tmp_path, remote, ndks["r23c"]), tmp_path / "build.log")
    assert not (tmp_path / "build" / "src").exists()


def test_cli_lane_executorch_without_an_ndk_says_how_to_get_one(tmp_path):
    import os

    from tests.cli import invoke

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
    r = invoke(tmp_path, "--search-root", str(rt.Path(__file__).resolve().parents[2]), "build-android", "--lane",
               "executorch", env=dict(env, CI="1", HOME=str(tmp_path)))
    assert r.returncode == 3 and "NDK" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "build" / "src").exists()
