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

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostBenchSettings:
    models: Path
    warmup: int = 5
    iters: int = 50
    threads: int = 1
    out: Path = Path("build/bench")


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


def time_model(module, inputs, warmup: int, iters: int) -> List[float]:
    import torch

    times = []
    with torch.no_grad():
        for _ in range(warmup):
            module(*inputs)
        for _ in range(iters):
            t0 = time.perf_counter()
            module(*inputs)
            times.append((time.perf_counter() - t0) * 1000.0)
    return times


def run_host_bench(settings: HostBenchSettings) -> HostBenchResult:
    if settings.iters < 1 or settings.warmup < 0 or settings.threads < 1:
        raise UsageError("bench needs iter >= 1, warmup >= 0 and threads >= 1",
                         remedy="e.g. invoke bench --host --warmup 5 --iter 50 --threads 1")
    manifest = ConvertManifest.load(settings.models)
    cpu_files = [f for f in manifest.files if f.backend == "cpu"]
    if not cpu_files:
        raise UsageError(f"{manifest.path} lists no CPU models", remedy="run `invoke convert`")
    import torch

    torch.set_num_threads(settings.threads)
    rows: List[BenchRow] = []
    with warnings.catch_warnings(), progress("host benchmark", total=len(cpu_files)) as bar:
        warnings.filterwarnings("ignore", category=FutureWarning)
        for f in cpu_files:
            bar.describe(f"benchmarking {f.file} ({settings.warmup} warm-up + {settings.iters} iterations)")
            f.check_hash()
            module = torch.jit.load(str(f.path), map_location="cpu")
            inputs = module.get_all_bundled_inputs()[0]
            times = time_model(module, inputs, settings.warmup, settings.iters)
            rows.append(BenchRow(f.file, f.qualified_variant, f.mode, f.backend, settings.iters, settings.warmup,
                                 settings.threads, statistics.median(times), percentile(times, 90), min(times),
                                 statistics.fmean(times), bool(f.extra.get("mobile_optimized", False))))
            bar.advance()
    notes = ["NNAPI models are not run by the host benchmark: they need a phone (`invoke deploy`) "
             "or torchdroid's host NNAPI (`invoke verify`)"]
    if any(not r.mobile_optimized for r in rows):
        notes.append("CPU models were converted without optimize_for_mobile (no XNNPACK in that torch)")
    out = Path(settings.out)
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
    csv_path = atomic_write_text(out / "host-bench.csv", buf.getvalue())
    return HostBenchResult(rows, json_path, csv_path, notes)
