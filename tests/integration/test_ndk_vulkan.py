"""PyTorch v2.8.0's Vulkan default against fixture NDKs of each revision (docs/facts.md F5-F8, F22).

The fixture tree's CMake turns USE_VULKAN on for Android and then needs the NDK's vulkan_wrapper sources,
which only the r21e fixture has -- so a plain upstream-style build fails with r23c/r26d/r27c, as the real
one does (pytorch/pytorch#126394), and torchdroid's -DUSE_VULKAN=OFF is what makes it pass.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from ndk_build import build_android
from tests.ndk_support import NDK_REVISIONS
from tests.ndk_support import build_settings
from tests.ndk_support.fixtures import *  # noqa: F403
from toolchain.errors import ToolFailed, ToolNotFound
from toolchain.tools.ndk import Ndk



settings = build_settings


def test_fixture_ndk_layouts_per_revision(ndk_releases):
    seen = {}
    for release, path in ndk_releases.items():
        ndk = Ndk.from_dir(path, "--ndk")
        assert ndk.release == release and ndk.revision == NDK_REVISIONS[release]
        assert ndk.toolchain_file.is_file() and (path / "toolchains/llvm/prebuilt/linux-x86_64/bin").is_dir()
        seen[release] = (ndk.has_vulkan_wrapper, (path / "platforms").is_dir(), ndk.has_flexible_page_sizes_option)
    assert seen == {"r21e": (True, True, False), "r23c": (False, False, False),
                    "r26d": (False, False, False), "r27c": (False, False, True)}
    assert Ndk.from_dir(ndk_releases["r26d"]).page_size_args() == [
        "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-z,max-page-size=16384", "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-z,max-page-size=16384"]
    assert Ndk.from_dir(ndk_releases["r27c"]).page_size_args() == ["-DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON"]


def test_r26d_fails_without_the_vulkan_fix_and_builds_with_it(tmp_path, fake_pytorch, ndk_releases):
    r26d = ndk_releases["r26d"]
    # without the fix: the user's last -D wins over torchdroid's -DUSE_VULKAN=OFF, as the script orders them
    s = settings(tmp_path, fake_pytorch, r26d, cmake_args=("-DUSE_VULKAN=ON",))
    with pytest.raises(ToolFailed) as ei:
        build_android(s)
    log = (s.build_dir / "android" / "x86_64" / "build.log").read_text()
    assert "Cannot find source file" in log and "vulkan_wrapper" in log
    assert "NDK r23 and later do not have" in (ei.value.remedy or "") and "pytorch/pytorch#126394" in ei.value.remedy
    assert not (s.build_dir / "android" / "x86_64" / "build-info.json").exists()
    # with the fix (the default): it builds, and the CMake cache says Vulkan is off
    res = build_android(replace(s, cmake_args=()))
    assert "-DUSE_VULKAN=OFF" in res.info["cmake_args"] and res.info["vulkan"] is False
    cache = (s.build_dir / "android" / "x86_64" / "cmake" / "CMakeCache.txt").read_text()
    assert re.search(r"^USE_VULKAN:[A-Z]+=OFF$", cache, re.M)
    assert res.info["ndk"]["release"] == "r26d" and res.info["ndk"]["vulkan_wrapper"] is False


def test_vulkan_flag_needs_the_wrapper_and_stops_before_fetching(tmp_path, fake_pytorch, ndk_releases):
    s = settings(tmp_path, fake_pytorch, ndk_releases["r26d"], commit=None, vulkan=True,
                 python=None)  # the lane's own pin: tools are checked before any fetch
    with pytest.raises(ToolNotFound) as ei:
        build_android(s)
    msg = str(ei.value)
    assert "--vulkan needs an NDK with sources/third_party/vulkan/src/common/vulkan_wrapper.h" in msg
    assert "drop --vulkan" in msg and "ndk;21.4.7075529" in msg
    assert not (s.build_dir / "src").exists()


def test_vulkan_with_r21e_builds_the_wrapper(tmp_path, fake_pytorch, ndk_releases):
    res = build_android(settings(tmp_path, fake_pytorch, ndk_releases["r21e"], vulkan=True))
    assert res.info["vulkan"] is True and "-DUSE_VULKAN=OFF" not in res.info["cmake_args"]
    assert "libVulkanWrapper.a" in {a["name"] for a in res.info["artefacts"]}
