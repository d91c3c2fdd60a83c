"""Which hardware NNAPI chose on each phone (issue 23 item 1): one placement per phone x NNAPI model file.

Written by deploy into the run's document (``DeployResults.hardware`` in ``<results>/run-NNNN.json``) from the NNAPI
runtime's own log lines (``deploy/nnapi_log.py``), read by report.  Nothing in it is guessed: a phone whose log said nothing,
or said it in a format torchdroid does not know, has ``status = "unknown"`` and the reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .record_base import FlatRecord

CPU_FALLBACK = "nnapi-reference"  # NNAPI's own CPU implementation (docs/facts.md NH3)
# accelerated: no operation on the CPU fallback; partly-cpu: some; cpu: all; unknown: the phone did not say
STATUSES = ("accelerated", "partly-cpu", "cpu", "unknown")
LISTER_NAME = "torchdroid_nnapi_devices"  # build-android's NNAPI device lister (ndk_build/nnapi_devices)
# ANeuralNetworksDevice_getType's codes (docs/facts.md NH9)
DEVICE_TYPES = {0: "unknown", 1: "other", 2: "CPU", 3: "GPU", 4: "accelerator"}


def feature_level_name(level: int) -> str:
    """``ANeuralNetworksDevice_getFeatureLevel``'s value as a reader knows it: 27..31 are feature levels 1..5
    (= the API level that brought them), 1000006 on are feature levels 6 on (docs/facts.md NH9)."""
    if level >= 1000000:
        return f"feature level {level - 1000000}"
    if 27 <= level <= 31:
        return f"feature level {level - 26} (API {level})"
    return f"feature level code {level}"


@dataclass
class Placement(FlatRecord):
    """Where one NNAPI model file's operations ran on one phone, as its NNAPI runtime logged it."""

    serial: str
    file: str
    mode: str  # none | core | full (float / int8 core / int8 full)
    status: str  # one of STATUSES
    reason: str = ""  # why unknown; what else the reader must know (dropped log lines)
    operations: List[List[str]] = field(default_factory=list)  # [operation, device name] as it ran, in order
    planned: List[List[str]] = field(default_factory=list)  # the partitioner's plan when the runtime threw it away
    cannot_do: List[List[str]] = field(default_factory=list)  # [device, operation]: "Device D can't do operation OP"
    fallback: List[str] = field(default_factory=list)  # the runtime's CPU fallback lines ("TAG: message")
    single_device: str = ""  # "only one best device": the whole graph on it
    drivers: List[str] = field(default_factory=list)  # the devices the runtime named (its log), in its order
    driver_details: str = ""  # why the drivers' type and feature level are unknown ("" when ``devices`` has them)
    devices: List[List[str]] = field(default_factory=list)  # [name, type, feature level, version] (the lister)
    vlog: str = ""  # debug.nn.vlog while the model compiled (what torchdroid set)
    restored: Optional[bool] = None  # the property read back equal to its value before

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")
        if self.status == "unknown" and not self.reason:
            raise ValueError("an unknown placement needs its reason")

    def problems(self) -> List[str]:
        """A status its own operations deny: ``accelerated`` with an operation on NNAPI's CPU fallback, ``cpu``
        with one elsewhere, ``partly-cpu`` with all or none there."""
        if self.status == "unknown" or not self.operations:
            return []
        on_cpu = sum(d == CPU_FALLBACK for _, d in self.operations)
        said = "cpu" if on_cpu == len(self.operations) else "accelerated" if on_cpu == 0 else "partly-cpu"
        if said == self.status:
            return []
        return [f"{self.serial} {self.file}: status {self.status!r}, but {on_cpu} of its {len(self.operations)} "
                f"operations ran on {CPU_FALLBACK} ({said})"]

    def per_device(self) -> Dict[str, int]:
        """Operations per device, in the order the devices first appear."""
        return dict(Counter(d for _, d in self.operations))

    def fallback_operations(self) -> Dict[str, int]:
        """The operations that ran on NNAPI's CPU fallback, with counts."""
        return dict(Counter(op for op, d in self.operations if d == CPU_FALLBACK))

    def why_on_cpu(self) -> Dict[str, List[str]]:
        """For each operation planned on the CPU fallback, the drivers that logged "Device D can't do operation
        OP" for it (the runtime's reason), in the order logged."""
        on_cpu = {op for op, d in (self.planned or self.operations) if d == CPU_FALLBACK}
        out: Dict[str, List[str]] = {}
        for dev, op in self.cannot_do:
            if op in on_cpu and dev != CPU_FALLBACK:
                out.setdefault(op, []).append(dev)
        return out

    def where(self) -> str:
        """``qti-dsp (all 65)``, ``qti-dsp 63 + nnapi-reference 2``, or ``unknown``."""
        if self.status == "unknown":
            return "unknown"
        if not self.operations:
            return f"{CPU_FALLBACK} (whole model)" if self.status == "cpu" else "?"
        counts = self.per_device()
        if len(counts) == 1:
            name, n = next(iter(counts.items()))
            return f"{name} (all {n})"
        return " + ".join(f"{name} {n}" for name, n in counts.items())

    def device_list(self) -> str:
        """``qti-dsp (accelerator, feature level 4 (API 30)), nnapi-reference (CPU, ...)``; or the drivers the log
        named with why their type is unknown."""
        if self.devices:
            return ", ".join(f"{name} ({kind}, {level})" for name, kind, level, _ in self.devices)
        if not self.drivers:
            return ""
        return ", ".join(self.drivers) + (f" (type unknown: {self.driver_details})" if self.driver_details else "")

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Placement":
        p = super().from_dict(d)
        p.operations = [[str(op), str(dev)] for op, dev in p.operations]
        p.planned = [[str(op), str(dev)] for op, dev in p.planned]
        p.cannot_do = [[str(dev), str(op)] for dev, op in p.cannot_do]
        p.devices = [[str(x) for x in d] for d in p.devices]
        return p
