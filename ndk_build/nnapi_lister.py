"""Build torchdroid's NNAPI device lister (``ndk_build/nnapi_devices``) with the NDK, beside the benchmark binary.

Deploy runs it once per phone to learn each NNAPI driver's type and feature level (the runtime's log names the
drivers but says neither; docs/facts.md NH5, NH9).  It is a plain CMake project built with the NDK's toolchain file
for the same ABI, API level and page-size flags as ``speed_benchmark_torch``.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import List

from toolchain.errors import ToolFailed
from toolchain.hardware_records import LISTER_NAME
from toolchain.runner import run
from toolchain.tools.ndk import Ndk

SOURCE_DIR = Path(__file__).resolve().parent / "nnapi_devices"


def source_digest() -> str:
    """sha256 of the lister's sources: a changed source is a changed build input."""
    h = hashlib.sha256()
    for p in sorted(SOURCE_DIR.iterdir()):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def configure_arguments(ndk: Ndk, abi: str, api_level: int, build_dir: Path) -> List[str]:
    args = ["cmake", "-S", str(SOURCE_DIR), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_TOOLCHAIN_FILE={ndk.toolchain_file}", f"-DANDROID_ABI={abi}",
            f"-DANDROID_NATIVE_API_LEVEL={api_level}", f"-DANDROID_PLATFORM=android-{api_level}"]
    return args + ndk.page_size_args()


def build_lister(ndk: Ndk, abi: str, api_level: int, out_dir: Path, log_path: Path) -> Path:
    """``<out_dir>/nnapi-lister/torchdroid_nnapi_devices`` for ``abi``; the CMake output goes to ``log_path``."""
    build_dir = Path(out_dir) / "nnapi-lister"
    shutil.rmtree(build_dir, ignore_errors=True)  # torchdroid's own directory: always configured afresh
    run(configure_arguments(ndk, abi, api_level, build_dir), log_path=log_path, what="configuring the NNAPI lister",
        keep_output=False)
    run(["cmake", "--build", str(build_dir)], log_path=log_path, what="building the NNAPI lister", keep_output=False)
    binary = build_dir / LISTER_NAME
    if not binary.is_file():
        raise ToolFailed(f"the NNAPI lister's build finished but made no {LISTER_NAME}", log_path=log_path,
                         remedy="look for torchdroid_nnapi_devices in the log; rebuild with --clean")
    return binary
