"""toolchain.variants: the one variant-name format (what convert writes; make-app, deploy, verify, all read)."""

import pytest

from toolchain import variants
from toolchain.errors import UsageError


@pytest.mark.parametrize("name, parts", [
    ("quant_full", ("", "quant_full")), ("mobilenetv2-quant_core", ("mobilenetv2", "quant_core")),
    ("fp32-xnnpack", ("", "fp32-xnnpack")), ("resnet18-int8-portable", ("resnet18", "int8-portable")),
    ("mobilenet_v3_large-fp32-vulkan", ("mobilenet_v3_large", "fp32-vulkan")),
    ("full", None), ("quant_half", None), ("fp16-xnnpack", None), ("FP32-XNNPACK", None), ("fp32-qnnx", None),
    ("../quant_full", None), ("-quant_full", None), ("quant_full-cpu.pt", None), ("", None),
])
def test_split(name, parts):
    assert variants.split(name) == parts
    assert variants.is_program(name) is bool(parts and not parts[1].startswith("quant_"))


def test_check_accepts_the_kinds_asked_for():
    assert variants.check("tiny-int8-xnnpack", "--model") == "tiny-int8-xnnpack"
    with pytest.raises(UsageError, match="not a converted variant name"):
        variants.check(" quant_full", "--variant")  # no lookup would find it
    assert variants.check("quant_none", "--variant", programs=False) == "quant_none"
    with pytest.raises(UsageError, match="--variant 'fp32-xnnpack' is not a converted variant name") as ei:
        variants.check("fp32-xnnpack", "--variant", programs=False)
    assert "fp32-xnnpack" not in ei.value.remedy  # the remedy offers only what the option takes
    with pytest.raises(UsageError, match="not a converted variant name") as ei:
        variants.check("fp16-xnnpack", "--model")
    assert "fp32-xnnpack" in ei.value.remedy
    with pytest.raises(UsageError, match="unknown ExecuTorch delegate 'qnnx'") as ei:
        variants.check("fp32-qnnx", "--model")
    assert "xnnpack, portable, vulkan" in ei.value.cause


def test_with_stem_names_a_bare_variant_once():
    assert variants.with_stem("quant_full", "mobilenetv2") == "mobilenetv2-quant_full"
    assert variants.with_stem("fp32-xnnpack", "mobilenetv2") == "mobilenetv2-fp32-xnnpack"
    assert variants.with_stem("resnet18-quant_full", "mobilenetv2") == "resnet18-quant_full"


@pytest.mark.parametrize("file, found", [
    ("mobilenetv2-quant_full-cpu.pt", ("mobilenetv2", "quant_full")), ("fp32-xnnpack.pte", (None, "fp32-xnnpack")),
    ("my-net-int8-xnnpack.pte", ("my-net", "int8-xnnpack")), ("labels.txt", None),
])
def test_a_variant_in_a_file_name(file, found):
    m = variants.IN_FILE_NAME.search(file)
    assert (m.groups() if m else None) == found
