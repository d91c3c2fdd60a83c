"""Adversarial cases for build-android, check-compat and doctor: bad values from every source (command line,
invoke.yaml, INVOKE_* and ANDROID_* variables), wrong tools, foreign and tampered files, a concurrent run.

Each runs the real `invoke` from a fresh directory with the default (relative) build dir.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.adversarial.harness import adversarial, assert_clean, run_invoke, snapshot
from tests.ndk_support import make_fake_jdk, make_fake_sdk, make_ndk_release
from tests.ndk_support.fixtures import *  # noqa: F403 (fake_pytorch, ndk_releases, git file protocol)
from tests.ndk_support.models import make_models_and_manifest
from toolchain.fsutil import output_lock
from toolchain.records import BUILD_INFO_KIND, BUILD_INFO_SCHEMA, write_record


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    return make_models_and_manifest(tmp_path_factory.mktemp("adv-models")).parent


def _fixture_build(fake_pytorch, ndk, *extra):
    return ["build-android", "--ndk", str(ndk), "--repo-url", fake_pytorch.url, "--commit", fake_pytorch.pinned,
            "--abi", "x86_64", "--max-jobs", "2", *extra]


def _fake_program(bin_dir: Path, name: str, script: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / name
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(0o755)
    return exe


# --------------------------------------------------------------------------- build-android: bad values


@adversarial("build-android", "bad value from invoke.yaml")
def test_unknown_abi_in_invoke_yaml(tmp_path):
    (tmp_path / "invoke.yaml").write_text("android: {abi: mips}\n")
    out = run_invoke(["-f", str(tmp_path / "invoke.yaml"), "build-android"], tmp_path)
    assert_clean(out, "usage", mentions=["unknown ABI 'mips'", "arm64-v8a"], root=tmp_path)
    assert not (tmp_path / "build" / "src").exists()


@adversarial("build-android", "bad value on the command line")
def test_api_level_not_a_number(tmp_path):
    out = run_invoke(["build-android", "--api-level", "twenty-nine"], tmp_path)
    assert_clean(out, "usage", mentions=["'twenty-nine' is not a whole number", "--api-level 29"], root=tmp_path)


@adversarial("build-android", "bad value on the command line")
def test_max_jobs_zero_and_not_a_number(tmp_path):
    for value, words in (("0", "must be at least 1"), ("many", "is not a whole number")):
        out = run_invoke(["build-android", "--max-jobs", value], tmp_path)
        assert_clean(out, "usage", mentions=[words, "--max-jobs 1"], root=tmp_path)


@adversarial("build-android", "bad value on the command line")
def test_cmake_argument_with_whitespace(tmp_path, fake_pytorch, ndk_releases):
    out = run_invoke(_fixture_build(fake_pytorch, ndk_releases["r26d"], "--cmake-arg", "-DFOO=a b"), tmp_path)
    assert_clean(out, "usage", mentions=["contains whitespace", "without spaces"], root=tmp_path)


# --------------------------------------------------------------------------- build-android: wrong tools


@adversarial("build-android", "bad value on the command line: an option the ExecuTorch lane does not take")
@pytest.mark.parametrize("extra,name", [(["--commit", "deadbeef"], "--commit"), (["--repo-url", "file:///x"], "--repo-url"),
                                        (["--aar"], "--aar"), (["--cmake-arg", "-DX=1"], "--cmake-arg"),
                                        (["--vulkan"], "--vulkan"), (["--clean"], "--clean"),
                                        (["--java-home", "/usr"], "--java-home")])
def test_an_option_the_executorch_lane_ignores_is_refused_before_any_work(tmp_path, extra, name):
    """Before: `--lane executorch` dropped these silently and built the pinned runtime (or looked for an NDK)."""
    out = run_invoke(["build-android", "--lane", "executorch", *extra], tmp_path)
    assert_clean(out, "usage", mentions=[name, "--lane executorch"], root=tmp_path)
    assert "NDK" not in out.text and not (tmp_path / "build" / "src").exists()


@adversarial("build-android", "wrong tool: a file where the NDK should be")
def test_ndk_path_is_a_file(tmp_path):
    bogus = tmp_path / "android-ndk-r26d.zip"
    bogus.write_bytes(b"PK\x03\x04 not unpacked")
    kept = snapshot([bogus])
    out = run_invoke(["build-android", "--ndk", str(bogus)], tmp_path)
    assert_clean(out, "tool", mentions=["is not an Android NDK", "source.properties"], kept=kept, root=tmp_path)


@adversarial("build-android", "wrong tool: an NDK too old, from ANDROID_NDK")
def test_too_old_ndk_from_the_environment_names_the_package_it_recommends(tmp_path):
    old = make_ndk_release(tmp_path / "ndks", "r21e").parent / "r18"
    from tests.ndk_support import make_fake_ndk

    make_fake_ndk(old, "18.1.5063045")
    out = run_invoke(["build-android"], tmp_path, env={"ANDROID_NDK": str(old)})
    assert_clean(out, "tool", mentions=["too old for lane 'current'", "sdkmanager --install 'ndk;26.3.11579264'",
                                        "via ANDROID_NDK"], root=tmp_path)
    assert not (tmp_path / "build" / "src").exists()  # refused before any fetch


@adversarial("build-android", "wrong tool: --vulkan with an NDK that has no vulkan_wrapper")
def test_vulkan_with_r26d_stops_before_fetching(tmp_path, ndk_releases):
    out = run_invoke(["build-android", "--vulkan", "--ndk", str(ndk_releases["r26d"])], tmp_path)
    assert_clean(out, "tool", mentions=["vulkan_wrapper", "drop --vulkan", "ndk;21.4.7075529"], root=tmp_path)
    assert not (tmp_path / "build" / "src").exists()


@adversarial("build-android", "wrong tool: CMake older than PyTorch needs")
def test_old_cmake_first_on_path(tmp_path, ndk_releases):
    fake = _fake_program(tmp_path / "oldbin", "cmake", "echo 'cmake version 3.10.2'\n")
    env = {"PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    out = run_invoke(["build-android", "--ndk", str(ndk_releases["r26d"])], tmp_path, env=env)
    assert_clean(out, "tool", mentions=["CMake 3.10.2", "too old", "cmake>=3.18"], root=tmp_path)
    assert not (tmp_path / "build" / "src").exists()


@adversarial("build-android", "wrong tool: host Python without PyTorch's code-generator modules")
def test_host_python_without_pyyaml(tmp_path, ndk_releases):
    fake = _fake_program(tmp_path / "pybin", "python3", 'echo 3.11.2; echo "$0"; echo "yaml"\n')
    out = run_invoke(["build-android", "--ndk", str(ndk_releases["r26d"]), "--python", str(fake)], tmp_path)
    assert_clean(out, "tool", mentions=["lacks yaml", "-m pip install pyyaml"], root=tmp_path)


@adversarial("build-android", "wrong tool: --aar with only a JDK that upstream's Gradle refuses")
def test_aar_with_jdk17_only_stops_before_fetching(tmp_path, ndk_releases):
    jdk17 = make_fake_jdk(tmp_path / "jdk-17", "17.0.9")
    sdk = make_fake_sdk(tmp_path / "sdk")
    env = {"JAVA_HOME": str(jdk17), "ANDROID_HOME": str(sdk), "TORCHDROID_JDK_DIRS": "",
           "PATH": os.environ["PATH"].replace("/usr/bin", "/nonexistent-usr-bin") + os.pathsep + "/usr/bin"}
    out = run_invoke(["build-android", "--aar", "--ndk", str(ndk_releases["r26d"])], tmp_path, env=env)
    assert out.code == 3, out.text[-3000:]
    assert_clean(out, "tool", mentions=["Gradle 6.8.3", "Java 8 to 15", "install a JDK 11"], root=tmp_path)
    assert not (tmp_path / "build" / "src").exists()


@adversarial("build-android", "wrong tool: --java-home that is not a JDK")
def test_java_home_not_a_jdk(tmp_path, ndk_releases):
    sdk = make_fake_sdk(tmp_path / "sdk")
    out = run_invoke(["build-android", "--aar", "--java-home", str(tmp_path), "--ndk", str(ndk_releases["r26d"])],
                     tmp_path, env={"ANDROID_HOME": str(sdk)})
    assert_clean(out, "tool", mentions=["is not a JDK", "--java-home"], root=tmp_path)


# --------------------------------------------------------------------------- build-android: files and runs


@adversarial("build-android", "tampered record: a corrupt build-info is rebuilt over, not trusted")
def test_corrupt_build_info_is_not_trusted(tmp_path, fake_pytorch, ndk_releases):
    first = run_invoke(_fixture_build(fake_pytorch, ndk_releases["r26d"]), tmp_path)
    assert_clean(first, "ok", root=tmp_path)
    info = tmp_path / "build" / "android" / "x86_64" / "build-info.json"
    info.write_text("{not json")
    again = run_invoke(_fixture_build(fake_pytorch, ndk_releases["r26d"]), tmp_path)
    assert_clean(again, "ok", root=tmp_path)
    assert "built:" in again.out and json.loads(info.read_text())["page_alignment"]["speed_benchmark_torch"] == 16384


@adversarial("build-android", "concurrent run on the same build directory")
def test_second_run_while_one_holds_the_directory(tmp_path, ndk_releases):
    out_dir = tmp_path / "build" / "android" / "arm64-v8a"
    with output_lock(out_dir.resolve(), "build-android (another run)"):
        out = run_invoke(["build-android", "--ndk", str(ndk_releases["r26d"])], tmp_path)
    assert_clean(out, "usage", mentions=["busy", "another torchdroid run", "wait"], root=tmp_path)


@adversarial("build-android", "a user override that breaks 16 KB pages")
def test_linker_flag_override_is_refused_with_the_remedy(tmp_path, fake_pytorch, ndk_releases):
    out = run_invoke(_fixture_build(fake_pytorch, ndk_releases["r26d"], "--cmake-arg",
                                    "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-O1"), tmp_path)
    assert_clean(out, "verification", mentions=["not 16 KB aligned", "max-page-size=16384"], root=tmp_path)
    assert not (tmp_path / "build" / "android" / "x86_64" / "build-info.json").exists()


# --------------------------------------------------------------------------- check-compat


@adversarial("check-compat", "tampered record")
def test_check_compat_with_a_garbage_build_info(tmp_path, models):
    bi = tmp_path / "build-info.json"
    bi.write_text("\x00\x01garbage")
    kept = snapshot([bi])
    out = run_invoke(["check-compat", "--models", str(models), "--build-info", str(bi)], tmp_path)
    assert_clean(out, "record", mentions=["cannot be read", "invoke build-android"], kept=kept, root=tmp_path)


@adversarial("check-compat", "foreign file: a manifest passed as the build-info")
def test_check_compat_with_a_foreign_record(tmp_path, models):
    out = run_invoke(["check-compat", "--models", str(models), "--build-info", str(models / "manifest.json")],
                     tmp_path)
    assert_clean(out, "record", mentions=["is not a torchdroid.build-info record"], root=tmp_path)


@adversarial("check-compat", "missing input")
def test_check_compat_without_models_or_build(tmp_path):
    out = run_invoke(["check-compat"], tmp_path)
    assert_clean(out, "record", mentions=["invoke convert"], root=tmp_path)


@adversarial("check-compat", "bad value on the command line")
def test_check_compat_source_not_a_directory(tmp_path, models):
    bi = write_record(tmp_path / "bi" / "build-info.json", BUILD_INFO_KIND, BUILD_INFO_SCHEMA,
                      {"lane": "current", "commit": "ba56102387ef21a3b04b357e5b183d48f0afefc7", "abi": "arm64-v8a",
                       "artefacts": []})
    out = run_invoke(["check-compat", "--models", str(models), "--build-info", str(bi), "--source",
                      str(tmp_path / "nope")], tmp_path)
    assert_clean(out, "usage", mentions=["is not a directory", "PyTorch checkout"], root=tmp_path)


# --------------------------------------------------------------------------- doctor


@adversarial("doctor", "bad values from every source at once")
def test_doctor_never_crashes_on_broken_settings(tmp_path):
    (tmp_path / "invoke.yaml").write_text("android: {sdk: /definitely/not/an/sdk}\nndk: {path: ~/nope}\n")
    broken_java = tmp_path / "jdk"
    broken_java.mkdir()
    (broken_java / "release").write_text("JAVA_VERSION=garbage")
    out = run_invoke(["-f", str(tmp_path / "invoke.yaml"), "doctor"], tmp_path, env={"ANDROID_NDK": str(tmp_path / "file"), "JAVA_HOME": str(broken_java),
                                                "ANDROID_HOME": "\x7f"})
    assert_clean(out, "ok", root=tmp_path)
    assert "(from config ndk.path) is" in out.out and "source.properties" in out.out  # (the table wraps cells)
    assert "/definitely/not/an/sdk" in out.out
    strict = run_invoke(["doctor", "--strict"], tmp_path)
    assert strict.code == 1 and "problem(s)" in strict.err and "Traceback" not in strict.text
