"""The default ABI is the tested path (issue 20 item 1): `invoke build-android` from its defaults (no --abi, relative
build directory) with the fixture NDK makes real AArch64 ELFs with Debian's cross compiler, and `invoke deploy`
runs them on a virtual arm64 phone under qemu-user and reads their latencies back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from ndk_build.elfcheck import read_elf
from tests.deploy_support.fixtures import invoke_cli as invoke
from tests.ndk_support.fixtures import *  # noqa: F403 (pytest fixtures: fake_pytorch, fake_ndk, git_file_protocol)
from tests.virtual_device.arm64 import arm64_cpu_problem, private_cpu_problem
from tests.virtual_device.harness import adb_with_devices
from toolchain.records import BuildInfo

pytestmark = [pytest.mark.slow,  # AArch64 programs built and run under qemu (~60 s in all)
              pytest.mark.skipif(bool(arm64_cpu_problem()), reason=arm64_cpu_problem() or "-"),
              pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")]


def test_build_android_defaults_make_aarch64_programs_an_arm64_phone_runs(tmp_path, fake_pytorch, fake_ndk,
                                                                          mobilenet_models):
    work = tmp_path / "work"
    work.mkdir()
    models = work / "models"
    shutil.copytree(mobilenet_models[0], models)
    with adb_with_devices(tmp_path / "adb", {"pixel": {"props": {"ro.product.model": "Arm64 Phone"}}}) as (server, devs):
        built = invoke(work, "build-android", "--ndk", str(fake_ndk), "--repo-url", fake_pytorch.url, "--commit",
                       fake_pytorch.pinned, "--max-jobs", "2", port=server.port)
        assert built.returncode == 0, built.stdout + built.stderr
        info = BuildInfo.load(work / "build" / "android" / "arm64-v8a" / "build-info.json")
        binary = info.artefact("speed_benchmark_torch")
        assert info.abi == "arm64-v8a" and read_elf(binary).machine == "AArch64"
        assert read_elf(info.artefact("torchdroid_nnapi_devices")).machine == "AArch64"
        assert info.data["page_alignment"] == {"speed_benchmark_torch": 16384, "torchdroid_nnapi_devices": 16384}
        deployed = invoke(work, "deploy", "--models", "models", "--variant", "quant_full", "--iter", "3",
                          "--repeat", "1", "--warmup", "1", "--allow-mismatch", "--project", "arm64",
                          port=server.port)
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        on_phone = devs["pixel"].state_dir / "root" / "data" / "local" / "tmp" / "torchdroid" / "arm64" \
            / "speed_benchmark_torch"
        assert read_elf(on_phone).machine == "AArch64"  # what ran there (the host cannot: the test below)
    rows = json.loads((work / "build" / "results" / "latest.json").read_text())["results"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert {r["backend"] for r in ok} == {"cpu", "nnapi"}, rows
    assert all(r["median_ms"] > 0 and r["samples"] == 3 and r["abi"] == "arm64-v8a" for r in ok), rows


def test_the_aarch64_program_runs_only_on_an_arm64_cpu(tmp_path, fake_pytorch, fake_ndk):
    """The fixture can fail: the same program runs on a virtual arm64 phone (qemu-user) and is a foreign ELF on an
    x86_64 one, whatever binfmt_misc entries this machine has outside the phones."""
    from ndk_build import BuildSettings, build_android

    res = build_android(BuildSettings(build_dir=tmp_path / "build", commit=fake_pytorch.pinned,
                                      repo_url=fake_pytorch.url, ndk=str(fake_ndk), max_jobs=2,
                                      env={"PATH": os.environ["PATH"]}))
    phones = {"arm": {}, "x86": {"props": {"ro.product.cpu.abi": "x86_64", "ro.product.cpu.abilist": "x86_64"}}}
    with adb_with_devices(tmp_path / "adb", phones) as (server, devs):
        env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(server.port))
        out = {}
        for name, dev in devs.items():
            shutil.copy2(res.binary, dev.path("/data/local/tmp/sbt"))
            out[name] = subprocess.run(["adb", "-s", dev.serial, "shell", "/data/local/tmp/sbt --version 2>&1; echo rc=$?"],
                                       env=env, capture_output=True, text=True, timeout=120).stdout
    assert "abi=arm64-v8a api_level=29" in out["arm"] and "rc=0" in out["arm"], out
    assert "Exec format error" in out["x86"] and "rc=126" in out["x86"], out


def test_the_arm64_phones_need_no_machine_wide_entry_where_the_kernel_gives_them_their_own():
    """Another checkout's machine-wide binfmt_misc entry (or none) does not make the default-ABI tests skip: where a
    user namespace can mount its own binfmt_misc (Linux 6.7+), each phone command has its own."""
    if private_cpu_problem():
        pytest.skip(f"this kernel gives no private binfmt_misc: {private_cpu_problem()}")
    assert arm64_cpu_problem() == ""


def test_the_executorch_runner_for_the_default_abi_runs_on_an_arm64_phone(tmp_path, tiny_lane, ccache_dir,
                                                                            git_file_protocol):
    """The ExecuTorch lane the same way: the fixture executor_runner built with the lane's default ABI is an AArch64
    ELF, and `invoke deploy --format executorch` runs it on a virtual arm64 phone (qemu-user) and reads its times."""
    from ndk_build import executorch_runtime as rt
    from tests.executorch_support.runtime import cmake_env_for_arm64, make_fake_executorch
    from tests.ndk_support import make_ndk_release
    from tests.executorch_support.device import latest_executorch

    remote = make_fake_executorch(tmp_path / "et-remote")
    ndk = make_ndk_release(tmp_path / "ndks", "r27c")
    work = tmp_path / "work"
    env = cmake_env_for_arm64()  # arm64-v8a needs CMake >= 3.26 (docs/facts.md TC1)
    if env is None:
        pytest.skip("no CMake >= 3.26 for the arm64-v8a lane: `./run test` installs one into <venv>/cmake4")
    settings = rt.RuntimeBuildSettings(build_dir=work / "build", ndk=str(ndk), repo_url=remote.url,
                                       commit=remote.commit, max_jobs=2, env=env)
    assert settings.abi == "arm64-v8a"  # the lane's default, as build-android --lane executorch resolves it
    built = rt.build_runtime(settings, tmp_path / "build.log")
    assert read_elf(built.runner).machine == "AArch64"
    with adb_with_devices(tmp_path / "adb", {"pixel": {}}) as (server, devs):
        r = invoke(work, "deploy", "--format", "executorch", "--models", str(tiny_lane[0]), "--runner-build-info",
                   str(built.build_info.path), "--iter", "3", "--warmup", "1", "--repeat", "1", "--no-numerics",
                   "--project", "et64", port=server.port)
        on_phone = devs["pixel"].path("/data/local/tmp/torchdroid/et64/executorch/executor_runner")
        assert read_elf(on_phone).machine == "AArch64"
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [row for row in latest_executorch(work / "build" / "results").rows if row.runtime.startswith("ExecuTorch")]
    ok = [row for row in rows if row.status == "ok"]
    assert ok and all(row.median_ms > 0 and row.samples == 3 for row in ok), rows
