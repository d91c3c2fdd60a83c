"""`build_android` end to end: real git, real cmake + host compiler, the fixture NDK and build script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from ndk_build import BuildSettings, build_android
from ndk_build.elfcheck import verify_binary
from tests.ndk_support import make_fake_ndk, make_fake_sdk
from tests.ndk_support import build_settings
from tests.ndk_support.fixtures import *  # noqa: F403 (pytest fixtures: fake_pytorch, fake_ndk)
from toolchain.errors import ToolFailed, ToolNotFound, UsageError, VerificationError
from toolchain.fsutil import sha256_file
from toolchain.records import BuildInfo

CLEAN_ENV = {"PATH": os.environ["PATH"]}  # no ANDROID_* from this machine


settings = build_settings


@pytest.fixture(scope="module")
def built(tmp_path_factory, fake_pytorch, fake_ndk, ccache_dir):
    """One real build shared by the read-only assertions below."""
    from tests.ndk_support import git_test_env

    env = dict(git_test_env(), CCACHE_DIR=str(ccache_dir))
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        tmp = tmp_path_factory.mktemp("built")
        s = settings(tmp, fake_pytorch, fake_ndk)
        return s, build_android(s)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_build_records_verified_artefacts(built, fake_pytorch, fake_ndk):
    s, res = built
    assert res.reused is False
    info = json.loads(res.build_info_path.read_text())
    assert res.build_info_path == s.build_dir / "android" / "x86_64" / "build-info.json"
    assert info["kind"] == "torchdroid.build-info" and info["schema"] == 1
    assert info["commit"] == fake_pytorch.pinned and info["repo_url"] == fake_pytorch.url
    assert info["custom_commit"] is True  # the fixture commit is not the lane's pin
    assert info["ndk"]["revision"] == "21.4.7075529" and Path(info["ndk"]["path"]) == Path(fake_ndk).resolve()
    assert info["abi"] == "x86_64" and info["api_level"] == 29
    assert info["lane_pins"]["pytorch_commit"] == info["lane_pins"]["pytorch_commit"].lower()
    assert "-DANDROID_NATIVE_API_LEVEL=29" in info["cmake_args"] and "-DBUILD_BINARY=ON" in info["cmake_args"]
    assert info["env"]["ANDROID_ABI"] == "x86_64" and info["env"]["MAX_JOBS"] == "2"
    assert info["verification"] == {"machine": "Advanced Micro Devices X86-64", "api_level": 29,
                                    "machine_ok": True, "api_level_ok": True, "load_alignment": 16384,
                                    "page_16k_ok": True}
    # 16 KB pages: r21e has no flexible page size option, so the linker flag is passed; alignment recorded
    assert "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-z,max-page-size=16384" in info["cmake_args"]
    assert info["page_alignment"] == {"speed_benchmark_torch": 16384, "torchdroid_nnapi_devices": 16384}
    typed = BuildInfo.load(res.build_info_path)
    assert min(typed.page_alignment.values()) == 16384 and typed.source_dir == Path(info["source_dir"])
    binary_art = next(a for a in typed.artefacts if a.kind == "binary")
    assert binary_art.load_alignment == 16384 and binary_art.path == res.binary
    assert "-DUSE_VULKAN=OFF" in info["cmake_args"] and info["vulkan"] is False
    names = {a["name"]: a for a in info["artefacts"]}
    assert {"speed_benchmark_torch", "torchdroid_nnapi_devices", "libc10.a", "libtorch_cpu.a", "libfakedep.a",
            "headers"} <= set(names)
    for a in info["artefacts"]:
        p = res.build_info_path.parent / a["path"]
        assert p.exists()
        if a["kind"] != "headers":
            assert sha256_file(p) == a["sha256"]
    # the record later stages read
    binary = BuildInfo.load(res.build_info_path).artefact("speed_benchmark_torch")
    assert binary == res.binary and os.access(binary, os.X_OK)
    assert info["seconds"] > 0 and info["started"] <= info["finished"]


def test_the_nnapi_device_lister_is_built_recorded_and_lists_what_the_library_offers(built, tmp_path):
    """build-android builds torchdroid's NNAPI device lister with the same NDK, ABI and page size; on a phone it
    lists the drivers through the NDK device API, and says why when the library or the API is missing."""
    from deploy.nnapi_log import parse_devices
    from tests.deploy_support.fixtures import build_nnapi_library

    s, res = built
    lister = BuildInfo.load(res.build_info_path).artefact("torchdroid_nnapi_devices")
    assert verify_binary(lister, "x86_64", 29).machine_ok
    base = {"PATH": os.environ["PATH"]}

    def listed(lib_dir=None, **env):
        extra = {"LD_LIBRARY_PATH": str(lib_dir)} if lib_dir else {}
        r = subprocess.run([str(lister)], env=dict(base, **extra, **env), capture_output=True, text=True)
        return r.returncode, parse_devices(r.stdout)

    code, (devices, why) = listed()
    assert code == 2 and not devices and "libneuralnetworks.so does not load" in why  # no library on this host
    lib = build_nnapi_library(tmp_path / "lib")
    code, (devices, why) = listed(lib, SBT_NNAPI_DEVICES="qti-dsp:4:30:1.2,qti-gpu:3:1000006", SBT_NNAPI_LEVEL="30")
    assert code == 0 and not why
    assert devices == [["qti-dsp", "accelerator", "feature level 4 (API 30)", "1.2"],
                       ["qti-gpu", "GPU", "feature level 6", "1.0"],
                       ["nnapi-reference", "CPU", "feature level 4 (API 30)", "1.0"]]
    code, (devices, why) = listed(lib, SBT_NNAPI_FAIL="1")
    assert code == 4 and "getDeviceCount returned 5" in why
    empty = tmp_path / "empty.c"  # a library older than the device API (Android 8.1/9)
    empty.write_text("int ANeuralNetworksModel_create(void **m) { (void)m; return 0; }\n")
    code, (devices, why) = listed(build_nnapi_library(tmp_path / "old", empty))
    assert code == 3 and "no device API" in why


def test_api_level_really_reaches_cmake(built):
    s, res = built
    out = subprocess.run([str(res.binary), "--version"], capture_output=True, text=True, check=True).stdout
    assert "abi=x86_64 api_level=29" in out
    assert (s.build_dir / "android" / "x86_64" / "cmake" / "android_native_api_level.txt").read_text().strip() == "29"


def test_the_tutorial_recipe_alone_builds_for_api_21(tmp_path, built, fake_ndk):
    """Why torchdroid passes -DANDROID_NATIVE_API_LEVEL: the script overwrites the environment's 29 with 21."""
    s, res = built
    source = Path(res.info["source_dir"])
    env = dict(os.environ, ANDROID_NDK=str(fake_ndk), ANDROID_NATIVE_API_LEVEL="29", BUILD_PYTORCH_MOBILE="1",
               ANDROID_ABI="x86_64", BUILD_ROOT=str(tmp_path / "recipe"), MAX_JOBS="2")
    subprocess.run(["bash", "scripts/build_android.sh", "-DBUILD_BINARY=ON"], cwd=source, env=env, check=True,
                   capture_output=True)
    with pytest.raises(VerificationError) as ei:
        verify_binary(tmp_path / "recipe" / "install" / "bin" / "speed_benchmark_torch", "x86_64", 29)
    assert "API level 21, not the requested 29" in str(ei.value)
    assert "-DANDROID_NATIVE_API_LEVEL" in str(ei.value)


