"""Per-device checks before anything is pushed: ABI, page size, SDK (NNAPI), free space, binary/model commits."""

from __future__ import annotations

import logging
import struct
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional

from toolchain.errors import CompatibilityError, DeviceError, UsageError
from toolchain.pins import NNAPI_DEPRECATED_SDK, NNAPI_MIN_SDK

log = logging.getLogger(__name__)

ELF_MACHINE_ABI = {183: "arm64-v8a", 40: "armeabi-v7a", 62: "x86_64", 3: "x86"}


@dataclass(frozen=True)
class DeviceFacts:
    serial: str
    model: str
    board: str
    release: str
    sdk: int
    abis: tuple
    soc: str = ""
    page_size: Optional[int] = None

    @classmethod
    def from_props(cls, serial: str, props: Dict[str, str]) -> "DeviceFacts":
        abilist = props.get("ro.product.cpu.abilist") or props.get("ro.product.cpu.abi", "")
        sdk_s = props.get("ro.build.version.sdk", "0")
        return cls(
            serial=serial,
            model=props.get("ro.product.model", "?"),
            board=props.get("ro.soc.model") or props.get("ro.board.platform") or props.get("ro.hardware", "?"),
            release=props.get("ro.build.version.release", "?"),
            sdk=int(sdk_s) if sdk_s.isdigit() else 0,
            abis=tuple(a for a in abilist.split(",") if a),
            soc=" ".join(v for v in (props.get("ro.soc.manufacturer", ""), props.get("ro.soc.model", "")) if v)
            or props.get("ro.board.platform", "") or props.get("ro.hardware", ""),
        )

    @property
    def nnapi_ok(self) -> bool:
        return self.sdk >= NNAPI_MIN_SDK

    def nnapi_skip_reason(self) -> Optional[str]:
        if self.nnapi_ok:
            return None
        return (f"Android {self.release} (SDK {self.sdk}) < SDK {NNAPI_MIN_SDK}: torch's NNAPI backend needs "
                "Android 10; CPU models still run")

    @property
    def nnapi_deprecated(self) -> bool:
        return self.sdk >= NNAPI_DEPRECATED_SDK

    def nnapi_note(self) -> Optional[str]:
        if not self.nnapi_deprecated:
            return None
        return (f"Android {self.release} (SDK {self.sdk}) deprecates NNAPI: its numbers may come from a CPU "
                "fallback driver, not an accelerator")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["abis"] = list(self.abis)
        return d


def check_abi(facts: DeviceFacts, abi: str, build: str = "invoke build-android") -> None:
    """``build``: the command that builds the binary (ExecuTorch's runner: ``invoke build-android --lane executorch``)."""
    if abi not in facts.abis:
        raise DeviceError(
            f"{facts.serial} ({facts.model}) cannot run a {abi} binary",
            cause=f"the device's ABI list is {','.join(facts.abis) or 'empty'}",
            remedy=(f"build for one of them: `{build} --abi {facts.abis[0]}`" if facts.abis else
                    "check `adb shell getprop ro.product.cpu.abilist`") + ", or leave this device out with --serial",
        )


def parse_df_available(out: str) -> Optional[int]:
    """Available bytes from ``df -k PATH`` (toybox and busybox layouts; the last data line)."""
    lines = [ln.replace("Mounted on", "Mounted_on").split() for ln in out.splitlines() if ln.strip()]
    if len(lines) < 2:
        return None
    header = [h.lower() for h in lines[0]]
    data = lines[-1]
    col = next((i for i, h in enumerate(header) if h in ("available", "avail", "free")), 3)
    # a long filesystem name can wrap onto its own line: the data line then lacks the first column
    idx = col - (len(header) - len(data)) if len(data) < len(header) else col
    try:
        return int(data[idx]) * 1024
    except (IndexError, ValueError):
        return None


def check_space(facts: DeviceFacts, available: Optional[int], needed: int, where: str) -> None:
    if available is None:
        log.warning("[%s] could not read the free space on %s; pushing anyway", facts.serial, where)
        return
    if available < needed:
        raise DeviceError(
            f"{facts.serial} has {available / 1e6:.1f} MB free on {where}, the deploy needs {needed / 1e6:.1f} MB",
            cause="the device's /data partition is (nearly) full",
            remedy="free space on the phone (uninstall apps, delete old files in deploy.device_dir), or deploy "
                   "fewer variants with --variant",
        )


