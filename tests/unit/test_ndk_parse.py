"""Pure logic of build-android, fed real recorded tool output."""

from __future__ import annotations

import os
import re
import sys

import pytest

from ndk_build.build import nearest_lane
from ndk_build.compat import FUNC_RE, SCHEMA_RE, RuntimeSource, file_format_version
from ndk_build.hints import build_hint, parse_step
from toolchain.tools.hostpython import HostPython
from toolchain.tools.ndk import Ndk, in_range, parse_revision, release_name
from toolchain.tools.git import parse_submodule_status
from toolchain.tools.sdk import AndroidSdk
from tests.ndk_support import make_fake_ndk, make_fake_sdk
from toolchain import pins
from toolchain.errors import ToolNotFound

SUBMODULE_STATUS = (
    " 3d3bd5f2bac1c1e8c5d3c2f7e6d1e7f8d0c1b2a3 third_party/XNNPACK (remotes/origin/HEAD)\n"
    "-a1b2c3d4e5f60718293a4b5c6d7e8f9012345678 third_party/eigen\n"
    "+0123456789abcdef0123456789abcdef01234567 third_party/fmt (10.2.1)\n"
)


def test_revisions_and_release_names():
    assert parse_revision("21.4.7075529") == (21, 4, 7075529)
    assert parse_revision("r21e") == (21, 4)
    assert release_name("21.4.7075529") == "r21e" and release_name("19.2.5345600") == "r19c"
    assert release_name("26.0.10792818") == "r26"
    assert release_name("28.99.99999999") == "r28 (any update)"  # a range's upper bound, not "r28\u00c4"
    assert in_range("19.2.5345600", "19.2.5345600", "21.4.7075529")
    assert not in_range("22.1.7171670", "19.2.5345600", "21.4.7075529")
    with pytest.raises(ValueError):
        parse_revision("latest")


def test_submodule_status_parsing():
    states = parse_submodule_status(SUBMODULE_STATUS)
    assert [(s.path, s.state) for s in states] == [
        ("third_party/XNNPACK", "ok"), ("third_party/eigen", "uninitialized"), ("third_party/fmt", "modified")]


def test_progress_lines():
    assert parse_step("[1234/5678] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/x.cpp.o") == (1234, 5678)
    assert parse_step("[ 42%] Building CXX object foo") == (42, 100)
    assert parse_step("-- Configuring done") is None


@pytest.mark.parametrize("output,expect", [
    ("CMake Error at CMakeLists.txt:5 (add_subdirectory):\n  The source directory\n"
     "    /src/third_party/fmt\n  does not contain a CMakeLists.txt file.", "submodule update --init --recursive"),
    ("ModuleNotFoundError: No module named 'distutils'", "use Python 3.8"),
    ("clang++: error: unknown argument: '-mfloat-abi=softfp'", "install NDK r21e"),
    ("c++: fatal error: Killed signal terminated program cc1plus", "--max-jobs 1"),
    ("ld: undefined reference to foo", None),
])
def test_build_hints(output, expect):
    hint = build_hint(pins.LANES["seed-2020"], "/src")(output)
    if expect is None:
        assert hint is None
    else:
        assert expect in hint


def test_lanes_are_consistent():
    for lane in pins.LANES.values():
        assert re.fullmatch(r"[0-9a-f]{40}", lane.pytorch_commit)
        assert parse_revision(lane.ndk_min) <= parse_revision(lane.ndk_max)
        assert lane.host_python_min <= lane.host_python_max
        assert lane.unverified, f"lane {lane.name} must say what was not verified"
        assert lane.to_dict()["name"] == lane.name
    assert pins.LANES["current"].pytorch_commit == "ba56102387ef21a3b04b357e5b183d48f0afefc7"
    assert pins.LANES["current"].pytorch_ref == "v2.8.0"
    assert nearest_lane("2021-03-01").name == "seed-2020"
    assert nearest_lane("2026-11-23T10:00:00+00:00").name == "current"


def test_ndk_lookup_order_and_messages(tmp_path):
    a = make_fake_ndk(tmp_path / "a", "21.4.7075529")
    b = make_fake_ndk(tmp_path / "b", "25.2.9519653")
    sdk = tmp_path / "sdk"
    make_fake_ndk(sdk / "ndk" / "21.4.7075529", "21.4.7075529")
    make_fake_ndk(sdk / "ndk" / "27.0.12077973", "27.0.12077973")
    seed = pins.LANES["seed-2020"]
    assert Ndk.locate(str(a), str(b), {"ANDROID_NDK": str(b)}).found_by == "--ndk"
    assert Ndk.locate(None, str(b), {"ANDROID_NDK": str(a)}).found_by == "config ndk.path"
    assert Ndk.locate(None, None, {"ANDROID_NDK_HOME": str(b), "ANDROID_NDK": str(a)}).path == a.resolve()
    # ANDROID_HOME/ndk/*: the newest that fits the lane
    found = Ndk.locate(None, None, {"ANDROID_HOME": str(sdk)}, seed)
    assert found.revision == "21.4.7075529" and found.found_by == "ANDROID_HOME/ndk/21.4.7075529"
    assert Ndk.locate(None, None, {"ANDROID_HOME": str(sdk)}).revision == "27.0.12077973"
    bundle = make_fake_ndk(tmp_path / "sdk2" / "ndk-bundle", "20.1.5948944")
    assert Ndk.locate(None, None, {"ANDROID_SDK_ROOT": str(bundle.parent)}).found_by == "ANDROID_SDK_ROOT/ndk-bundle"
    with pytest.raises(ToolNotFound) as ei:
        Ndk.locate(None, None, {"ANDROID_NDK": str(b)}, seed).check(seed)
    assert "r25c (25.2.9519653), too new for lane 'seed-2020'" in str(ei.value)
    assert "install NDK r21e (21.4.7075529)" in str(ei.value)
    with pytest.raises(ToolNotFound) as ei:
        Ndk.locate(str(tmp_path / "nothing"), None, {})
    assert "is not an Android NDK: it has no source.properties" in str(ei.value)
    (a / "build" / "cmake" / "android.toolchain.cmake").unlink()
    with pytest.raises(ToolNotFound) as ei:
        Ndk.from_dir(a).check(seed)
    assert "has no build/cmake/android.toolchain.cmake" in str(ei.value)