def test_same_inputs_rebuild_nothing_and_clean_starts_over(tmp_path, fake_pytorch, fake_ndk):
    s = settings(tmp_path, fake_pytorch, fake_ndk)
    first = build_android(s)
    mtime = first.binary.stat().st_mtime_ns
    log_size = first.log_path.stat().st_size
    again = build_android(s)
    assert again.reused is True
    assert again.binary.stat().st_mtime_ns == mtime
    assert again.log_path.stat().st_size == log_size  # build_android.sh did not run
    assert again.info["inputs_key"] == first.info["inputs_key"]
    # a changed artefact is noticed
    first.binary.write_bytes(first.binary.read_bytes() + b"\0")
    rebuilt = build_android(s)
    assert rebuilt.reused is False
    # another API level is another input
    other = build_android(replace(s, api_level=30))
    assert other.reused is False and other.info["verification"]["api_level"] == 30
    cleaned = build_android(replace(s, api_level=30, clean=True))
    assert cleaned.reused is False and "Re-run cmake" not in cleaned.log_path.read_text()
    assert "-- Configuring done" in cleaned.log_path.read_text()


def test_wrong_machine_for_the_abi_is_caught(tmp_path, fake_pytorch):
    broken = make_fake_ndk(tmp_path / "ndk-host-only", host_only=True)  # compiles arm64-v8a for the host
    s = settings(tmp_path, fake_pytorch, broken, abi="arm64-v8a")
    with pytest.raises(VerificationError) as ei:
        build_android(s)
    msg = str(ei.value)
    assert "is an ELF for Advanced Micro Devices X86-64, not AArch64 as ABI arm64-v8a needs" in msg
    assert "--abi arm64-v8a --clean" in msg
    assert not (s.build_dir / "android" / "arm64-v8a" / "build-info.json").exists()
    # each ABI has its own tree
    assert (s.build_dir / "android" / "arm64-v8a" / "cmake" / "CMakeCache.txt").is_file()


