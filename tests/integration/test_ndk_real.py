"""Opt-in runs against the real thing (cannot run on the CI machine: no NDK, no GitHub).

* ``-m ndk``: a real build-android with a real NDK from GitHub's PyTorch (an hour or more; needs
  ANDROID_NDK pointing at an NDK in the lane's range, network access to github.com and ~15 GB of
  disk), then check-compat of models converted by this machine's torch against that runtime's
  real source.  Run: ``ANDROID_NDK=/opt/android-ndk-r26d python -m pytest -m ndk tests/integration/test_ndk_real.py``
* ``-m network``: the lanes' pins against GitHub (seconds to a minute; network only):
  ``python -m pytest -m network tests/integration/test_ndk_real.py``
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ndk_build import BuildSettings, build_android, check_compat
from ndk_build.compat import INCOMPATIBLE, OK, RuntimeSource
from ndk_build.gitsource import Git
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
