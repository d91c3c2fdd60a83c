"""``invoke bench --host``: the CPU models on this machine, with speed_benchmark_torch's protocol.

Protocol: load the model, take its first bundled input (``--use_bundled_input=0``),
run ``warmup`` untimed iterations, then ``iters`` timed ones, single-threaded by
default (``--pthreadpool_size=1``).  NNAPI models are not run here: they need a
phone (``invoke deploy``) or the host NNAPI (``invoke verify``).

Every model is loaded and warmed up first, then the models are timed in ``repeat`` alternated rounds
(:mod:`converter.rounds`), so the quantized models' speed-ups over the float one are measured in the same
rounds.  The quantized engine and the thread count are pinned for the measurement and restored after it
(:mod:`converter.torch_state`): the same files give the same numbers whatever ran before in the process.
"""

from __future__ import annotations

import csv
import io
import logging
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import List, Optional

from toolchain.errors import UsageError
from toolchain.fsutil import atomic_write_json, atomic_write_text
from toolchain.progress import progress
from toolchain.records import ConvertManifest, now_iso
from toolchain.settings import default
from toolchain.stats import VARIANCE_LIMIT_PCT

from .rounds import Ratio, alternate, estimate_s, prepare, ratio
from .torch_state import host_engine, pinned

log = logging.getLogger(__name__)
PROTOCOL = 2  # engine and threads pinned, alternated rounds (workflow/chain.py reuses only this protocol's results)


@dataclass(frozen=True)
class HostBenchSettings:
    models: Path
    warmup: int = default("bench.warmup")
    iters: int = default("bench.iter")
    threads: int = default("bench.threads")
    out: Path = Path(default("bench.out"))
    repeat: int = default("bench.repeat")  # alternated rounds of ``iters``; medians > 10 % apart flag the row ``unstable``


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
    spread_pct: float = 0.0  # range of the per-round medians relative to their median
    unstable: bool = False  # spread_pct > VARIANCE_LIMIT_PCT: the rounds disagree
    repeats: int = 1
    memory_kb: Optional[int] = None  # peak resident memory this model added (load, first run, warm-up); None: unknown
    quantized_engine: str = ""  # torch.backends.quantized.engine while it was loaded and timed


@dataclass
class HostBenchResult:
    rows: List[BenchRow]
    json_path: Path
    csv_path: Path
    notes: List[str] = field(default_factory=list)
    ratios: List[Ratio] = field(default_factory=list)  # each quantized model against its stem's float model
    quantized_engine: str = ""

    def ratio_lines(self) -> List[str]:
        return [f"{r.other} vs {r.base}: {r.value:.2f}x the speed (rounds {r.low:.2f}x-{r.high:.2f}x)"
                + (" UNCERTAIN" if r.uncertain else "") for r in self.ratios]


def load_bundled(path: Path):
    """A TorchScript model and its first bundled input, as one call (what speed_benchmark_torch runs)."""
    import torch

    module = torch.jit.load(str(path), map_location="cpu")
    inputs = module.get_all_bundled_inputs()[0]

    def call():
        with torch.no_grad():
            return module(*inputs)
    return call


def run_host_bench(settings: HostBenchSettings) -> HostBenchResult:
    if settings.iters < 1 or settings.warmup < 0 or settings.threads < 1 or settings.repeat < 1:
        raise UsageError("bench needs iter >= 1, warmup >= 0, threads >= 1 and repeat >= 1",
                         remedy="e.g. invoke bench --host --warmup 5 --iter 50 --threads 1")
    manifest = ConvertManifest.load(settings.models)
    cpu_files = [f for f in manifest.files if f.backend == "cpu"]
    if not cpu_files:
        raise UsageError(f"{manifest.path} lists no CPU models", remedy="run `invoke convert`")
    from toolchain.logs import native_output_to_log

    with native_output_to_log():  # torch's C++ warnings go to the run log, not between the progress lines
        rows, subjects = _measure_all(cpu_files, settings)
    ratios = _ratios(cpu_files, subjects)
    notes = _notes(rows, ratios)
    json_path, csv_path = _write_results(Path(settings.out), manifest, cpu_files, rows, notes, ratios, settings)
    return HostBenchResult(rows, json_path, csv_path, notes, ratios, rows[0].quantized_engine)