def test_sdk_lookup(tmp_path):
    assert AndroidSdk.find(None, {}) is None
    sdk = make_fake_sdk(tmp_path / "sdk")
    assert AndroidSdk.find(None, {"ANDROID_SDK_ROOT": str(sdk)}).found_by == "ANDROID_SDK_ROOT"
    with pytest.raises(ToolNotFound) as ei:
        AndroidSdk.locate(None, {"ANDROID_HOME": str(tmp_path)})
    assert "no Android SDK found" in str(ei.value) and "sdkmanager" in str(ei.value)


def test_host_python_is_probed_for_real():
    hp = HostPython.locate(sys.executable)
    assert hp.version[:2] == sys.version_info[:2]
    assert hp.fits(pins.LANES["current"])
    with pytest.raises(ToolNotFound) as ei:
        HostPython.locate("/nonexistent/python3.8")
    assert "pytorch.python" in str(ei.value)


def test_source_scanning_regexes(tmp_path):
    yaml = "- func: add.Tensor(Tensor self, Tensor other) -> Tensor\n- func: relu(Tensor self) -> Tensor\n"
    assert FUNC_RE.findall(yaml) == [("add", "Tensor"), ("relu", "")]
    cpp = 'm.def(TORCH_SELECTIVE_SCHEMA("quantized::conv2d.new(Tensor qx, ...) -> Tensor"));'
    assert SCHEMA_RE.findall(cpp) == ["quantized::conv2d.new"]


def test_file_format_version_from_archive(tmp_path):
    import zipfile

    p = tmp_path / "m.pt"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("m/data.pkl", b"")
        z.writestr("m/.data/version", b"6\n")
    assert file_format_version(p) == 6
    assert os.path.getsize(p) > 0


def test_host_python_without_the_build_modules_is_refused(tmp_path):
    import venv

    venv.EnvBuilder(with_pip=False).create(tmp_path / "bare")
    hp = HostPython.locate(str(tmp_path / "bare" / "bin" / "python"))
    assert "yaml" in hp.missing_modules
    with pytest.raises(ToolNotFound) as ei:
        hp.check(pins.LANES["current"])
    assert "lacks yaml" in str(ei.value) and "-m pip install pyyaml" in str(ei.value)
    assert HostPython.locate(sys.executable).missing_modules == ()


def test_runtime_source_scan_understands_macro_defined_overloads(tmp_path):
    runtime = tmp_path / "torch" / "csrc" / "jit" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "register_prim_ops.cpp").write_text(
        "    DEFINE_INT_OP(aten::__and__, a & b),\n"
        "    DEFINE_COMPARISON_OP(aten::ne, a != b),\n"
        '    OperatorGeneratorArgs(TORCH_SELECTIVE_SCHEMA("aten::len.t(t[] a) -> int"), listLen, aliasAnalysisFromSchema()),\n')
    src = RuntimeSource.scan(tmp_path)
    assert src.defines("aten::ne.int") and src.defines("aten::__and__.int") and src.defines("aten::len.t")
    assert not src.defines("aten::len.str") and not src.defines("aten::relu")
    assert src.nnapi_methods is None and src.max_file_format is None


def test_pins_name_the_newest_published_runtime_and_the_unavailable_seed_runtime():
    """docs/facts.md F18, F19: pytorch_android 2.1.0 is the newest on Maven Central; 1.8.0-SNAPSHOT is gone."""
    from toolchain import pins

    assert pins.PYTORCH_ANDROID_DEFAULT == "2.1.0"
    seed = pins.lane("seed-2020")
    assert seed.pytorch_android == "1.8.0-SNAPSHOT" and seed.app_runtime_available is False
    assert "2025-06-30" in seed.app_runtime_unavailable_reason and "OSSRH" in seed.app_runtime_unavailable_reason
    current = pins.lane("current")
    assert current.vulkan_default_on and current.aar_gradle == "6.8.3" and current.ndk_recommended_revision
    assert current.ndk_recommended.split()[0] == "r26d" and current.ndk_recommended_revision == "26.3.11579264"
