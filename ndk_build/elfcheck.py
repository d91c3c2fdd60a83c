"""ELF facts of a built binary via ``readelf``: machine (``-h``) and the Android API level (``-n``)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from toolchain.errors import VerificationError
from toolchain.pins import ABI_ELF_MACHINE
from toolchain.runner import run

UNCHECKED = "unchecked"


def parse_machine(readelf_h: str) -> Optional[str]:
    m = re.search(r"^\s*Machine:\s*(.+?)\s*$", readelf_h, re.M)
    return m.group(1) if m else None


def parse_android_api_level(readelf_n: str) -> Optional[int]:
    """The API level from the ``.note.android.ident`` note (owner ``Android``, first 4 desc bytes, LE)."""
    lines = readelf_n.splitlines()
    for i, line in enumerate(lines):
        if not re.match(r"^\s*Android\s+0x[0-9a-f]+", line):
            continue
        for follow in lines[i + 1:i + 4]:
            m = re.search(r"description data:\s*((?:[0-9a-f]{2}\s*)+)", follow)
            if m:
                data = bytes(int(b, 16) for b in m.group(1).split())
                if len(data) >= 4:
                    return int.from_bytes(data[:4], "little")
        # newer binutils decode the note themselves
        for follow in lines[i + 1:i + 4]:
            m = re.search(r"(?:API level|api[_ ]level)\D*(\d+)", follow, re.I)
            if m:
                return int(m.group(1))
    return None


@dataclass(frozen=True)
class ElfFacts:
    machine: str  # readelf's name, or "unchecked"
    api_level: object  # int, or "unchecked" / "no Android note"
    machine_ok: Optional[bool]
    api_level_ok: Optional[bool]

    def to_dict(self) -> dict:
        return {"machine": self.machine, "api_level": self.api_level,
                "machine_ok": self.machine_ok, "api_level_ok": self.api_level_ok}


class Readelf:
    def __init__(self, exe: Optional[str]):
        self.exe = exe

    @classmethod
    def locate(cls) -> "Readelf":
        return cls(shutil.which("readelf") or shutil.which("llvm-readelf"))

    def verify(self, binary: Path, abi: str, api_level: int, log_path: Optional[Path] = None) -> ElfFacts:
        """Check ``binary`` is an ELF for ``abi`` built for ``api_level``; "unchecked" where readelf is missing."""
        binary = Path(binary)
        with open(binary, "rb") as f:
            if f.read(4) != b"\x7fELF":
                raise VerificationError(
                    f"{binary} is not an ELF file",
                    cause="the build did not produce an Android executable under that name",
                    remedy="look at the build log; rebuild with `invoke build-android --clean`",
                )
        if not self.exe:
            return ElfFacts(UNCHECKED, UNCHECKED, None, None)
        want = ABI_ELF_MACHINE[abi]
        machine = parse_machine(run([self.exe, "-h", binary], log_path=log_path, what="`readelf -h`").output) or "?"
        if machine != want:
            raise VerificationError(
                f"{binary.name} is an ELF for {machine}, not {want} as ABI {abi} needs",
                cause="the compiler the build used does not target that ABI (is CMAKE_TOOLCHAIN_FILE the NDK's "
                      "android.toolchain.cmake, and did -DANDROID_ABI reach CMake?)",
                remedy=f"rebuild with `invoke build-android --abi {abi} --clean` and check the NDK (`invoke doctor`)",
            )
        notes = run([self.exe, "-n", binary], log_path=log_path, what="`readelf -n`", check=False).output
        level = parse_android_api_level(notes)
        if level is None:
            return ElfFacts(machine, "no Android note", True, None)
        if level != api_level:
            raise VerificationError(
                f"{binary.name} was built for Android API level {level}, not the requested {api_level}",
                cause="scripts/build_android.sh sets ANDROID_NATIVE_API_LEVEL=21 itself; only a CMake argument "
                      "-DANDROID_NATIVE_API_LEVEL=... (which torchdroid passes) overrides it",
                remedy="rebuild with `invoke build-android --clean`; if it persists, the lane's build script "
                       "ignores the CMake argument: report it",
            )
        return ElfFacts(machine, level, True, True)
