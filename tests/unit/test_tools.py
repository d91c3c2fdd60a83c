"""The tools layer: each tool finds itself from config and environment and says how to get it."""

from __future__ import annotations

import os

import pytest

from tests.ndk_support import make_fake_jdk, make_fake_ndk, make_fake_sdk
from toolchain import pins
from toolchain.errors import ToolNotFound
from toolchain.tools import AndroidSdk, CMake, Jdk, Ndk, agp_min_java, gradle_java_range
from toolchain.tools.jdk import parse_release
from toolchain.tools.ndk import install_remedy


@pytest.mark.parametrize("gradle, expected", [("6.8.3", (8, 15)), ("6.7.1", (8, 15)), ("7.0", (8, 16)),
                                              ("7.6.4", (8, 19)), ("8.7", (8, 21)), ("9.1.0", (17, 25))])
def test_gradle_java_range_follows_the_compatibility_matrix(gradle, expected):
    assert gradle_java_range(gradle) == expected


def test_agp_java_minimum():
    assert (agp_min_java("4.1.2"), agp_min_java("7.4.2"), agp_min_java("8.5.2")) == (8, 11, 17)


@pytest.mark.parametrize("text, major", [('JAVA_VERSION="1.8.0_392"', 8), ('JAVA_VERSION="11.0.22"', 11),
                                         ('IMPLEMENTOR="x"\nJAVA_VERSION="17.0.15"', 17), ("nothing", None)])
def test_parse_release(text, major):
    assert parse_release(text) == major


def test_jdk_for_gradle_picks_a_suitable_one_and_explains_otherwise(tmp_path):
    jdk17 = make_fake_jdk(tmp_path / "jdk17", "17.0.9")
    jdk11 = make_fake_jdk(tmp_path / "jdk11", "11.0.22")
    env = {"PATH": "/nonexistent", "JAVA_HOME": str(jdk17), "TORCHDROID_JDK_DIRS": ""}  # not this machine's JDKs
    with pytest.raises(ToolNotFound) as ei:
        Jdk.for_gradle("6.8.3", "4.1.2", env)
    msg = str(ei.value)
    assert "no JDK between 8 and 15" in msg and f"17 ({jdk17.resolve()}, JAVA_HOME)" in msg
    assert "install a JDK 11" in msg and "JAVA_HOME" in msg
    # a JDK 11 on PATH is found even though JAVA_HOME is 17
    env["PATH"] = str(jdk11 / "bin")
    assert Jdk.for_gradle("6.8.3", "4.1.2", env).major == 11
    # AGP 8 needs 17
    assert Jdk.for_gradle("8.7", "8.5.2", env).home == jdk17.resolve()


def test_one_android_sdk_for_every_stage(tmp_path):
    sdk = make_fake_sdk(tmp_path / "sdk")
    other = make_fake_sdk(tmp_path / "other")
    # the android.sdk setting wins over ANDROID_HOME (build-app used to ignore it)
    found = AndroidSdk.find(str(sdk), {"ANDROID_HOME": str(other)})
    assert found.path == sdk.resolve() and found.found_by == "android.sdk" and found.root == found.path
    # an explicit setting that is not an SDK is not silently replaced by ANDROID_HOME
    assert AndroidSdk.find(str(tmp_path / "nope"), {"ANDROID_HOME": str(other)}) is None
    with pytest.raises(ToolNotFound) as ei:
        AndroidSdk.require(str(tmp_path / "nope"), {"ANDROID_HOME": str(other)}, why="build-app")
    assert "does not exist" in ei.value.cause and "sdkmanager" in ei.value.remedy
    # a Gradle project's local.properties is the last place looked
    project = tmp_path / "app"
    project.mkdir()
    (project / "local.properties").write_text(f"sdk.dir={sdk}\n")
    assert AndroidSdk.find(None, {}, project=project).found_by.startswith("sdk.dir in ")
    assert AndroidSdk.find(None, {}) is None


def test_ndk_install_remedy_installs_what_it_recommends():
    for lane in pins.LANES.values():
        text = install_remedy(lane)
        assert f"ndk;{lane.ndk_recommended_revision}" in text
        assert lane.ndk_recommended.split()[0] in text
    assert "ndk;26.3.11579264" in install_remedy(pins.lane("current"))


def test_ndk_locate_error_names_the_recommended_package(tmp_path):
    with pytest.raises(ToolNotFound) as ei:
        Ndk.locate(None, None, {}, pins.lane("current"))
    assert "sdkmanager --install 'ndk;26.3.11579264'" in ei.value.remedy
    old = make_fake_ndk(tmp_path / "r18", "18.1.5063045")
    with pytest.raises(ToolNotFound) as ei:
        Ndk.from_dir(old).check(pins.lane("current"))
    assert "ndk;26.3.11579264" in ei.value.remedy


def test_cmake_too_old_says_how_to_get_a_newer_one(tmp_path):
    fake = tmp_path / "bin" / "cmake"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'cmake version 3.10.2'\n")
    fake.chmod(0o755)
    cmake = CMake.locate({"PATH": str(fake.parent)})
    assert cmake.version == (3, 10, 2)
    with pytest.raises(ToolNotFound) as ei:
        cmake.require((3, 18), why="PyTorch v2.8.0")
    assert "CMake 3.10.2" in ei.value.what and "too old" in ei.value.what
    assert "pip install 'cmake>=3.18'" in ei.value.remedy
    with pytest.raises(ToolNotFound) as ei:
        CMake.locate({"PATH": str(tmp_path / "empty")}).require((3, 18))
    assert "not installed" in ei.value.what
    assert CMake.locate({"PATH": os.environ["PATH"]}).require((3, 18)).found
