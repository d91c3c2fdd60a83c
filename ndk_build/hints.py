"""Turn a failed build's output into the likely cause and the exact remedy.

Each pattern is a failure real builds meet (docs/facts.md names the sources): the Vulkan configure error of
PyTorch >= 1.8 on NDK r23+, a host Python without the code generators' modules, a CMake older than the
tree's ``cmake_minimum_required``, a missing submodule, an NDK that does not suit, memory and disk.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from toolchain.pins import Lane

PATTERNS = (
    # (regex, remedy template); the first match wins
    (r"vulkan_wrapper\.(?:h|cpp)|VulkanDependencies\.cmake.*(?:Cannot find source|add_library)",
     "PyTorch's USE_VULKAN=ON needs the NDK's sources/third_party/vulkan/src/common/vulkan_wrapper.{{h,cpp}}, which "
     "NDK r23 and later do not have (pytorch/pytorch#126394): build without --vulkan (torchdroid then passes "
     "-DUSE_VULKAN=OFF) or use NDK r21e for --vulkan"),
    (r"CMake (\d+(?:\.\d+)*) or higher is required|cmake_minimum_required.*VERSION",
     "this PyTorch needs a newer CMake: `pip install 'cmake>=3.18'` in the environment that runs invoke (or "
     "install a newer CMake from https://cmake.org/download/), then `invoke build-android` again"),
    (r"does not contain a CMakeLists\.txt file|third_party/[\w.-]+/[^\s]*: No such file or directory"
     r"|fatal error: [^\s]*third_party[^\s]*: No such file",
     "a submodule is missing or empty: run `git -C {source} submodule update --init --recursive`, then "
     "`invoke build-android` again"),
    (r"No module named '?(yaml|typing_extensions)'?",
     "the host Python lacks a module PyTorch's code generators import: `{python} -m pip install pyyaml "
     "typing_extensions` (or point --python / pytorch.python at a Python {py_high} that has them)"),
    (r"No module named '?distutils'?|SyntaxError|invalid syntax",
     "the host Python does not suit the build scripts: use Python {py_high} with pyyaml and typing_extensions "
     "(--python / pytorch.python)"),
    (r"CMAKE_MAKE_PROGRAM is not set|Unable to find the ninja|ninja: command not found|"
     r"Could not find (?:ninja|make)",
     "no build program: install ninja (`sudo apt-get install ninja-build` or `pip install ninja`)"),
    (r"No CMAKE_(C|CXX)_COMPILER could be found|clang(\+\+)?: error: unknown argument|"
     r"unsupported option|Invalid Android ABI|is not supported by this NDK|android\.toolchain\.cmake|"
     r"error: unknown target CPU|requires NDK|NDK r?\d+ is not supported",
     "the NDK does not suit this commit: install NDK {ndk} and set ANDROID_NDK to it (or --ndk)"),
    (r"Killed signal terminated program|virtual memory exhausted|out of memory|c\+\+: fatal error: Killed",
     "the compiler ran out of memory: lower the parallelism with `--max-jobs 1` (config android.max_jobs)"),
    (r"No space left on device",
     "the disk is full: free space under the build directory and run again"),
)


def build_hint(lane: Lane, source: str, python: str = "python3") -> Callable[[str], Optional[str]]:
    def hint(output: str) -> Optional[str]:
        for pattern, remedy in PATTERNS:
            if re.search(pattern, output):
                return remedy.format(source=source, ndk=lane.ndk_recommended, python=python,
                                     py_high=".".join(map(str, lane.host_python_max)))
        return None

    return hint


STEP_RE = re.compile(r"^\[(\d+)/(\d+)\]")
PERCENT_RE = re.compile(r"^\[\s*(\d+)%\]")


def parse_step(line: str):
    """``(done, total)`` from a ninja ``[n/N]`` or make ``[ 42%]`` line, else None."""
    m = STEP_RE.match(line)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = PERCENT_RE.match(line)
    if m:
        return int(m.group(1)), 100
    return None