def elf_abi(path: Path) -> Optional[str]:
    """The Android ABI of an ELF executable, from its e_machine field."""
    try:
        head = Path(path).read_bytes()[:20]
    except OSError as e:
        raise UsageError(f"cannot read the benchmark binary {path}", cause=str(e),
                         remedy="pass an existing file: `invoke deploy --binary PATH` (ExecuTorch's runner: "
                                "`invoke deploy-executorch --build-info PATH`)") from e
    if head[:4] != b"\x7fELF":
        raise UsageError(f"{path} is not an ELF executable", remedy="pass the speed_benchmark_torch that "
                         "`invoke build-android` built (<build_dir>/android/<abi>/...): `invoke deploy --binary PATH` "
                         "(ExecuTorch's runner: `invoke build-android --lane executorch`)")
    little = head[5] == 1
    machine = int.from_bytes(head[18:20], "little" if little else "big")
    return ELF_MACHINE_ABI.get(machine)


def check_commits(binary_commit: Optional[str], model_commits: Dict[str, Optional[str]], allow: bool) -> List[str]:
    """Compare the torch commit that converted each model with the one the binary was built from.

    Returns warnings; raises CompatibilityError on a mismatch unless ``allow``.
    """
    warnings: List[str] = []
    if not binary_commit:
        warnings.append("the benchmark binary's PyTorch commit is unknown (--binary without a build-info): "
                        "model/runtime compatibility was not checked")
        return warnings
    bad = {f: c for f, c in model_commits.items() if not _same_commit(c, binary_commit)}
    if not bad:
        return warnings
    listing = ", ".join(f"{f} ({(c or 'unknown')[:12]})" for f, c in sorted(bad.items()))
    msg = (f"models were converted by another torch than the binary was built from "
           f"(binary: {binary_commit[:12]}): {listing}")
    if allow:
        warnings.append(msg + " [--allow-mismatch]")
        return warnings
    raise CompatibilityError(
        msg,
        cause="TorchScript written by one torch may not load, or may behave differently, in another torch's runtime",
        remedy="convert with the torch of the binary's lane (see `invoke check-compat`), rebuild the binary from the "
               "converter's commit, or pass --allow-mismatch to benchmark anyway",
    )


def _same_commit(a: Optional[str], b: str) -> bool:
    if not a:
        return False
    n = min(len(a), len(b))
    return n >= 7 and a[:n] == b[:n]



def parse_page_size(out: str) -> Optional[int]:
    """``getconf PAGE_SIZE`` output -> bytes (None when it printed no number)."""
    text = out.strip().splitlines()[-1].strip() if out.strip() else ""
    return int(text) if text.isdigit() and int(text) > 0 else None


def load_alignment(path: Path) -> Optional[int]:
    """The smallest p_align of the PT_LOAD segments of an ELF file (None when it has none or is no ELF)."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or len(data) < 52:
        return None
    is64, end = data[4] == 2, "<" if data[5] == 1 else ">"
    if is64:
        phoff, = struct.unpack_from(end + "Q", data, 32)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 54)
    else:
        phoff, = struct.unpack_from(end + "I", data, 28)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 42)
    aligns = []
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + phentsize > len(data):
            break
        p_type, = struct.unpack_from(end + "I", data, off)
        if p_type == 1:  # PT_LOAD
            aligns.append(struct.unpack_from(end + ("Q" if is64 else "I"), data, off + (48 if is64 else 28))[0])
    return min(aligns) if aligns else None


def check_page_size(facts: DeviceFacts, binary: Path, alignment: Optional[int]) -> None:
    """Refuse a binary whose LOAD segments are aligned below the device's page size (it cannot be loaded)."""
    if facts.page_size is None or alignment is None or alignment >= facts.page_size:
        return
    raise CompatibilityError(
        f"{facts.serial} ({facts.model}) uses {facts.page_size // 1024} KB memory pages; {binary.name} is "
        f"{alignment // 1024 or alignment} {'KB' if alignment >= 1024 else 'byte'}-aligned and cannot load there",
        cause="Android 15+ devices may use 16 KB pages; executables and libraries need LOAD segments aligned to them",
        remedy="rebuild with `invoke build-android` (it links with -Wl,-z,max-page-size=16384 / flexible page sizes), "
               "check it with `readelf -lW BINARY` (the Align column of the LOAD lines must be 0x4000 or more), "
               "or leave this device out with --serial",
    )
