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

import logging
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional

from toolchain.errors import UsageError
from toolchain.host_conditions import Conditions, watch
from toolchain.fsutil import atomic_write_csv, ensure_writable_dir, own_dir, refuse_another_owner
from toolchain.progress import duration, progress
from toolchain.record_base import Record
from toolchain.records import ConvertManifest
from toolchain.settings import default
from toolchain.stats import VARIANCE_LIMIT_PCT

from .rounds import Ratio, alternate, estimate_s, prepare, ratio, ratio_notes
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
class HostBenchRecord(Record):
    """``<bench.out>/host-bench.json``: the last host timing of the CPU models (`invoke all` reuses it when it measured
    the same files with the same protocol)."""

    data: Dict[str, Any]

    KIND, SCHEMA, REMEDY = "torchdroid.host-bench", 1, "run `invoke bench` again"
    NAME = "host-bench.json"

    def body(self) -> Dict[str, Any]:
        return self.data

    @classmethod
    def from_body(cls, data: Dict[str, Any], path: Path) -> "HostBenchRecord":
        return cls(dict(data))


@dataclass
class HostBenchResult:
    rows: List[BenchRow]
    json_path: Path
    csv_path: Path
    notes: List[str] = field(default_factory=list)
    ratios: List[Ratio] = field(default_factory=list)  # each quantized model against its stem's float model
    quantized_engine: str = ""
    conditions: Optional[Conditions] = None  # how the rounds were taken (toolchain/host_conditions.py)

    def ratio_lines(self) -> List[str]:
        return [r.summary() for r in self.ratios]


def load_bundled(path: Path):
    """A TorchScript model and its first bundled input, as one call (what speed_benchmark_torch runs)."""
    import torch

    module = torch.jit.load(str(path), map_location="cpu")
    inputs = module.get_all_bundled_inputs()[0]

    def call():
        with torch.no_grad():
            return module(*inputs)
    return call


def check_protocol(settings, task: str) -> None:
    """The timing protocol's numbers (``HostBenchSettings`` or the ExecuTorch format's), before anything is read."""
    if settings.iters < 1 or settings.warmup < 0 or settings.threads < 1 or settings.repeat < 1:
        raise UsageError(f"{task} needs iter >= 1, warmup >= 0, threads >= 1 and repeat >= 1",
                         remedy="e.g. --warmup 5 --iter 50 --threads 1")


def time_alternated(subjects: list, repeat: int, iters: int, bar, threads: int,
                    describe=lambda s: s.key) -> Conditions:
    """Time prepared subjects (converter/rounds.py) in ``repeat`` alternated rounds of ``iters`` (or each one's
    own count), the progress saying which; returns how the rounds were taken (load, other processes' share)."""
    estimate = estimate_s(subjects, repeat, iters)
    log.info("timing %d models in %d alternated rounds of %d iterations: about %s", len(subjects), repeat, iters,
             duration(estimate))

    def on_round(r, s):
        bar.advance(text=f"round {r + 1}/{repeat}: {describe(s)} (about {duration(estimate)} in all)")
    with watch(threads) as w:
        alternate(subjects, repeat, iters, on_round)
    return w.conditions


def run_host_bench(settings: HostBenchSettings, timed: Optional[Dict[str, Any]] = None,
                   taken: Optional[Conditions] = None) -> HostBenchResult:
    """``timed``: the CPU models' rounds another format's bench took in this command (file -> Subject), and how
    (``taken``): when they cover every CPU model, none is timed again."""
    check_protocol(settings, "bench")
    refuse_another_owner(settings.out, "bench", "--out")  # before anything is measured
    ensure_writable_dir(settings.out, "output directory (--out)")  # a file in the way: said before, not after, timing
    manifest = ConvertManifest.load(settings.models)
    cpu_files = [f for f in manifest.files if f.backend == "cpu"]
    if not cpu_files:
        raise UsageError(f"{manifest.path} lists no CPU models", remedy="run `invoke convert`")
    from toolchain.logs import native_output_to_log

    if timed and taken is not None and all(f.file in timed for f in cpu_files):
        subjects = [timed[f.file] for f in cpu_files]
        rows = _rows(cpu_files, subjects, settings, host_engine())
    else:
        with native_output_to_log():  # torch's C++ warnings go to the run log, not between the progress lines
            rows, subjects, taken = _measure_all(cpu_files, settings)
    floats = {f.stem: f.file for f in cpu_files if f.mode == "none"}  # each quantized model against its float one
    ratios = ratios_over(subjects, {f.file: floats.get(f.stem) for f in cpu_files if f.mode != "none"})
    notes = _notes(rows, ratios, taken)
    json_path, csv_path = _write_results(Path(settings.out), manifest, cpu_files, rows, notes, ratios, settings,
                                         taken)
    return HostBenchResult(rows, json_path, csv_path, notes, ratios, rows[0].quantized_engine, taken)


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

        taken = time_alternated(subjects, settings.repeat, settings.iters, bar, settings.threads,
                                lambda s: f"{s.key} ({settings.iters} iterations)")
    return _rows(cpu_files, subjects, settings, engine), subjects, taken


