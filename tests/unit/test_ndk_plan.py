"""build-android's steps alone: CMake arguments per NDK, the AAR's Gradle pins and cache seed, up-to-date."""

from __future__ import annotations

import json
from pathlib import Path

from ndk_build.aar import GradlePins, cache_entries, seed_cache
from ndk_build.build import BuildSettings, Target, Tools, cmake_arguments, resolve_target, up_to_date
from tests.ndk_support import FIXTURE_TREE, make_ndk_release
from toolchain import pins
from toolchain.tools.hostpython import HostPython
from toolchain.tools.ndk import Ndk


def _target(tmp_path: Path) -> Target:
    return resolve_target(BuildSettings(build_dir=tmp_path / "build", commit="b" * 40, abi="arm64-v8a"))


def _tools(ndk_dir: Path) -> Tools:
    return Tools(HostPython(Path("/usr/bin/python3"), (3, 11, 2)), Ndk.from_dir(ndk_dir), None, None)


def test_resolve_target_makes_every_path_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    t = resolve_target(BuildSettings(build_dir=Path("build"), commit="c" * 40, abi="x86_64"))
    assert t.out_dir == tmp_path / "build" / "android" / "x86_64" and t.out_dir.is_absolute()
    assert t.source_dir == tmp_path / "build" / "src" / ("pytorch-" + "c" * 12)
    assert t.build_root == t.out_dir / "cmake" and t.custom and t.lane.name == pins.DEFAULT_LANE


def test_cmake_arguments_per_ndk_and_vulkan(tmp_path):
    target = _target(tmp_path)
    r26d = cmake_arguments(target, _tools(make_ndk_release(tmp_path, "r26d")), False, ("-DUSER=1",))
    assert r26d[:3] == ["-DANDROID_ABI=arm64-v8a", "-DANDROID_NATIVE_API_LEVEL=29", "-DBUILD_BINARY=ON"]
    assert "-DUSE_VULKAN=OFF" in r26d and "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-z,max-page-size=16384" in r26d
    assert r26d[-1] == "-DUSER=1"  # the user's arguments last: they win
    r27c = cmake_arguments(target, _tools(make_ndk_release(tmp_path, "r27c")), True, ())
    assert "-DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON" in r27c and "-DUSE_VULKAN=OFF" not in r27c


def test_gradle_pins_come_from_the_checkout(tmp_path):
    from_tree = GradlePins.from_checkout(FIXTURE_TREE, pins.lane("current"))
    assert (from_tree.gradle, from_tree.agp) == ("6.8.3", "4.1.2") and "checkout" in from_tree.source
    other = tmp_path / "src"
    (other / "android" / "gradle" / "wrapper").mkdir(parents=True)
    (other / "android" / "gradle" / "wrapper" / "gradle-wrapper.properties").write_text(
        "distributionUrl=https\\://services.gradle.org/distributions/gradle-8.1.1-all.zip\n")
    assert GradlePins.from_checkout(other, pins.lane("current")).gradle == "8.1.1"
    assert GradlePins.from_checkout(tmp_path / "none", pins.lane("current")).agp == "4.1.2"  # the lane's pin


def test_seed_cache_writes_once_and_starts_over_when_settings_change(tmp_path):
    tree = tmp_path / "aar" / "build_android_arm64-v8a"
    seed_cache(tree, {"USE_VULKAN": ("BOOL", "OFF")})
    cache = tree / "CMakeCache.txt"
    assert "USE_VULKAN:BOOL=OFF" in cache.read_text()
    (tree / "CMakeFiles").mkdir()
    cache.write_text(cache.read_text() + "CMAKE_HOME_DIRECTORY:INTERNAL=/src\n")  # as after a configure
    seed_cache(tree, {"USE_VULKAN": ("BOOL", "OFF")})
    assert (tree / "CMakeFiles").is_dir()  # same settings: the configured tree is kept
    seed_cache(tree, {"USE_VULKAN": ("BOOL", "ON")})
    assert not (tree / "CMakeFiles").exists() and "USE_VULKAN:BOOL=ON" in cache.read_text()


def test_cache_entries_follow_the_ndk(tmp_path):
    from types import SimpleNamespace

    plan = SimpleNamespace(tools=_tools(make_ndk_release(tmp_path, "r21e")))
    entries = cache_entries(plan, vulkan=False)
    assert entries["USE_VULKAN"] == ("BOOL", "OFF")
    assert entries["CMAKE_EXE_LINKER_FLAGS"] == ("STRING", "-Wl,-z,max-page-size=16384")


def test_up_to_date_ignores_an_unreadable_record(tmp_path):
    from types import SimpleNamespace

    info = tmp_path / "build-info.json"
    info.write_text("{broken")
    plan = SimpleNamespace(info_path=info, inputs_key="k", target=SimpleNamespace(out_dir=tmp_path))
    assert up_to_date(plan) is None
    info.write_text(json.dumps({"kind": "torchdroid.build-info", "schema": 1, "inputs_key": "other",
                                "artefacts": []}))
    assert up_to_date(plan) is None
