"""The ExecuTorch record of a deploy run: ``<results>/executorch-run-NNNN.json`` per run, never overwritten, and
``<results>/executorch-latest.json``, the newest (each with its CSV twin).

A deploy with the ExecuTorch format writes it after the run's rows (each program's row is a row of the run in the
results store, ``format = executorch``); ``invoke report`` reads the one of the run it draws (``legacy.run_id``: the
run) for what is not a row.  One line per device and runtime, the run's TorchScript lines beside its programs:

    {"kind": "torchdroid.executorch-deploy", "schema": 1, "written": "2026-11-23T19:00:00+00:00",
     "run_id": 3, "models": "/abs/build/models", "build_info": "...", "warmup": 5, "iters": 50, "repeat": 3, "threads": 1,
     "legacy": {"path": ".../run-0007.json", "run_id": 7, "started": "..."},      # the deploy run it belongs to
     "rows": [{"serial": "R58N", "runtime": "ExecuTorch fp32-xnnpack", "precision": "fp32", "file": "...",
               "status": "ok", "median_ms": 7.6, "p90_ms": 8.1, "min_ms": 7.2, "samples": 150,
               "speedup_vs_cpu": 2.3, "note": ""}, ...],
     "problems": ["..."],
     "numerics": {"file": "executorch-latest-numerics.json", "sha256": "..."}}  # {}: outputs not checked

The reader refuses anything it would have to guess about (a missing or mistyped field, an unknown status, an
``ok`` row without positive latencies, a speed-up that does not follow from the medians it relates) with a
:class:`RecordError` (exit 5) that says to run deploy-executorch again.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional

from .errors import RecordError
from .fsutil import atomic_write_csv
from .record_base import Record, now_iso
from .variants import PRECISIONS

PTE_RESULTS_KIND = "torchdroid.executorch-deploy"
PTE_RESULTS_SCHEMA = 1
PTE_RESULTS_STEM = "executorch-latest"
PTE_RUN_PREFIX = "executorch-run-"  # executorch-run-0003.json: one run's record, kept beside the next runs'
PTE_ROW_STATUSES = ("ok", "failed")
BASELINE_PREFIX = "TorchScript CPU"  # the legacy CPU model of the same precision: every speed-up's denominator
RUNTIME_PREFIXES = ("ExecuTorch ", BASELINE_PREFIX + " ", "NNAPI ")
REMEDY = "run `invoke deploy-executorch` again (it rewrites <results>/executorch-latest.json)"


def pte_results_path(results_dir: Path, run: Optional[int] = None) -> Path:
    """The newest run's record, or run ``run``'s."""
    return Path(results_dir) / f"{PTE_RESULTS_STEM if run is None else f'{PTE_RUN_PREFIX}{run:04d}'}.json"


def _claim_run(results_dir: Path) -> int:
    """The next run number, its file created exclusively (never through a link), so two deploy-executorch runs
    writing into one results directory at once never take the same number."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    run = (PteDeployRecord.run_ids(results_dir) or [0])[-1] + 1
    while True:
        try:
            os.close(os.open(pte_results_path(results_dir, run),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o644))
            return run
        except FileExistsError:
            run += 1