def _rows(cpu_files, subjects: list, settings: HostBenchSettings, engine: str) -> List[BenchRow]:
    return [BenchRow(f.file, f.qualified_variant, f.mode, f.backend, settings.iters, settings.warmup, settings.threads,
                     mobile_optimized=bool(f.extra.get("mobile_optimized", False)), memory_kb=s.memory_kb,
                     quantized_engine=engine, **s.stats()) for f, s in zip(cpu_files, subjects)]


def ratios_over(subjects: list, base_of: dict) -> List[Ratio]:
    """Each timed subject against its base subject (``base_of``: key -> base key), round by round."""
    by_key = {s.key: s for s in subjects}
    return [ratio(base, by_key[base].runs, key, by_key[key].runs) for key, base in base_of.items() if base in by_key]


def unstable_notes(spreads: dict, repeats: int, taken: Optional[Conditions]) -> List[str]:
    """The machine's notes (toolchain/host_conditions.py), and the models whose rounds disagree (``spreads``: label
    -> spread %) said once: inside the busy note when the machine was busy (the same cause, the same remedy), else
    as its own note."""
    disagree = (f"{', '.join(spreads)}: the {repeats} rounds disagree (their medians differ by "
                f"{', '.join(f'{s:.0f}%' for s in spreads.values())} > {VARIANCE_LIMIT_PCT:.0f}%)") if spreads else ""
    if taken is not None and taken.busy:
        return taken.notes(disagree)
    machine = taken.notes() if taken is not None else []
    return ([f"{disagree}: the machine is busy or throttling; close other work and rerun"] if disagree else []) + machine


def _notes(rows: List[BenchRow], ratios: List[Ratio], taken: Optional[Conditions]) -> List[str]:
    notes = ["NNAPI models are not run by the host benchmark: they need a phone (`invoke deploy`) "
             "or torchdroid's host NNAPI (`invoke verify`)"]
    notes.extend(ratio_notes(ratios))
    notes.extend(unstable_notes({r.file: r.spread_pct for r in rows if r.unstable}, rows[0].repeats, taken))
    if any(r.memory_kb is None for r in rows):
        notes.append("memory per model not shown: this system does not let a process reset its peak resident size "
                     "(/proc/self/clear_refs)")
    if any(not r.mobile_optimized for r in rows):
        notes.append("CPU models were converted without optimize_for_mobile (no XNNPACK in that torch)")
    return notes


def _write_results(out: Path, manifest: ConvertManifest, cpu_files, rows: List[BenchRow], notes: List[str],
                   ratios: List[Ratio], settings: HostBenchSettings, taken: Conditions):
    import torch

    body = {"protocol": PROTOCOL, "manifest": str(manifest.path),
            "torch": torch.__version__, "threads": settings.threads, "warmup": settings.warmup, "iters": settings.iters,
            "repeat": settings.repeat, "quantized_engine": rows[0].quantized_engine,
            "models": {f.file: f.sha256 for f in cpu_files},  # what was measured (`invoke all` reuses it)
            "rows": [asdict(r) for r in rows], "ratios": [r.as_dict() for r in ratios], "notes": notes,
            "conditions": taken.as_dict()}  # how the rounds were taken: machine, load, other processes, busy
    own_dir(out, "bench")  # each file listed in its manifest: clean removes these and keeps the user's
    json_path = HostBenchRecord(body).write(out / HostBenchRecord.NAME)
    return json_path, atomic_write_csv(out / "host-bench.csv", rows, [f.name for f in fields(BenchRow)])
