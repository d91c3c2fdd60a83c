"""The ExecuTorch app's checks alone (no torch, no conversion): program names, the runtime choice, the AAR."""

import zipfile
from pathlib import Path

import pytest

from appgen import executorch_app
from appgen.runtime import Runtime
from toolchain import pins, variants
from toolchain.errors import UsageError
from toolchain.records import PteFile
from toolchain.records import TensorSpec

CURRENT = pins.LANES[pins.DEFAULT_LANE]


@pytest.mark.parametrize("name, program", [
    ("fp32-xnnpack", True), ("int8-xnnpack", True), ("mobilenetv2-fp32-portable", True), ("fp32-vulkan", True),
    ("quant_full", False), ("mobilenetv2-quant_core", False), ("fp16-xnnpack", False), ("FP32-XNNPACK", False),
    ("fp32-", False), ("../fp32-xnnpack", False), ("fp32-xnnpack.pte", False),
])
def test_which_names_are_programs(name, program):
    assert variants.is_program(name) is program


def test_the_convert_command_for_a_missing_program():
    assert executorch_app.convert_command(Path("build/models"), "int8-xnnpack") == \
        "invoke convert --format executorch --delegates xnnpack --quant full --out build/models"
    assert "--delegates portable --quant none " in executorch_app.convert_command(Path("m"), "fp32-portable")
    assert "--model MODEL" in executorch_app.convert_command(Path("m"), "resnet18-fp32-portable")


def test_min_sdk_is_raised_to_the_library_s():
    assert executorch_app.min_sdk(21) == pins.EXECUTORCH_ANDROID_MIN_SDK == 23
    assert executorch_app.min_sdk(26) == 26
    assert executorch_app.min_sdk("x") == "x"  # left for validate.sdk_levels to name


def _aar(path: Path, entries) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name in entries:
            z.writestr(name, b"x")
    return path


def test_runtime_choice(tmp_path):
    maven = executorch_app.choose_runtime(CURRENT, None, None, ("arm64-v8a",))
    assert (maven.library, maven.source, maven.executorch_android) == ("executorch", "maven", "1.5.1")
    assert maven.label == "maven org.pytorch:executorch-android:1.5.1"
    assert maven.to_dict()["library"] == "executorch"
    other = executorch_app.choose_runtime(CURRENT, "1.3.1", None, ("x86_64",))
    assert other.executorch_android == "1.3.1"
    with pytest.raises(UsageError, match="no native library for x86"):
        executorch_app.choose_runtime(CURRENT, None, None, ("arm64-v8a", "x86"))
    with pytest.raises(UsageError, match="both given"):
        executorch_app.choose_runtime(CURRENT, "1.0.1", tmp_path / "executorch.aar", ("arm64-v8a",))
    with pytest.raises(UsageError, match="compiles against API 30"):
        executorch_app.choose_runtime(pins.LANES["seed-2020"], None, None, ("arm64-v8a",))
    aar = _aar(tmp_path / "executorch.aar", ["AndroidManifest.xml", "classes.jar", "jni/arm64-v8a/libexecutorch.so",
                                             "jni/x86_64/libexecutorch.so"])
    local = executorch_app.choose_runtime(CURRENT, None, aar, ("arm64-v8a", "x86_64"))
    assert local.source == "aar" and local.aar == aar.resolve() and local.label == "aar executorch.aar"


def test_a_legacy_runtime_record_is_unchanged():
    legacy = Runtime("maven", "1.13.1", None, "current", True)
    assert "library" not in legacy.to_dict() and legacy.label == "maven 1.13.1"


def _pte(delegate="xnnpack", version="1.5.1") -> PteFile:
    spec = TensorSpec([1, 3, 224, 224], "float32")
    return PteFile(file=f"m-fp32-{delegate}.pte", path=Path("/x"), sha256="0" * 64, size=1, model="m", stem="m",
                   precision="fp32", delegate=delegate, input=spec, output=TensorSpec([1, 10], "float32"),
                   baseline="quant_none", runs_on_host=True, executorch={"version": version, "git_version": "3b6068392"},
                   torch={"version": "2.14.1"})


def test_program_checks_and_warnings(tmp_path):
    maven = executorch_app.choose_runtime(CURRENT, None, None, ("arm64-v8a",))  # the default: the exporter's release
    assert executorch_app.check_program(_pte(), maven) == [] and executorch_app.matches_converter(_pte(), maven)
    old = executorch_app.choose_runtime(CURRENT, "1.0.1", None, ("arm64-v8a",))  # the user's explicit override
    assert any("1.0.1 is not the ExecuTorch 1.5.1" in w for w in executorch_app.check_program(_pte(), old))
    assert executorch_app.matches_converter(_pte(), old) is False
    with pytest.raises(UsageError, match="cannot run the vulkan program"):
        executorch_app.check_program(_pte("vulkan"), maven)
    aar = _aar(tmp_path / "executorch.aar", ["AndroidManifest.xml", "classes.jar", "jni/arm64-v8a/libexecutorch.so"])
    local = executorch_app.choose_runtime(CURRENT, None, aar, ("arm64-v8a",))
    warnings = executorch_app.check_program(_pte("vulkan"), local)
    assert any("EXECUTORCH_BUILD_VULKAN=ON" in w for w in warnings) and any("3b6068392" in w for w in warnings)
    assert executorch_app.matches_converter(_pte(), local) is None


def test_option_mixups_are_refused():
    class S:
        aar = None
        pytorch_android = "1.13.1"
        executorch_aar = None
        executorch_android = None

    with pytest.raises(UsageError, match="--pytorch-android given for the ExecuTorch program"):
        executorch_app.refuse_other_runtime_options("fp32-xnnpack", S)
    executorch_app.refuse_other_runtime_options("quant_full", S)  # fine for a TorchScript variant
    S.pytorch_android, S.executorch_android = None, "1.0.1"
    with pytest.raises(UsageError, match="--executorch-android given for the TorchScript variant"):
        executorch_app.refuse_other_runtime_options("quant_full", S)
