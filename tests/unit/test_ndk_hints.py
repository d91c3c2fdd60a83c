"""Real failure output -> the real remedy (docs/facts.md F7, F9)."""

from __future__ import annotations

from ndk_build.hints import build_hint
from toolchain import pins

# As CMake prints it for PyTorch's cmake/VulkanDependencies.cmake on NDK r25 (pytorch/pytorch#126394, #55296).
VULKAN = """CMake Error at cmake/VulkanDependencies.cmake:18 (add_library):
  Cannot find source file:

    /home/u/Android/Sdk/ndk/25.1.8937393/sources/third_party/vulkan/src/common/vulkan_wrapper.h
"""
OLD_CMAKE = "CMake Error at CMakeLists.txt:1 (cmake_minimum_required):\n  CMake 3.18 or higher is required.  You are running version 3.16.3\n"
NO_YAML = "  File \"torchgen/gen.py\", line 12, in <module>\n    import yaml\nModuleNotFoundError: No module named 'yaml'\n"


def hint(text: str) -> str:
    return build_hint(pins.lane("current"), "/src/pytorch", "/usr/bin/python3.11")(text) or ""


def test_vulkan_configure_error():
    h = hint(VULKAN)
    assert "vulkan_wrapper" in h and "r23" in h and "-DUSE_VULKAN=OFF" in h and "without --vulkan" in h


def test_old_cmake():
    assert "pip install 'cmake>=3.18'" in hint(OLD_CMAKE)


def test_missing_python_module_names_the_interpreter():
    assert "/usr/bin/python3.11 -m pip install pyyaml typing_extensions" in hint(NO_YAML)
    assert "typing_extensions" in hint("ModuleNotFoundError: No module named 'typing_extensions'")


def test_unknown_output_has_no_hint():
    assert hint("something else entirely") == ""
