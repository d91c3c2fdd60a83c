"""Verify what build-android built: machine, Android API level and 16 KB page alignment.

The ELF facts come from :mod:`toolchain.elf` (pure Python, so no check is ever skipped for a missing
``readelf``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, Optional

from toolchain.elf import ABIS_16K, PAGE_16K, read_elf
from toolchain.errors import VerificationError
from toolchain.pins import ABI_ELF_MACHINE


@dataclass(frozen=True)
class ElfFacts:
    machine: str
    api_level: object  # int, or "no Android note"
    machine_ok: Optional[bool]
    api_level_ok: Optional[bool]
    load_alignment: Optional[int] = None  # the binary's smallest LOAD p_align
    page_16k_ok: Optional[bool] = None  # None: the ABI has no 16 KB page devices

    def to_dict(self) -> dict:
        return {"machine": self.machine, "api_level": self.api_level,
                "machine_ok": self.machine_ok, "api_level_ok": self.api_level_ok,
                "load_alignment": self.load_alignment, "page_16k_ok": self.page_16k_ok}


def verify_binary(binary: Path, abi: str, api_level: int) -> ElfFacts:
    """``binary`` is an ELF for ``abi`` built for ``api_level``; VerificationError with the remedy otherwise."""
    binary = Path(binary)
    elf = read_elf(binary)
    want = ABI_ELF_MACHINE[abi]
    if elf.machine != want:
        raise VerificationError(
            f"{binary.name} is an ELF for {elf.machine}, not {want} as ABI {abi} needs",
            cause="the compiler the build used does not target that ABI (is CMAKE_TOOLCHAIN_FILE the NDK's "
                  "android.toolchain.cmake, and did -DANDROID_ABI reach CMake?)",
            remedy=f"rebuild with `invoke build-android --abi {abi} --clean` and check the NDK (`invoke doctor`)",
        )
    level = elf.android_api_level
    if level is not None and level != api_level:
        raise VerificationError(
            f"{binary.name} was built for Android API level {level}, not the requested {api_level}",
            cause="scripts/build_android.sh sets ANDROID_NATIVE_API_LEVEL=21 itself; only a CMake argument "
                  "-DANDROID_NATIVE_API_LEVEL=... (which torchdroid passes) overrides it",
            remedy="rebuild with `invoke build-android --clean`; if it persists, the lane's build script "
                   "ignores the CMake argument: report it",
        )
    page_ok = elf.load_alignment >= PAGE_16K if abi in ABIS_16K else None
    return ElfFacts(elf.machine, level if level is not None else "no Android note", True,
                    None if level is None else True, elf.load_alignment, page_ok)


def verify_page_alignment(files: Iterable[Path], abi: str) -> Dict[str, int]:
    """LOAD alignment of every file (name -> bytes); on a 16 KB-page ABI each must be >= 16384."""
    aligns = {Path(f).name: read_elf(f).load_alignment for f in files}
    short = {name: a for name, a in aligns.items() if a < PAGE_16K}
    if abi in ABIS_16K and short:
        listed = ", ".join(f"{name} ({a} bytes)" for name, a in sorted(short.items()))
        raise VerificationError(
            f"not 16 KB aligned: {listed}",
            cause="Android 15+ devices with 16 KB memory pages cannot load native code whose LOAD segments are "
                  "aligned to 4 KB; the linker flags for 16 KB pages (-DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON on "
                  "NDK r27+, -Wl,-z,max-page-size=16384 before) did not reach these files",
            remedy="rebuild with `invoke build-android --clean`; if a --cmake-arg overrides "
                   "CMAKE_SHARED_LINKER_FLAGS / CMAKE_EXE_LINKER_FLAGS, add -Wl,-z,max-page-size=16384 to it",
        )
    return aligns

