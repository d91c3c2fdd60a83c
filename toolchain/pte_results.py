"""The ExecuTorch lines of a deploy run: per device, its programs beside the run's TorchScript CPU and NNAPI rows,
each with its speed-up over the TorchScript CPU model of the same precision (``invoke deploy`` shows them, ``invoke
report`` draws them).  The rows themselves are rows of the run (the results store, ``format = executorch``); the
run's document (``DeployResults.executorch``) holds what is not a row: the per-operator tables (checked here by
:func:`operator_problems`), problems and notes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional


BASELINE_PREFIX = "TorchScript CPU"  # the CPU model of the same precision: every speed-up's denominator


@dataclass
class PteResultRow:
    """One runtime on one device: an ExecuTorch program, or a legacy TorchScript CPU / NNAPI model beside it."""

    serial: str
    runtime: str  # "ExecuTorch fp32-xnnpack", "TorchScript CPU quant_none", "NNAPI quant_full"
    precision: str  # fp32 | int8
    file: str
    status: str  # ok | failed
    median_ms: Optional[float] = None
    p90_ms: Optional[float] = None
    min_ms: Optional[float] = None
    samples: int = 0
    speedup_vs_cpu: Optional[float] = None  # legacy CPU median of the same precision / this median
    note: str = ""

    @property
    def is_baseline(self) -> bool:
        return self.runtime.startswith(BASELINE_PREFIX)

    @property
    def lane(self) -> str:
        """``executorch`` or ``legacy``."""
        return "executorch" if self.runtime.startswith("ExecuTorch ") else "legacy"


def expected_speedups(rows: List[PteResultRow]) -> List[Optional[float]]:
    """Per row, the ok legacy CPU median of the same device and precision over the row's median (or None)."""
    base = {(r.serial, r.precision): r.median_ms for r in rows if r.is_baseline and r.status == "ok"}
    out: List[Optional[float]] = []
    for r in rows:
        b = base.get((r.serial, r.precision))
        out.append(round(b / r.median_ms, 3) if b and r.median_ms else None)
    return out


def add_speedups(rows: List[PteResultRow]) -> None:
    """Fill each row's speed-up over the ok legacy CPU row of the same device and precision."""
    for r, want in zip(rows, expected_speedups(rows)):
        r.speedup_vs_cpu = want


def operator_problems(entries: Any) -> List[str]:
    """A per-operator entry is ok with rows of non-negative times, or unknown with its reason."""
    out = []
    for o in entries if isinstance(entries, list) else [entries]:
        if not isinstance(o, dict) or o.get("status") not in ("ok", "unknown") or not o.get("file"):
            out.append(f"per-operator entry {str(o)[:60]} is not ok/unknown with a program")
        elif o["status"] == "unknown" and not o.get("reason"):
            out.append(f"{o.get('serial')} {o['file']}: per-operator times unknown without a reason")
        elif o["status"] == "ok" and not all(isinstance(r.get("median_ms"), (int, float)) and r["median_ms"] >= 0
                                             for r in o.get("rows") or [{}]):
            out.append(f"{o.get('serial')} {o['file']}: per-operator times that are not durations")
    return out