def parse_time(text: str) -> Optional[_dt.datetime]:
    """An ISO time as written by :func:`toolchain.records.now_iso` (``None`` when it is not one)."""
    try:
        t = _dt.datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.timezone.utc)


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

    @classmethod
    def from_dict(cls, d: Any) -> "PteResultRow":
        if not isinstance(d, dict):
            raise TypeError(f"a row is a {type(d).__name__}, not an object")
        names = {f.name for f in fields(cls)}
        missing = sorted({"serial", "runtime", "precision", "file", "status"} - set(d))
        unknown = sorted(set(d) - names)
        if missing or unknown:
            raise TypeError(f"row fields missing: {missing}, unknown: {unknown}")
        return cls(**d)

    def problems(self) -> List[str]:
        """What makes this row nonsense; empty when it is sound."""
        out = []
        for name in ("serial", "runtime", "file", "note"):
            if not isinstance(getattr(self, name), str):
                out.append(f"{name} is not a text")
        if out:
            return out
        if not self.serial:
            out.append("no device serial")
        if not self.runtime.startswith(RUNTIME_PREFIXES):
            out.append(f"unknown runtime {self.runtime!r}")
        if self.precision not in PRECISIONS:
            out.append(f"unknown precision {self.precision!r}")
        if self.status not in PTE_ROW_STATUSES:
            out.append(f"unknown status {self.status!r}")
        if not isinstance(self.samples, int) or isinstance(self.samples, bool) or self.samples < 0:
            out.append(f"samples {self.samples!r} is not a count")
        out.extend(self._number_problems())
        return out

    def _number_problems(self) -> List[str]:
        values = {"median_ms": self.median_ms, "p90_ms": self.p90_ms, "min_ms": self.min_ms,
                  "speedup_vs_cpu": self.speedup_vs_cpu}
        bad = [k for k, v in values.items() if v is not None and not _positive(v)]
        if bad:
            return [f"{', '.join(bad)} not a positive number"]
        if self.status == "ok":
            if self.median_ms is None or self.p90_ms is None or self.min_ms is None or not self.samples:
                return [f"an ok row needs median, p90 and min from at least one sample (median {self.median_ms}, "
                        f"{self.samples} samples)"]
            if not self.min_ms <= self.median_ms <= self.p90_ms:
                return [f"min {self.min_ms} <= median {self.median_ms} <= p90 {self.p90_ms} does not hold"]
        elif not self.note:
            return ["a failed row needs its reason (note)"]
        elif self.median_ms is not None or self.speedup_vs_cpu is not None:
            return ["a failed row has a latency or speed-up"]
        return []


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def expected_speedups(rows: List[PteResultRow]) -> List[Optional[float]]:
    """Per row, the ok legacy CPU median of the same device and precision over the row's median (or None)."""
    base = {(r.serial, r.precision): r.median_ms for r in rows if r.is_baseline and r.status == "ok"}
    out: List[Optional[float]] = []
    for r in rows:
        b = base.get((r.serial, r.precision))
        out.append(round(b / r.median_ms, 3) if b and r.median_ms else None)
    return out


def speedup_problems(rows: List[PteResultRow]) -> List[str]:
    """Every speed-up must be the legacy CPU median of the same device and precision over the row's median."""
    out = []
    for r, want in zip(rows, expected_speedups(rows)):
        if (want is None) != (r.speedup_vs_cpu is None) or (want is not None and abs(want - r.speedup_vs_cpu) > 1e-3):
            out.append(f"{r.serial} {r.runtime}: speed-up {r.speedup_vs_cpu} does not follow from the medians "
                       f"(expected {want})")
    return out


def add_speedups(rows: List[PteResultRow]) -> None:
    """Fill each row's speed-up over the ok legacy CPU row of the same device and precision."""
    for r, want in zip(rows, expected_speedups(rows)):
        r.speedup_vs_cpu = want


