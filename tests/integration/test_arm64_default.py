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
from tests.virtual_device.arm64 import arm64_cpu_problem
from tests.virtual_device.harness import adb_with_devices
from toolchain.records import BuildInfo

pytestmark = [pytest.mark.skipif(bool(arm64_cpu_problem()), reason=arm64_cpu_problem() or "-"),
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
                          "--repeat", "1", "--warmup", "1", "--allow-mismatch", "--no-numerics", "--project", "arm64",
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
    """The fixture can fail: outside a virtual arm64 phone the same program is a foreign ELF, as on an x86_64 host."""
    from ndk_build import BuildSettings, build_android

    res = build_android(BuildSettings(build_dir=tmp_path / "build", commit=fake_pytorch.pinned,
                                      repo_url=fake_pytorch.url, ndk=str(fake_ndk), max_jobs=2,
                                      env={"PATH": os.environ["PATH"]}))
    env = {k: v for k, v in os.environ.items() if k != "VDEV_CPU_ABI"}
    host = subprocess.run([str(res.binary), "--version"], env=env, capture_output=True, text=True)
    assert host.returncode == 126 and "Exec format error" in host.stderr
    phone = subprocess.run([str(res.binary), "--version"], env=dict(env, VDEV_CPU_ABI="arm64-v8a"),
                           capture_output=True, text=True)
    assert phone.returncode == 0 and "abi=arm64-v8a api_level=29" in phone.stdout, phone.stderr
