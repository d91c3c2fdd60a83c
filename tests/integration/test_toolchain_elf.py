"""toolchain/elf.py against files the real host compiler and linker produced (4 KB and 16 KB LOAD alignment)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from toolchain.elf import PAGE_16K, PAGE_4K, load_alignment, read_elf
from toolchain.errors import VerificationError

NOTE = Path(__file__).resolve().parents[1] / "ndk_support" / "pytorch_fixture" / "binaries" / "android_note.c"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def _cc(tmp_path: Path, name: str, *flags: str) -> Path:
    src = tmp_path / "main.c"
    src.write_text("int value(void) { return 7; }\nint main(void) { return value() - 7; }\n")
    out = tmp_path / name
    subprocess.run(["gcc", *flags, str(src), "-o", str(out)], check=True)
    return out


def test_4k_and_16k_linked_files_differ(tmp_path):
    plain = _cc(tmp_path, "plain")
    aligned = _cc(tmp_path, "aligned", "-Wl,-z,max-page-size=16384")
    lib = _cc(tmp_path, "libplain.so", "-shared", "-fPIC")
    assert load_alignment(plain) == PAGE_4K
    assert load_alignment(lib) == PAGE_4K
    assert load_alignment(aligned) == PAGE_16K
    elf = read_elf(aligned)
    assert elf.bits == 64 and elf.machine == "Advanced Micro Devices X86-64" and elf.supports_page_size(PAGE_16K)


def test_android_note_api_level(tmp_path):
    out = tmp_path / "with_note"
    src = tmp_path / "main.c"
    src.write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-DFIXTURE_API_LEVEL=33", str(src), str(NOTE), "-o", str(out)], check=True)
    assert read_elf(out).android_api_level == 33
    assert read_elf(_cc(tmp_path, "no_note")).android_api_level is None


@pytest.mark.parametrize("content", [b"", b"#!/bin/sh\necho hi\n", b"\x7fELF\x02\x01" + b"\0" * 10])
def test_not_an_elf_is_a_verification_error(tmp_path, content):
    f = tmp_path / "speed_benchmark_torch"
    f.write_bytes(content)
    with pytest.raises(VerificationError) as e:
        read_elf(f)
    assert "not a readable ELF" in e.value.what and e.value.remedy
