"""Turn a failed build's output into the likely cause and the exact remedy."""

from __future__ import annotations

import re
from typing import Callable, Optional

from toolchain.pins import Lane

PATTERNS = (
    # (regex, remedy template); the first match wins
    (r"does not contain a CMakeLists\.txt file|third_party/[\w.-]+/[^\s]*: No such file or directory"
     r"|fatal error: [^\s]*third_party[^\s]*: No such file",
     "a submodule is missing or empty: run `git -C {source} submodule update --init --recursive`, then "
     "`invoke build-android` again"),
    (r"No module named '?distutils'?|SyntaxError|invalid syntax|No module named '?(yaml|typing_extensions)'?",
     "the host Python does not suit the build scripts: use Python {py_high} with pyyaml and typing_extensions "
     "(--python / pytorch.python)"),
    (r"No CMAKE_(C|CXX)_COMPILER could be found|clang(\+\+)?: error: unknown argument|"
     r"unsupported option|Invalid Android ABI|is not supported by this NDK|android\.toolchain\.cmake|"
     r"error: unknown target CPU|requires NDK|NDK r?\d+ is not supported",
     "the NDK does not suit this commit: install NDK {ndk} and set ANDROID_NDK to it (or --ndk)"),
    (r"Killed signal terminated program|virtual memory exhausted|out of memory|c\+\+: fatal error: Killed",
     "the compiler ran out of memory: lower the parallelism with `--max-jobs 1` (config android.max_jobs)"),
    (r"No space left on device",
     "the disk is full: free space under the build directory and run again"),
)


def build_hint(lane: Lane, source: str) -> Callable[[str], Optional[str]]:
    def hint(output: str) -> Optional[str]:
        for pattern, remedy in PATTERNS:
            if re.search(pattern, output):
                return remedy.format(source=source, ndk=lane.ndk_recommended,
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
