"""Opt-in (-m ndk): a real build-android with a real NDK from GitHub's PyTorch (takes an hour or more).

Needs ANDROID_NDK pointing at an NDK in the lane's range, network access to github.com and
~15 GB of disk.  Run: ANDROID_NDK=/opt/android-ndk-r26d python -m pytest -m ndk -k real
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ndk_build import BuildSettings, build_android
from toolchain import pins

pytestmark = pytest.mark.ndk


@pytest.mark.parametrize("abi", ["arm64-v8a"])
def test_real_ndk_build_of_the_current_lane(abi):
    if not os.environ.get("ANDROID_NDK"):
        pytest.fail("set ANDROID_NDK to a real NDK for -m ndk runs")
    build_dir = Path(os.environ.get("TORCHDROID_NDK_TEST_BUILD", "build"))
    res = build_android(BuildSettings(build_dir=build_dir, lane=pins.DEFAULT_LANE, abi=abi, api_level=29))
    ver = res.info["verification"]
    assert ver["machine"] == pins.ABI_ELF_MACHINE[abi] and ver["api_level"] == 29
    assert res.info["commit"] == pins.LANES[pins.DEFAULT_LANE].pytorch_commit
    again = build_android(BuildSettings(build_dir=build_dir, lane=pins.DEFAULT_LANE, abi=abi, api_level=29))
    assert again.reused