@dataclass
class PteDeployRecord(Record):
    """``executorch-run-NNNN.json``: one deploy run's ExecuTorch lines per device, beside the run's TorchScript rows."""

    models: str  # the models directory (absolute) whose .pte programs ran
    build_info: str
    warmup: int
    iters: int
    repeat: int
    threads: int
    rows: List[PteResultRow]
    problems: List[str] = field(default_factory=list)
    legacy: Dict[str, Any] = field(default_factory=dict)  # path, run_id, started of the deploy run it belongs to
    # per device and program: the ETDump's operator table (deploy/etdump.py), status ok or unknown with the reason
    operators: List[Dict[str, Any]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)  # what every comparison must say (unoptimised CPU baselines...)
    # the numerics record this run wrote beside it (file name and sha256); {}: the run did not check the outputs
    numerics: Dict[str, Any] = field(default_factory=dict)
    written: str = ""
    path: Optional[Path] = None
    run_id: Optional[int] = None  # this run's number (executorch-run-NNNN.json); None in records before it

    KIND, SCHEMA, REMEDY = PTE_RESULTS_KIND, PTE_RESULTS_SCHEMA, REMEDY

    @property
    def legacy_run_id(self) -> Optional[int]:
        return self.legacy.get("run_id")

    def serials(self) -> List[str]:
        return list(dict.fromkeys(r.serial for r in self.rows))

    def body(self) -> Dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(self) if f.name != "path"},
                "rows": [asdict(r) for r in self.rows]}

    def write(self, results_dir: Path) -> Dict[str, Path]:
        """This run's ``executorch-run-NNNN.json`` (the record) and ``.csv`` (its rows), under a new number, then the
        same as ``executorch-latest.json`` and ``.csv``, all atomically: an earlier run (another phone's) is kept."""
        self.written = now_iso()
        self.run_id = _claim_run(results_dir)
        paths: Dict[str, Path] = {}
        for run, key in ((self.run_id, "run_"), (None, "")):
            json_path = super().write(pte_results_path(results_dir, run))
            paths[key + "json"] = json_path
            paths[key + "csv"] = atomic_write_csv(json_path.with_suffix(".csv"), self.rows,
                                                  [f.name for f in fields(PteResultRow)])
        self.path = paths["json"]
        return paths

    @classmethod
    def run_ids(cls, results_dir: Path) -> List[int]:
        """The numbers of the runs recorded in ``results_dir``, oldest first."""
        numbers = (p.stem[len(PTE_RUN_PREFIX):] for p in Path(results_dir).glob(f"{PTE_RUN_PREFIX}*.json"))
        return sorted(int(n) for n in numbers if n.isdigit())

    @classmethod
    def of_run(cls, results_dir: Path, run_id: int) -> Optional["PteDeployRecord"]:
        """The ExecuTorch record the deploy run ``run_id`` wrote (its ``legacy.run_id``), newest first; None when
        there is none (a run whose rows were imported from its journal)."""
        for run in reversed(cls.run_ids(results_dir)):
            rec = cls.load(results_dir, run)
            if rec.legacy_run_id == run_id:
                return rec
        return None

    @classmethod
    def load(cls, results_dir: Path, run: Optional[int] = None) -> "PteDeployRecord":
        """The newest run's record, or run ``run``'s."""
        rec = super().load(pte_results_path(results_dir, run))
        bad = rec.problems_found()
        if bad:
            raise RecordError(f"{rec.path} holds {len(bad)} inconsistent value(s): {bad[0]}",
                              cause="it was edited or damaged after deploy-executorch wrote it", remedy=REMEDY)
        return rec

    @classmethod
    def from_body(cls, data: Dict[str, Any], path: Path) -> "PteDeployRecord":
        return cls(models=data["models"], build_info=data["build_info"], warmup=data["warmup"], iters=data["iters"],
                   repeat=data["repeat"], threads=data["threads"], rows=[PteResultRow.from_dict(r) for r in data["rows"]],
                   problems=list(data.get("problems", [])), legacy=dict(data.get("legacy") or {}),
                   operators=list(data.get("operators") or []), notes=[str(n) for n in data.get("notes") or []],
                   numerics=dict(data.get("numerics") or {}), written=data.get("written", ""), path=path,
                   run_id=data.get("run_id"))

    def _header_problems(self) -> List[str]:
        out = []
        if not isinstance(self.models, str) or not self.models:
            out.append("no models directory")
        if parse_time(self.written) is None:
            out.append(f"written {self.written!r} is not a time")
        for name in ("warmup", "iters", "repeat", "threads"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name == "warmup" else 1):
                out.append(f"{name} {v!r} is not a valid count")
        return out

    def problems_found(self) -> List[str]:
        """Everything inconsistent in the record (empty: it is sound)."""
        out = self._header_problems()
        if self.run_id is not None and (not isinstance(self.run_id, int) or isinstance(self.run_id, bool)
                                        or self.run_id < 1):
            out.append(f"run id {self.run_id!r} is not a run number")
        run_id = self.legacy.get("run_id")
        if run_id is not None and (not isinstance(run_id, int) or isinstance(run_id, bool)):
            out.append(f"legacy run id {run_id!r} is not a number")
        out.extend(f"{r.serial or '?'} {r.runtime}: {p}" for r in self.rows for p in r.problems())
        out.extend(operator_problems(self.operators))
        return out or speedup_problems(self.rows)

    def operators_of(self, serial: str) -> List[Dict[str, Any]]:
        return [o for o in self.operators if o.get("serial") == serial]


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