def test_failing_build_shows_tail_log_and_custom_commit_warning(tmp_path, fake_pytorch, fake_ndk, caplog):
    good = build_android(settings(tmp_path, fake_pytorch, fake_ndk))
    s = settings(tmp_path, fake_pytorch, fake_ndk, commit=fake_pytorch.broken)
    with pytest.raises(ToolFailed) as ei:
        build_android(s)
    err = ei.value
    assert not good.build_info_path.exists()  # no stale record beside half-rebuilt artefacts
    log_path = s.build_dir / "android" / "x86_64" / "build.log"
    assert err.log_path == log_path and log_path.is_file()
    assert "scripts/build_android.sh failed with exit code" in str(err)
    assert any("speed_benchmark_torch.cc" in line for line in err.tail)
    assert "does not compile" in log_path.read_text()
    assert f"full log: {log_path}" in str(err)
    assert any("custom commit" in r.message and "nearest preset lane 'current'" in r.message for r in caplog.records)


def test_ndk_missing_or_out_of_range_fails_before_fetching(tmp_path, fake_pytorch):
    s = settings(tmp_path, fake_pytorch, None, commit=None)  # the lane's own pin: checks come first
    with pytest.raises(ToolNotFound) as ei:
        build_android(s)
    msg = str(ei.value)
    assert "no Android NDK found" in msg and "ANDROID_NDK" in msg and "ANDROID_HOME/ndk" in msg
    assert "r26d" in msg
    old = make_fake_ndk(tmp_path / "android-ndk-r18b", "18.1.5063045")
    with pytest.raises(ToolNotFound) as ei:
        build_android(replace(s, env={"PATH": os.environ["PATH"], "ANDROID_NDK": str(old)}))
    msg = str(ei.value)
    assert "r18b (18.1.5063045), too old for lane 'current'" in msg and "via ANDROID_NDK" in msg
    assert "install NDK r26d" in msg
    assert not (s.build_dir / "src").exists()  # nothing was fetched


def test_seed_lane_refuses_this_hosts_python_with_the_remedy(tmp_path, fake_pytorch, fake_ndk):
    s = settings(tmp_path, fake_pytorch, fake_ndk, lane="seed-2020", lane_explicit=True, commit=None)
    with pytest.raises(ToolNotFound) as ei:
        build_android(s)
    msg = str(ei.value)
    v = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"host Python {v}" in msg and "newer than lane 'seed-2020' accepts (3.6 to 3.8)" in msg
    assert "pytorch.python" in msg and "--python" in msg


def test_aar_needs_an_sdk_and_is_recorded(tmp_path, fake_pytorch, fake_ndk, fake_jdk11):
    s = settings(tmp_path, fake_pytorch, fake_ndk, aar=True, java_home=str(fake_jdk11))
    with pytest.raises(ToolNotFound) as ei:
        build_android(s)
    assert "no Android SDK found (--aar builds the pytorch_android AAR" in str(ei.value)
    assert "ANDROID_HOME" in str(ei.value)
    sdk = make_fake_sdk(tmp_path / "sdk")
    res = build_android(replace(s, env={"PATH": os.environ["PATH"], "ANDROID_HOME": str(sdk)}))
    aar = BuildInfo.load(res.build_info_path).artefact("pytorch_android")
    assert aar.name == "pytorch_android-release.aar"
    assert "jni/x86_64/libpytorch_jni.so" in zipfile.ZipFile(aar).namelist()
    # upstream's AAR script configured its own tree, seeded by torchdroid with Vulkan off and 16 KB pages
    tree = s.build_dir / "android" / "x86_64" / "aar" / "build_android_x86_64"
    cache = (tree / "CMakeCache.txt").read_text()
    assert "USE_VULKAN:BOOL=OFF" in cache and "CMAKE_HOME_DIRECTORY" in cache
    assert res.info["jdk"]["major"] == 11
    # AGP 4.1 would take its own default NDK (facts F33): torchdroid forces the one it was given, and records it
    assert res.info["aar_ndk"]["ndkVersion"] == "21.4.7075529" and res.info["aar_ndk"]["ndkPath"] == str(fake_ndk)
    assert f"(NDK 21.4.7075529 at {fake_ndk})" in res.log_path.read_text()
    # the JNI library Gradle linked is 4 KB aligned: recorded and warned about, not hidden
    assert res.info["page_alignment"]["pytorch_android-release.aar:jni/x86_64/libpytorch_jni.so"] == 4096
    assert any("not 16 KB aligned" in w for w in res.info["warnings"])
    # the AAR build left the checkout clean, so the next run reuses it
    assert build_android(replace(s, env={"PATH": os.environ["PATH"], "ANDROID_HOME": str(sdk)})).reused


