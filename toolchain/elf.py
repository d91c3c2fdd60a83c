"""ELF facts every stage can ask about a native file, read with Python alone (no readelf needed).

* :func:`read_elf` -> :class:`ElfFile`: class (32/64 bit), machine, the ``PT_LOAD`` segments' alignments
  and the Android API level from the ``.note.android.ident`` note (what the NDK's crtbegin adds).
* :func:`load_alignment` -> the smallest ``p_align`` of the ``PT_LOAD`` segments: 4096 for a file linked
  for 4 KB pages, 16384 (or more) for one that loads on Android 15+ devices with 16 KB pages.
* :func:`page_size_problem` -> why a file cannot load on a device with a given page size, or None.

Facts (docs/facts.md): Android 15+ devices may use 16 KB pages; a native library or executable whose
LOAD segments are aligned to less than the device's page size fails to load there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple, Union

from .errors import VerificationError

PT_LOAD = 1
PT_NOTE = 4
PAGE_4K = 4096
PAGE_16K = 16384
# e_machine -> the name `readelf -h` prints (the names toolchain.pins.ABI_ELF_MACHINE uses)
MACHINES = {3: "Intel 80386", 40: "ARM", 62: "Advanced Micro Devices X86-64", 183: "AArch64"}
# ABIs whose Android devices can have 16 KB pages (the NDK's flexible page size option covers these)
ABIS_16K = ("arm64-v8a", "x86_64")


@dataclass(frozen=True)
class ElfFile:
    path: Path
    bits: int  # 32 or 64
    machine: str  # readelf's name, or "e_machine N"
    load_aligns: Tuple[int, ...]  # p_align of every PT_LOAD segment, in file order
    android_api_level: Optional[int]  # None: no Android note

    @property
    def load_alignment(self) -> int:
        """The smallest LOAD alignment (0 when the file has no LOAD segment, e.g. a relocatable object)."""
        return min(self.load_aligns) if self.load_aligns else 0

    def supports_page_size(self, page_size: int) -> bool:
        return bool(self.load_aligns) and self.load_alignment >= page_size

    def to_dict(self) -> dict:
        return {"machine": self.machine, "bits": self.bits, "load_alignment": self.load_alignment,
                "android_api_level": self.android_api_level}


def _not_elf(path: Path, why: str) -> VerificationError:
    return VerificationError(f"{path} is not a readable ELF file ({why})",
                             cause="the build did not produce an Android executable or library under that name",
                             remedy="look at the build log; rebuild with `invoke build-android --clean`")


def _android_note(data: bytes, offset: int, size: int, endian: str) -> Optional[int]:
    """The API level in an ``Android`` note (type 1, first 4 bytes of the description)."""
    pos, end = offset, offset + size
    while pos + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from(endian + "III", data, pos)
        name_at = pos + 12
        desc_at = name_at + ((namesz + 3) & ~3)
        name = data[name_at:name_at + namesz].rstrip(b"\0")
        if name == b"Android" and ntype == 1 and descsz >= 4:
            return struct.unpack_from(endian + "I", data, desc_at)[0]
        pos = desc_at + ((descsz + 3) & ~3)
    return None


def read_elf(path: Union[str, Path]) -> ElfFile:
    """Parse the ELF header and program headers of ``path``; VerificationError when it is not an ELF."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise _not_elf(path, f"{type(e).__name__}: {e}") from e
    if len(data) < 52 or data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise _not_elf(path, "no ELF header")
    bits = 32 if data[4] == 1 else 64
    endian = "<" if data[5] == 1 else ">"
    try:
        if bits == 64:
            e_machine, = struct.unpack_from(endian + "H", data, 18)
            e_phoff, = struct.unpack_from(endian + "Q", data, 32)
            e_phentsize, e_phnum = struct.unpack_from(endian + "HH", data, 54)
        else:
            e_machine, = struct.unpack_from(endian + "H", data, 18)
            e_phoff, = struct.unpack_from(endian + "I", data, 28)
            e_phentsize, e_phnum = struct.unpack_from(endian + "HH", data, 42)
        aligns, api = [], None
        for i in range(e_phnum):
            at = e_phoff + i * e_phentsize
            if bits == 64:
                p_type, _flags, p_offset, _va, _pa, p_filesz, _memsz, p_align = struct.unpack_from(
                    endian + "IIQQQQQQ", data, at)
            else:
                p_type, p_offset, _va, _pa, p_filesz, _memsz, _flags, p_align = struct.unpack_from(
                    endian + "IIIIIIII", data, at)
            if p_type == PT_LOAD:
                aligns.append(p_align)
            elif p_type == PT_NOTE and api is None:
                api = _android_note(data, p_offset, p_filesz, endian)
    except struct.error as e:
        raise _not_elf(path, f"truncated: {e}") from e
    return ElfFile(path, bits, MACHINES.get(e_machine, f"e_machine {e_machine}"), tuple(aligns), api)


def load_alignment(path: Union[str, Path]) -> int:
    """The smallest ``PT_LOAD`` alignment of an ELF file (4096: 4 KB pages only; >= 16384: 16 KB ready)."""
    return read_elf(path).load_alignment
