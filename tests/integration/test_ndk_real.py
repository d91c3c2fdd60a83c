"""Opt-in runs against the real thing (cannot run on the CI machine: no NDK, no GitHub).

* ``-m ndk``: a real build-android with a real NDK from GitHub's PyTorch (an hour or more; needs
  ANDROID_NDK pointing at an NDK in the lane's range, network access to github.com and ~15 GB of
  disk), then check-compat of models converted by this machine's torch against that runtime's
  real source.  Run: ``ANDROID_NDK=/opt/android-ndk-r26d python -m pytest -m ndk tests/integration/test_ndk_real.py``
  It checks: the build runs from the default relative build dir, the binary is an ELF for the ABI at API 29,
  Vulkan was off (so NDK r23+ configures), its LOAD segments are 16 KB aligned and recorded in build-info, the
  same inputs rebuild nothing, the real v2.8.0 source defines ``Compilation.init2``, and check-compat runs.
* ``-m network``: the lanes' pins and the upstream facts of docs/facts.md against GitHub (seconds to a
  minute; network only):
  ``python -m pytest -m network tests/integration/test_ndk_real.py``
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ndk_build import BuildSettings, build_android, check_compat
from ndk_build.compat import INCOMPATIBLE, OK, RuntimeSource
from toolchain.tools.git import Git
from toolchain import pins
from toolchain.runner import run


@pytest.mark.ndk
@pytest.mark.parametrize("abi", ["arm64-v8a"])
def test_real_ndk_build_of_the_current_lane(abi, tmp_path):
    if not os.environ.get("ANDROID_NDK"):
        pytest.fail("set ANDROID_NDK to a real NDK for -m ndk runs")
    build_dir = Path(os.environ.get("TORCHDROID_NDK_TEST_BUILD", "build"))
    res = build_android(BuildSettings(build_dir=build_dir, lane=pins.DEFAULT_LANE, abi=abi, api_level=29))
    ver = res.info["verification"]
    assert ver["machine"] == pins.ABI_ELF_MACHINE[abi] and ver["api_level"] == 29
    assert res.info["commit"] == pins.LANES[pins.DEFAULT_LANE].pytorch_commit
    assert {"speed_benchmark_torch", "headers"} <= {a["name"] for a in res.info["artefacts"]}
    # docs/facts.md F5-F7: Vulkan off by default, so every NDK r23+ configures; F20/F21: 16 KB pages
    assert "-DUSE_VULKAN=OFF" in res.info["cmake_args"]
    assert res.info["page_alignment"]["speed_benchmark_torch"] >= 16384 and ver["page_16k_ok"] is True
    again = build_android(BuildSettings(build_dir=build_dir, lane=pins.DEFAULT_LANE, abi=abi, api_level=29))
    assert again.reused and again.seconds < 30

    # the real source scan: v2.8.0 defines Compilation.init2 and the operators of a conv+relu model
    src = RuntimeSource.scan(Path(res.info["source_dir"]))
    assert src.nnapi_methods and "init2" in src.nnapi_methods
    assert src.defines("aten::relu") and src.max_file_format and src.max_file_format >= 6
    from tests.ndk_support.models import make_models_and_manifest

    report = check_compat(make_models_and_manifest(tmp_path / "models"), build_info=res.build_info_path)
    assert report.status in (OK, INCOMPATIBLE)
    assert not any(f.name.endswith("init2") for f in report.missing)


@pytest.mark.network
def test_lane_tags_and_shas_match_github():
    git = Git.locate()
    current = pins.LANES["current"]
    assert git.resolve_ref(pins.PYTORCH_REPO_URL, current.pytorch_ref) == (current.pytorch_commit,
                                                                           f"refs/tags/{current.pytorch_ref}")
    assert git.resolve_ref(pins.PYTORCH_REPO_URL, "v2.9.0")[0] != current.pytorch_commit


@pytest.mark.network
@pytest.mark.parametrize("lane_name", sorted(pins.LANES))
def test_each_lanes_build_script_overwrites_the_api_level(lane_name, tmp_path):
    """Why build-android passes -DANDROID_NATIVE_API_LEVEL: read the script at the pinned commit (blobless fetch)."""
    lane = pins.LANES[lane_name]
    repo = tmp_path / "pytorch"
    repo.mkdir()
    run(["git", "init", "-q"], cwd=repo)
    run(["git", "fetch", "-q", "--depth", "1", "--filter=blob:none", pins.PYTORCH_REPO_URL, lane.pytorch_commit],
        cwd=repo)
    script = run(["git", "show", f"{lane.pytorch_commit}:scripts/build_android.sh"], cwd=repo).output
    assert 'ANDROID_NATIVE_API_LEVEL="21"' in script
    assert "BUILD_PYTORCH_MOBILE" not in script
    assert script.index("-DBUILD_BINARY=OFF") < script.index("CMAKE_ARGS+=($@)")


def _show(repo: Path, commit: str, path: str) -> str:
    return run(["git", "show", f"{commit}:{path}"], cwd=repo).output


@pytest.mark.network
def test_current_lanes_upstream_facts(tmp_path):
    """docs/facts.md F6, F7, F9, F11, F12 read at the pinned v2.8.0 commit itself (the index stored other versions)."""
    lane = pins.LANES["current"]
    repo = tmp_path / "pytorch"
    repo.mkdir()
    run(["git", "init", "-q"], cwd=repo)
    run(["git", "fetch", "-q", "--depth", "1", "--filter=blob:none", pins.PYTORCH_REPO_URL, lane.pytorch_commit],
        cwd=repo)
    cmakelists = _show(repo, lane.pytorch_commit, "CMakeLists.txt")
    assert 'cmake_dependent_option(USE_VULKAN "Use Vulkan GPU backend" ON "ANDROID" OFF)' in cmakelists
    assert "if(NOT DEFINED USE_VULKAN)" in cmakelists  # a cached value wins: the AAR seed relies on it
    vulkan = _show(repo, lane.pytorch_commit, "cmake/VulkanDependencies.cmake")
    assert "sources/third_party/vulkan/src/common" in vulkan and "vulkan_wrapper.cpp" in vulkan
    common = _show(repo, lane.pytorch_commit, "android/common.sh")
    assert 'BUILD_ROOT="$ANDROID_BUILD_ROOT"' in common and "build_android_$abi" in common
    wrapper = _show(repo, lane.pytorch_commit, "android/gradle/wrapper/gradle-wrapper.properties")
    assert f"gradle-{lane.aar_gradle}-" in wrapper
    assert f"com.android.tools.build:gradle:{lane.aar_android_gradle_plugin}" in _show(
        repo, lane.pytorch_commit, "android/build.gradle")