def test_bad_inputs_are_usage_errors(tmp_path, fake_pytorch, fake_ndk):
    with pytest.raises(UsageError) as ei:
        build_android(settings(tmp_path, fake_pytorch, fake_ndk, abi="mips"))
    assert "unknown ABI 'mips'" in str(ei.value) and "arm64-v8a" in str(ei.value)
    with pytest.raises(UsageError) as ei:
        build_android(settings(tmp_path, fake_pytorch, fake_ndk, lane="nightly"))
    assert "unknown lane 'nightly'" in str(ei.value)


def test_verification_needs_no_readelf_program(built):
    """The ELF checks are pure Python now: without readelf they still run (and still refuse)."""
    _, res = built
    facts = verify_binary(res.binary, "x86_64", 29)
    assert facts.machine_ok is True and facts.api_level == 29 and facts.load_alignment == 16384
    with pytest.raises(VerificationError) as ei:
        verify_binary(res.binary, "arm64-v8a", 29)
    assert "not AArch64" in str(ei.value)
    with pytest.raises(VerificationError) as ei:
        verify_binary(res.build_info_path, "x86_64", 29)
    assert "not a readable ELF" in str(ei.value)


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed (`./run test` installs it)")
def test_ccache_is_the_compiler_launcher_when_installed(built, ccache_dir):
    s, res = built
    ccache = shutil.which("ccache")
    assert f"-DCMAKE_CXX_COMPILER_LAUNCHER={ccache}" in res.info["cmake_args"]
    cache = (s.build_dir / "android" / "x86_64" / "cmake" / "CMakeCache.txt").read_text()
    assert any(line.startswith("CMAKE_CXX_COMPILER_LAUNCHER:") and line.endswith(f"={ccache}")
               for line in cache.splitlines())
    stats = subprocess.run([ccache, "--print-stats"], env=dict(os.environ, CCACHE_DIR=str(ccache_dir)),
                           capture_output=True, text=True, check=True).stdout
    counters = {k: int(v) for k, v in (line.split("\t", 1) for line in stats.splitlines() if "\t" in line)}
    # the compiles really went through ccache (misses on a cold cache, hits if another test filled it)
    assert counters["cache_miss"] + counters["direct_cache_hit"] + counters["preprocessed_cache_hit"] > 0


def test_a_commit_without_the_build_script_is_refused_with_the_lanes(tmp_path):
    """docs/facts.md F17: v2.9.0+ has no scripts/build_android.sh; the plan step says which commits do."""
    from ndk_build.build import make_plan, resolve_target
    from ndk_build.gitsource import Checkout

    s = BuildSettings(build_dir=tmp_path / "build", commit="a" * 40, abi="x86_64")
    target = resolve_target(s)
    bare = tmp_path / "pytorch-v2.9.0"
    bare.mkdir()
    with pytest.raises(UsageError) as ei:
        make_plan(s, target, None, Checkout(bare, "a" * 40, "file:///x", False, ()))
    assert "scripts/build_android.sh does not exist" in ei.value.what and "v2.9.0" in ei.value.cause
    assert "--lane current" in ei.value.remedy


def test_too_little_disk_is_refused_before_fetching(tmp_path, fake_pytorch, fake_ndk, monkeypatch):
    """The checkout and build tree sizes are checked before the fetch (the real ones are ~3 + ~5 GB)."""
    from toolchain import pins
    from toolchain.errors import NoSpaceError
    from toolchain.fsutil import free_bytes

    monkeypatch.setattr(pins, "CHECKOUT_BYTES", free_bytes(tmp_path) * 2)
    s = settings(tmp_path, fake_pytorch, fake_ndk)
    with pytest.raises(NoSpaceError) as ei:
        build_android(s)
    assert "not enough disk space for the PyTorch" in ei.value.what and "free on the filesystem" in ei.value.cause
    assert not (s.build_dir / "src").exists()
