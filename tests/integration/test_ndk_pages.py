"""16 KB pages: the flags per NDK revision reach the link, and the verification refuses what is not aligned
(docs/facts.md F20, F21)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ndk_build import build_android
from tests.ndk_support import build_settings
from tests.ndk_support.fixtures import *  # noqa: F403
from toolchain.elf import load_alignment
from toolchain.errors import VerificationError
from toolchain.records import BuildInfo



settings = build_settings


def test_r27c_uses_the_ndk_option_and_the_binary_is_16k_aligned(tmp_path, fake_pytorch, ndk_releases):
    res = build_android(settings(tmp_path, fake_pytorch, ndk_releases["r27c"]))
    args = res.info["cmake_args"]
    assert "-DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON" in args
    assert not any(a.startswith("-DCMAKE_EXE_LINKER_FLAGS") for a in args)
    assert load_alignment(res.binary) == 16384
    assert BuildInfo.load(res.build_info_path).page_alignment == {"speed_benchmark_torch": 16384, "torchdroid_nnapi_devices": 16384}
    assert res.info["verification"]["page_16k_ok"] is True


def test_a_4k_aligned_binary_is_refused_and_not_recorded(tmp_path, fake_pytorch, ndk_releases):
    """The check can fail: a user flag that replaces the linker flags leaves the binary 4 KB aligned."""
    s = settings(tmp_path, fake_pytorch, ndk_releases["r26d"], cmake_args=("-DCMAKE_EXE_LINKER_FLAGS=-Wl,-O1",))
    with pytest.raises(VerificationError) as ei:
        build_android(s)
    err = ei.value
    assert "not 16 KB aligned: speed_benchmark_torch (4096 bytes)" in err.what
    assert "-Wl,-z,max-page-size=16384" in err.remedy and "16 KB memory pages" in err.cause
    assert not (s.build_dir / "android" / "x86_64" / "build-info.json").exists()
    # the same r26d without the override: the linker flag reaches the link
    ok = build_android(replace(s, cmake_args=()))
    assert "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-z,max-page-size=16384" in ok.info["cmake_args"]
    assert load_alignment(ok.binary) == 16384


def test_without_the_option_r27c_would_link_4k(tmp_path, fake_pytorch, ndk_releases):
    """The r27c fixture's toolchain only aligns when asked: turning the option off gives a 4 KB binary."""
    s = settings(tmp_path, fake_pytorch, ndk_releases["r27c"],
                 cmake_args=("-DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=OFF",))
    with pytest.raises(VerificationError) as ei:
        build_android(s)
    assert "(4096 bytes)" in ei.value.what
