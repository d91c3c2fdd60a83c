"""build-android's ExecuTorch lane against the fixture ExecuTorch tree and fixture NDKs (real cmake, ninja, git, cc).

The fixture tree encodes ExecuTorch's real build interface (docs/facts.md E rows); the cases below show
the lane's options are the ones that make a runner, and that the fixture fails where the real build would.
"""

import dataclasses
import os
import shutil
import subprocess

import pytest

from ndk_build import executorch_runtime as rt
from tests.executorch_support.runtime import cmake_env_for_arm64, fake_pte, make_fake_executorch
from tests.ndk_support import NDK_REVISIONS, make_fake_ndk, make_ndk_release
from tests.ndk_support.fixtures import ccache_dir, git_file_protocol  # noqa: F401 (fixtures)
from toolchain.elf import read_elf
from toolchain.errors import ToolFailed, ToolNotFound, VerificationError
from toolchain.fsutil import sha256_file
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
    kw.setdefault("env", {})
    return rt.RuntimeBuildSettings(build_dir=tmp_path / "build", ndk=str(ndk), repo_url=remote.url,
                                   commit=remote.commit, max_jobs=2, abi=abi, **kw)


def _run(runner, model, cwd, *flags):
    import sys

    return subprocess.run([str(runner), f"--model_path={model}", "--num_executions=3", "--cpu_threads=1", *flags],
                          capture_output=True, text=True, cwd=cwd, env={"VDEV_PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})


def test_both_runners_are_built_verified_and_recorded(tmp_path, remote, ndks, tiny_lane):
    """TC3: executor_runner without the event tracer (the timing rounds: it writes no model.etdump and refuses
    --etdump_path), executor_runner_traced with it (writes an ETDump at exit, model.etdump without the flag); each
    built in its own tree, ELF-verified and recorded with its own event_tracer and configure line."""
    result = rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"]), tmp_path / "build.log")
    info = BuildInfo.load(result.build_info.path)
    assert info.lane == "executorch-1.5.1" and info.get("api_level") == 29 and info.get("abi") == "x86_64"
    assert info.get("commit") == remote.commit
    arts = {a["name"]: a for a in info.get("artefacts")}
    assert [(a["name"], a["event_tracer"]) for a in info.get("artefacts")] == [
        ("executor_runner", False), ("executor_runner_traced", True)]
    assert info.artefact("executor_runner") == result.runner.resolve()
    assert info.artefact("executor_runner_traced") == result.traced.resolve()
    for name, path in (("executor_runner", result.runner), ("executor_runner_traced", result.traced)):
        elf = read_elf(path)
        assert elf.android_api_level == 29 and elf.load_alignment >= 16384
        assert info.get("page_alignment")[name] == elf.load_alignment == arts[name]["load_alignment"]
        assert arts[name]["sha256"] == sha256_file(path)
    plain, traced = arts["executor_runner"]["cmake_args"], arts["executor_runner_traced"]["cmake_args"]
    assert "-DEXECUTORCH_ENABLE_EVENT_TRACER=OFF" in plain and "-DEXECUTORCH_BUILD_EXECUTOR_RUNNER=ON" in plain
    assert {"-DEXECUTORCH_BUILD_DEVTOOLS=ON", "-DEXECUTORCH_ENABLE_EVENT_TRACER=ON"} <= set(traced)  # EB1-EB3
    assert info.get("cmake_args") == plain and "-DANDROID_PLATFORM=android-29" in plain
    python = next(a for a in plain if a.startswith("-DPYTHON_EXECUTABLE="))  # the codegen Python, checked (E14)
    assert info.get("python") == python.split("=", 1)[1]
    assert "event_tracer" not in info.data  # each artefact says its own
    model = tiny_lane[0] / "tiny-fp32-portable.pte"
    for name, runner in (("plain", result.runner), ("traced", result.traced)):
        (tmp_path / name).mkdir()
        run = _run(runner, model, tmp_path / name)
        assert run.returncode == 0 and run.stderr.count("Iteration ") == 3, run.stderr
    assert not (tmp_path / "plain" / "model.etdump").exists()  # the timing runner leaves nothing behind
    assert (tmp_path / "traced" / "model.etdump").stat().st_size > 0  # the traced one writes it, flag or not (TC3)
    assert _run(result.runner, model, tmp_path, f"--etdump_path={tmp_path / 'm.etdump'}").returncode == 1
    assert _run(result.traced, model, tmp_path, f"--etdump_path={tmp_path / 'm.etdump'}").returncode == 0
    assert (tmp_path / "m.etdump").stat().st_size > 0
    # TC4: the android preset turns the optimized kernels on, and the runner links them (not only the portable ones)
    assert (tmp_path / "build" / "android" / "x86_64" / "executorch" / "cmake-out" /
            "liboptimized_native_cpu_ops_lib.a").is_file()


def test_without_the_event_tracer_setting_only_the_untraced_runner_is_built(tmp_path, remote, ndks):
    """android.executorch_event_tracer off: one build, one artefact, no traced runner recorded."""
    result = rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"], event_tracer=False), tmp_path / "build.log")
    info = BuildInfo.load(result.build_info.path)
    assert [(a["name"], a["event_tracer"]) for a in info.get("artefacts")] == [("executor_runner", False)]
    assert result.traced is None and not (result.runner.parent / "executor_runner_traced").exists()
    assert "-DEXECUTORCH_ENABLE_EVENT_TRACER=ON" not in (tmp_path / "build.log").read_text()


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
    result = rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"], event_tracer=False), tmp_path / "build.log")
    run = subprocess.run([str(result.runner), f"--model_path={fake_pte(tmp_path / 'm.pte')}", "--etdump_path=x"],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "unknown command line flag" in run.stderr


NO_AARCH64 = pytest.mark.skipif(shutil.which("aarch64-linux-gnu-g++") is None,
                                reason="./run test installs g++-aarch64-linux-gnu")
NO_ARM_CMAKE = pytest.mark.skipif(cmake_env_for_arm64() is None,
                                  reason="no CMake >= 3.26 for the arm64-v8a lane: `./run test` installs one into "
                                         "<venv>/cmake4 (or set TORCHDROID_TEST_CMAKE)")


@NO_AARCH64
@NO_ARM_CMAKE
def test_the_default_abi_gets_an_aarch64_runner_and_a_wrong_machine_is_refused(tmp_path, remote, ndks):
    """arm64-v8a: the fixture NDK's toolchain, like the real one, compiles AArch64 code (both runners); an NDK whose
    toolchain makes x86-64 code for it fails the ELF machine check."""
    env = cmake_env_for_arm64()
    built = rt.build_runtime(_settings(tmp_path / "ok", remote, ndks["r27c"], abi="arm64-v8a", env=env),
                             tmp_path / "ok.log")
    assert read_elf(built.runner).machine == "AArch64" and read_elf(built.traced).machine == "AArch64"
    broken = make_fake_ndk(tmp_path / "host-only-ndk", NDK_REVISIONS["r27c"], host_only=True)
    with pytest.raises(VerificationError, match="expected AArch64"):
        rt.build_runtime(_settings(tmp_path / "bad", remote, broken, abi="arm64-v8a", env=env, event_tracer=False),
                         tmp_path / "bad.log")


def _cmake_standin(tmp_path, version):
    """A `cmake` that only says its version: enough for the check, and any build work with it would fail."""
    d = tmp_path / f"cmake-{version}"
    d.mkdir()
    (d / "cmake").write_text(f"#!/bin/sh\necho 'cmake version {version}'\n")
    (d / "cmake").chmod(0o755)
    return {"PATH": f"{d}{os.pathsep}{os.environ['PATH']}"}


def test_a_cmake_3_25_is_refused_for_arm64_before_any_work_with_the_reason_and_the_fix(tmp_path, remote, ndks):
    """TC1, TC2: on Arm, ExecuTorch's kernels/optimized needs CMake 3.26 ($<BUILD_LOCAL_INTERFACE:...>); Debian 12's
    3.25.1 would configure and fail at generate time.  Refused before the checkout, naming pip's CMake."""
    env = _cmake_standin(tmp_path, "3.25.1")
    with pytest.raises(ToolNotFound) as e:
        rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"], abi="arm64-v8a", env=env), tmp_path / "build.log")
    err = e.value
    assert "CMake 3.25.1" in err.what and "too old" in err.what and "BUILD_LOCAL_INTERFACE" in err.what
    assert "pytorch/executorch#22570" in err.what and "3.26 or newer" in err.cause
    assert 'pip install "cmake>=3.26,<4"' in err.remedy and "export PATH=" in err.remedy
    assert not (tmp_path / "build" / "src").exists() and not (tmp_path / "build" / "android").exists()
    # the x86_64 build has no Arm kernels: 3.25 is enough there (E3), and 3.26 is enough on Arm
    assert rt.check_cmake("x86_64", env).version == (3, 25, 1)
    assert rt.check_cmake("arm64-v8a", _cmake_standin(tmp_path, "3.26.0")).version == (3, 26, 0)


@NO_AARCH64
@pytest.mark.skipif(not ((3, 24) <= (rt.CMake.locate().version or ()) < (3, 26)),
                    reason="shows what CMake 3.24/3.25 on PATH does (Debian 12's 3.25.1)")
def test_the_fixture_fails_at_generate_time_under_cmake_3_25_on_arm(tmp_path, remote, ndks, monkeypatch):
    """TC1: without the check, the fixture (like upstream) configures with CMake 3.25 and fails at generate time on
    $<BUILD_LOCAL_INTERFACE:...>: the late failure check_cmake prevents."""
    monkeypatch.setattr(rt, "check_cmake", lambda abi, env=None: rt.CMake.locate(env))
    log = tmp_path / "build.log"
    with pytest.raises(ToolFailed, match="configure"):
        rt.build_runtime(_settings(tmp_path, remote, ndks["r27c"], abi="arm64-v8a", event_tracer=False), log)
    text = log.read_text()
    assert "BUILD_LOCAL_INTERFACE" in text and "Generate step failed" in text


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
