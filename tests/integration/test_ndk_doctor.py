"""doctor asks the tools layer and returns typed facts with stable ids."""

from __future__ import annotations

import os

from tests.ndk_support import make_fake_jdk, make_fake_sdk, make_ndk_release
from workflow.doctor import DoctorSettings, problems, run_doctor
from workflow.doctor import by_id
from tests.virtual_device.harness import held_dead_port

STABLE_IDS = {"all.python", "convert.torch", "convert.torchvision", "make-app.cookiecutter",
              "build-android.host-python", "build-android.git", "build-android.cmake", "build-android.ninja",
              "build-android.ndk", "build-android.aar-jdk", "make-app.jdk", "make-app.sdk", "deploy.adb",
              "deploy.devices", "deploy.nnapi-deprecation"}


def test_facts_have_stable_unique_ids_and_follow_the_settings(tmp_path):
    ndk = make_ndk_release(tmp_path, "r26d")
    sdk = make_fake_sdk(tmp_path / "configured-sdk")
    jdk11 = make_fake_jdk(tmp_path / "jdk11", "11.0.22")
    env = {"PATH": os.environ["PATH"], "ANDROID_HOME": str(tmp_path / "not-an-sdk"), "JAVA_HOME": str(jdk11),
           "ANDROID_ADB_SERVER_PORT": str(held_dead_port()), "TORCHDROID_JDK_DIRS": ""}
    checks = run_doctor(DoctorSettings(ndk=str(ndk), sdk=str(sdk), env=env, adb_port=held_dead_port()))
    ids = [c.id for c in checks]
    assert len(ids) == len(set(ids)) and STABLE_IDS <= set(ids)
    facts = by_id(checks)
    assert facts["build-android.ndk"].status == "ok" and "r26d (26.3.11579264)" in facts["build-android.ndk"].found
    layout = facts["build-android.ndk-layout"].found
    assert "no vulkan_wrapper" in layout and "max-page-size=16384" in layout
    # the android.sdk setting wins over a wrong ANDROID_HOME (build-app and doctor agree now)
    assert facts["make-app.sdk"].status == "ok" and "via android.sdk" in facts["make-app.sdk"].found
    # a JDK that upstream's Gradle 6.8.3 accepts, for --aar
    assert facts["build-android.aar-jdk"].status == "ok" and "Java 11" in facts["build-android.aar-jdk"].found
    import importlib.metadata as md

    conv = facts["convert.lane-converter"]
    assert f"torch {md.version('torch')} installed; lane current converts with torch==2.8.0" in conv.found
    assert conv.status == ("ok" if md.version("torch").startswith("2.8.0") else "info")
    nnapi = facts["deploy.nnapi-deprecation"]
    assert "API 35" in nnapi.fix and "CPU fallback" in nnapi.fix


def test_missing_things_are_problems_with_the_install_command(tmp_path):
    env = {"PATH": os.environ["PATH"], "ANDROID_ADB_SERVER_PORT": str(held_dead_port()), "TORCHDROID_JDK_DIRS": ""}
    facts = by_id(run_doctor(DoctorSettings(env=env, adb_port=held_dead_port())))
    ndk = facts["build-android.ndk"]
    assert ndk.status == "warn" and "sdkmanager --install 'ndk;26.3.11579264'" in ndk.fix
    assert facts["make-app.sdk"].status == "warn" and "sdkmanager" in facts["make-app.sdk"].fix
    assert ndk in problems(list(facts.values()))


def test_cmake_4_is_a_problem_for_the_pytorch_lanes(tmp_path):
    """docs/facts.md F31: build-android refuses CMake 4; doctor says so before anyone runs it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text("#!/bin/sh\necho 'cmake version 4.0.2'\n")
    (bin_dir / "cmake").chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "ANDROID_ADB_SERVER_PORT": str(held_dead_port()),
           "TORCHDROID_JDK_DIRS": ""}
    cmake = by_id(run_doctor(DoctorSettings(env=env, adb_port=held_dead_port())))["build-android.cmake"]
    assert cmake.status == "warn" and "4.0.2" in cmake.found and "< 3.5" in cmake.found
    assert 'pip install "cmake>=3.18,<4"' in cmake.fix


def test_cmake_3_25_is_said_to_be_too_old_for_the_executorch_arm64_build(tmp_path):
    """docs/facts.md TC1: Debian 12's CMake 3.25 builds the PyTorch lanes but not ExecuTorch for arm64-v8a (3.26)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text("#!/bin/sh\necho 'cmake version 3.25.1'\n")
    (bin_dir / "cmake").chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "ANDROID_ADB_SERVER_PORT": str(held_dead_port()),
           "TORCHDROID_JDK_DIRS": ""}
    cmake = by_id(run_doctor(DoctorSettings(env=env, adb_port=held_dead_port())))["build-android.cmake"]
    assert cmake.status == "info" and "3.25.1" in cmake.found and "arm64-v8a needs >= 3.26" in cmake.found
    assert 'pip install "cmake>=3.26,<4"' in cmake.fix