def _measure_all(cpu_files, settings: HostBenchSettings):
    engine = host_engine()
    n = len(cpu_files)
    with pinned(threads=settings.threads, engine=engine), warnings.catch_warnings(), \
            progress("host benchmark", total=n * (1 + settings.repeat)) as bar:
        warnings.filterwarnings("ignore", category=FutureWarning)
        subjects = []
        for f in cpu_files:
            bar.describe(f"{f.file}: load, first inference, {settings.warmup} warm-up")
            f.check_hash()
            subjects.append(prepare(f.file, lambda p=f.path: load_bundled(p), settings.warmup))
            bar.advance()

        estimate = estimate_s(subjects, settings.repeat, settings.iters)
        log.info("timing %d models in %d alternated rounds of %d iterations: about %.0f s", n, settings.repeat,
                 settings.iters, estimate)

        def on_round(r, s):
            bar.advance(text=f"round {r + 1}/{settings.repeat}: {s.key} ({settings.iters} iterations, about "
                             f"{estimate:.0f} s in all)")
        alternate(subjects, settings.repeat, settings.iters, on_round)
    rows = [BenchRow(f.file, f.qualified_variant, f.mode, f.backend, settings.iters, settings.warmup, settings.threads,
                     mobile_optimized=bool(f.extra.get("mobile_optimized", False)), memory_kb=s.memory_kb,
                     quantized_engine=engine, **s.stats()) for f, s in zip(cpu_files, subjects)]
    return rows, subjects


def _ratios(cpu_files, subjects) -> List[Ratio]:
    """Each quantized CPU model's speed against the float (quant_none) model of the same stem, round by round."""
    by_file = {s.key: s for s in subjects}
    base = {f.stem: by_file[f.file] for f in cpu_files if f.mode == "none"}
    return [ratio(base[f.stem].key, base[f.stem].runs, f.file, by_file[f.file].runs)
            for f in cpu_files if f.mode != "none" and f.stem in base]


def _notes(rows: List[BenchRow], ratios: List[Ratio]) -> List[str]:
    notes = ["NNAPI models are not run by the host benchmark: they need a phone (`invoke deploy`) "
             "or torchdroid's host NNAPI (`invoke verify`)"]
    unstable = [r for r in rows if r.unstable]
    if unstable:  # one note for all of them: the cause and the remedy are the machine's, not a model's
        notes.append(f"{', '.join(r.file for r in unstable)}: the {unstable[0].repeats} rounds disagree (their "
                     f"medians differ by {', '.join(f'{r.spread_pct:.0f}%' for r in unstable)} > "
                     f"{VARIANCE_LIMIT_PCT:.0f}%): the machine is busy or throttling; close other work and rerun")
    notes.extend(x.note() for x in ratios if x.uncertain)
    if any(r.memory_kb is None for r in rows):
        notes.append("memory per model not shown: this system does not let a process reset its peak resident size "
                     "(/proc/self/clear_refs)")
    if any(not r.mobile_optimized for r in rows):
        notes.append("CPU models were converted without optimize_for_mobile (no XNNPACK in that torch)")
    return notes


def _write_results(out: Path, manifest: ConvertManifest, cpu_files, rows: List[BenchRow], notes: List[str],
                   ratios: List[Ratio], settings: HostBenchSettings):
    import torch

    body = {"kind": "torchdroid.host-bench", "protocol": PROTOCOL, "written": now_iso(), "manifest": str(manifest.path),
            "torch": torch.__version__, "threads": settings.threads, "warmup": settings.warmup, "iters": settings.iters,
            "repeat": settings.repeat, "quantized_engine": rows[0].quantized_engine,
            "models": {f.file: f.sha256 for f in cpu_files},  # what was measured (`invoke all` reuses it)
            "rows": [asdict(r) for r in rows], "ratios": [r.as_dict() for r in ratios], "notes": notes}
    json_path = atomic_write_json(out / "host-bench.json", body)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(asdict(rows[0]).keys()))
    w.writeheader()
    for r in rows:
        w.writerow(asdict(r))
    return json_path, atomic_write_text(out / "host-bench.csv", buf.getvalue())
