"""`--aar` and lane seed-2020 (docs/facts.md F32): that lane's checkout has no android/gradlew (the Gradle wrapper
came with pytorch/pytorch#51067, 2021-02), and its scripts need a system Gradle whose version torchdroid cannot
pin.  torchdroid refuses `--aar` there before any work; a checkout without the wrapper is refused before any build.
The fixture models that layout, and its scripts fail without a system Gradle as upstream's do.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ndk_build import build_android
from tests.ndk_support import FIXTURE_TREE, apply_seed_2020_layout, build_settings, make_fake_pytorch, make_fake_sdk
from tests.ndk_support.fixtures import *  # noqa: F403 (fake_pytorch, fake_ndk, fake_jdk11, git file protocol)
from toolchain.errors import UsageError


@pytest.fixture(scope="module")
def seed_layout_remote(tmp_path_factory):
    return make_fake_pytorch(tmp_path_factory.mktemp("seed-remote"), seed_2020_layout=True)


def test_aar_on_the_seed_lane_is_refused_before_any_work(tmp_path, fake_pytorch, fake_ndk, fake_jdk11):
    sdk = make_fake_sdk(tmp_path / "sdk")
    s = build_settings(tmp_path, fake_pytorch, fake_ndk, commit=None, lane="seed-2020", lane_explicit=True,
                       aar=True, java_home=str(fake_jdk11),
                       env={"PATH": os.environ["PATH"], "ANDROID_HOME": str(sdk)})
    with pytest.raises(UsageError) as ei:
        build_android(s)
    e = ei.value
    assert "--aar" in e.what and "seed-2020" in e.what
    assert "android/gradlew" in e.cause and "pytorch/pytorch#51067" in e.cause and "system Gradle" in e.cause
    assert "--lane current" in e.remedy
    assert not (s.build_dir / "src").exists()  # refused before the fetch


def test_a_checkout_without_the_gradle_wrapper_is_refused_before_any_build(tmp_path, seed_layout_remote, fake_ndk,
                                                                          fake_jdk11):
    sdk = make_fake_sdk(tmp_path / "sdk")
    s = build_settings(tmp_path, seed_layout_remote, fake_ndk, aar=True, java_home=str(fake_jdk11),
                       env={"PATH": os.environ["PATH"], "ANDROID_HOME": str(sdk)})
    with pytest.raises(UsageError) as ei:
        build_android(s)
    assert "android/gradlew does not exist" in ei.value.what and "pytorch/pytorch#51067" in ei.value.cause
    out = s.build_dir / "android" / "x86_64"
    assert not (out / "cmake").exists() and not (out / "aar").exists()  # nothing was built
    # without --aar the same checkout builds: only the AAR route needs the wrapper
    from dataclasses import replace

    assert build_android(replace(s, aar=False, java_home=None)).binary.is_file()


def test_the_seed_layout_fixture_fails_without_a_system_gradle_as_upstream_does(tmp_path):
    tree = apply_seed_2020_layout(shutil.copytree(FIXTURE_TREE, tmp_path / "pytorch"))
    assert not (tree / "android" / "gradlew").exists()
    sdk = make_fake_sdk(tmp_path / "sdk")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if not (os.path.isfile(
        os.path.join(p, "gradle"))))
    res = subprocess.run(["bash", str(tree / "scripts" / "build_pytorch_android.sh"), "x86_64"],
                         env={"PATH": path, "ANDROID_HOME": str(sdk), "HOME": str(tmp_path)},
                         capture_output=True, text=True, timeout=60)
    # under the scripts' `set -eux` the unset GRADLE_HOME itself ends the run ("unbound variable"), as it would
    # upstream; with GRADLE_HOME set to a directory without bin/gradle the script's own message says so
    assert res.returncode != 0 and "GRADLE_HOME: unbound variable" in res.stderr
    res = subprocess.run(["bash", str(tree / "scripts" / "build_pytorch_android.sh"), "x86_64"],
                         env={"PATH": path, "ANDROID_HOME": str(sdk), "HOME": str(tmp_path),
                              "GRADLE_HOME": str(tmp_path / "no-gradle")}, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1
    assert "Unable to find gradle, please add it to PATH or set GRADLE_HOME" in res.stdout
    assert not (tree / "android" / "pytorch_android" / "src" / "main" / "jniLibs").exists()  # stopped before building


def test_the_fixture_agp_builds_with_its_own_default_ndk_unless_told(tmp_path, fake_ndk, fake_jdk11):
    """docs/facts.md F33: pytorch_android/build.gradle sets no ndkVersion, so AGP 4.1 wants its default NDK."""
    tree = shutil.copytree(FIXTURE_TREE, tmp_path / "pytorch")
    libs = tree / "android" / "pytorch_android" / "src" / "main" / "jniLibs" / "x86_64"
    libs.mkdir(parents=True)
    (libs / "libtorch_cpu.a").write_bytes(b"!<arch>\n")
    sdk = make_fake_sdk(tmp_path / "sdk")
    env = {"PATH": os.environ["PATH"], "ANDROID_HOME": str(sdk), "JAVA_HOME": str(fake_jdk11),
           "HOME": str(tmp_path), "ANDROID_NDK_HOME": str(fake_ndk)}  # AGP 4.1 no longer reads ANDROID_NDK_HOME
    gradlew = [str(tree / "android" / "gradlew"), "-PABI_FILTERS=x86_64", "-p", str(tree / "android"),
               "clean", "assembleRelease"]
    res = subprocess.run(gradlew, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "No version of NDK matched the requested version 21.0.6113669" in res.stdout
    init = tmp_path / "guh" / "init.d"
    init.mkdir(parents=True)
    (init / "ndk.gradle").write_text('p.android.ndkVersion = "21.4.7075529"\np.android.ndkPath = "%s"\n' % fake_ndk)
    res = subprocess.run(gradlew, env=dict(env, GRADLE_USER_HOME=str(tmp_path / "guh")), capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0 and f"(NDK 21.4.7075529 at {fake_ndk})" in res.stdout
