"""``invoke bench --host``: the CPU models on this machine, with speed_benchmark_torch's protocol.

Protocol: load the model, take its first bundled input (``--use_bundled_input=0``),
run ``warmup`` untimed iterations, then ``iters`` timed ones, single-threaded by
default (``--pthreadpool_size=1``).  NNAPI models are not run here: they need a
phone (``invoke deploy``) or the host NNAPI (``invoke verify``).
"""

from __future__ import annotations

import csv
import io
import logging
import statistics
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List

from toolchain.errors import UsageError
from toolchain.fsutil import atomic_write_json, atomic_write_text
from toolchain.progress import progress
from toolchain.records import ConvertManifest, now_iso
from toolchain.settings import default

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostBenchSettings:
    models: Path
    warmup: int = default("bench.warmup")
    iters: int = default("bench.iter")
    threads: int = default("bench.threads")
    out: Path = Path(default("bench.out"))
    repeat: int = default("bench.repeat")  # timed runs of ``iters``; their medians disagreeing by > 10 % flags the row ``unstable``


@dataclass
class BenchRow:
    file: str
    variant: str
    mode: str
    backend: str
    iters: int
    warmup: int
    threads: int
    median_ms: float
    p90_ms: float
    min_ms: float
    mean_ms: float
    mobile_optimized: bool
    max_ms: float = 0.0
    std_ms: float = 0.0
    load_ms: float = 0.0  # torch.jit.load
    first_ms: float = 0.0  # the first inference after loading
    warmup_ms: float = 0.0  # mean of the warm-up iterations
    spread_pct: float = 0.0  # range of the per-run medians relative to their median
    unstable: bool = False  # spread_pct > VARIANCE_LIMIT_PCT: the repeats disagree
    repeats: int = 1
    peak_rss_kb: int = 0  # VmHWM of this (Python + torch) process after the model ran


@dataclass
class HostBenchResult:
    rows: List[BenchRow]
    json_path: Path
    csv_path: Path
    notes: List[str] = field(default_factory=list)


def percentile(values: List[float], q: float) -> float:
    """Nearest-rank percentile (what speed_benchmark_torch-style reports use)."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


VARIANCE_LIMIT_PCT = 10.0


def _timed(module, inputs) -> float:
    t0 = time.perf_counter()
    module(*inputs)
    return (time.perf_counter() - t0) * 1000.0


def peak_rss_kb() -> int:
    """VmHWM of this process (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def measure(path: Path, settings: HostBenchSettings) -> dict:
    """Load, first inference, warm-up, then ``repeat`` runs of ``iters``: every number of a BenchRow."""
    import torch

    t0 = time.perf_counter()
    module = torch.jit.load(str(path), map_location="cpu")
    load_ms = (time.perf_counter() - t0) * 1000.0
    inputs = module.get_all_bundled_inputs()[0]
    with torch.no_grad():
        first = _timed(module, inputs)
        warm = [_timed(module, inputs) for _ in range(settings.warmup)]
        runs = [[_timed(module, inputs) for _ in range(settings.iters)] for _ in range(max(1, settings.repeat))]
    times = [t for run in runs for t in run]
    medians = [statistics.median(run) for run in runs]
    spread = 100.0 * (max(medians) - min(medians)) / statistics.median(medians)
    return dict(median_ms=statistics.median(times), p90_ms=percentile(times, 90), min_ms=min(times),
                mean_ms=statistics.fmean(times), max_ms=max(times),
                std_ms=statistics.stdev(times) if len(times) > 1 else 0.0, load_ms=load_ms, first_ms=first,
                warmup_ms=statistics.fmean(warm) if warm else 0.0, spread_pct=spread,
                unstable=len(runs) > 1 and spread > VARIANCE_LIMIT_PCT, repeats=len(runs), peak_rss_kb=peak_rss_kb())


def run_host_bench(settings: HostBenchSettings) -> HostBenchResult:
    if settings.iters < 1 or settings.warmup < 0 or settings.threads < 1 or settings.repeat < 1:
        raise UsageError("bench needs iter >= 1, warmup >= 0, threads >= 1 and repeat >= 1",
                         remedy="e.g. invoke bench --host --warmup 5 --iter 50 --threads 1")
    manifest = ConvertManifest.load(settings.models)
    cpu_files = [f for f in manifest.files if f.backend == "cpu"]
    if not cpu_files:
        raise UsageError(f"{manifest.path} lists no CPU models", remedy="run `invoke convert`")
    rows = _measure_all(cpu_files, settings)
    notes = _notes(rows)
    json_path, csv_path = _write_results(Path(settings.out), manifest, cpu_files, rows, notes, settings)
    return HostBenchResult(rows, json_path, csv_path, notes)


def _measure_all(cpu_files, settings: HostBenchSettings) -> List[BenchRow]:
    import torch

    torch.set_num_threads(settings.threads)
    rows: List[BenchRow] = []
    with warnings.catch_warnings(), progress("host benchmark", total=len(cpu_files)) as bar:
        warnings.filterwarnings("ignore", category=FutureWarning)
        for f in cpu_files:
            bar.describe(f"benchmarking {f.file} (load, {settings.warmup} warm-up, {settings.repeat}x{settings.iters} "
                         "iterations)")
            f.check_hash()
            rows.append(BenchRow(f.file, f.qualified_variant, f.mode, f.backend, settings.iters, settings.warmup,
                                 settings.threads, mobile_optimized=bool(f.extra.get("mobile_optimized", False)),
                                 **measure(f.path, settings)))
            bar.advance()
    return rows


def _notes(rows: List[BenchRow]) -> List[str]:
    notes = ["NNAPI models are not run by the host benchmark: they need a phone (`invoke deploy`) "
             "or torchdroid's host NNAPI (`invoke verify`)"]
    for r in rows:
        if r.unstable:
            notes.append(f"{r.file}: the {r.repeats} runs disagree (their medians differ by {r.spread_pct:.0f}% > "
                         f"{VARIANCE_LIMIT_PCT:.0f}%): the machine is busy or throttling; close other work and rerun")
    if any(not r.mobile_optimized for r in rows):
        notes.append("CPU models were converted without optimize_for_mobile (no XNNPACK in that torch)")
    return notes


def _write_results(out: Path, manifest: ConvertManifest, cpu_files, rows: List[BenchRow], notes: List[str],
                   settings: HostBenchSettings):
    import torch

    body = {"kind": "torchdroid.host-bench", "written": now_iso(), "manifest": str(manifest.path),
            "torch": torch.__version__, "threads": settings.threads, "warmup": settings.warmup, "iters": settings.iters,
            "models": {f.file: f.sha256 for f in cpu_files},  # what was measured (`invoke all` reuses it)
            "rows": [asdict(r) for r in rows], "notes": notes}
    json_path = atomic_write_json(out / "host-bench.json", body)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(asdict(rows[0]).keys()))
    w.writeheader()
    for r in rows:
        w.writerow(asdict(r))
    return json_path, atomic_write_text(out / "host-bench.csv", buf.getvalue())
