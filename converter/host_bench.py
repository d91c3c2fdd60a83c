"""The host timing protocol of every format (``invoke bench``), and the TorchScript format's part of it.

Protocol (speed_benchmark_torch's): load the model, take its first input, run ``warmup`` untimed iterations, then
``iters`` timed ones, single-threaded by default (``--pthreadpool_size=1``).  Every candidate (:class:`Candidate`:
a key, a file, how to load it as a call) is loaded and warmed up alone first, then all are timed in ``repeat``
alternated rounds (:mod:`converter.rounds`), so that each one's speed-up over its baseline is measured in the same
rounds (:func:`measure`).  A format gives its candidates; the rounds, the statistics, the notes, the reuse of an
unchanged timing (:func:`timing_key`, :func:`reused`) and the record (:class:`HostBenchRecord`) are these.  The
quantized engine and the thread count are pinned for the measurement and restored after it
(:mod:`converter.torch_state`): the same files give the same numbers whatever ran before in the process.

The TorchScript format times its CPU models (their first bundled input); NNAPI models are not run here: they need a
phone (``invoke deploy``) or the host NNAPI (``invoke verify``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from toolchain.errors import RecordError, UsageError
from toolchain.host_conditions import Conditions, watch
from toolchain.fsutil import atomic_write_csv, ensure_writable_dir, own_dir, refuse_another_owner, sha256_file
from toolchain.progress import duration, progress
from toolchain.record_base import Record
from toolchain.records import ConvertManifest
from toolchain.settings import default
from toolchain.stats import VARIANCE_LIMIT_PCT

from .rounds import Ratio, Subject, alternate, estimate_s, prepare, ratio, ratio_notes
from .torch_state import host_engine, pinned

log = logging.getLogger(__name__)
PROTOCOL = 2  # engine and threads pinned, alternated rounds (workflow/chain.py reuses only this protocol's results)
SHORT_ITERS = 3  # a rough candidate (reference kernels): timed calls per round, after one warm-up


@dataclass(frozen=True)
class HostBenchSettings:
    models: Path
    warmup: int = default("bench.warmup")
    iters: int = default("bench.iter")
    threads: int = default("bench.threads")
    out: Path = Path(default("bench.out"))
    repeat: int = default("bench.repeat")  # alternated rounds of ``iters``; medians > 10 % apart flag the row ``unstable``


@dataclass
class Timing:
    """One candidate's statistics over its rounds (converter/rounds.Subject.stats), for any runtime."""

    median_ms: float
    p90_ms: float
    min_ms: float
    mean_ms: float
    max_ms: float = 0.0
    std_ms: float = 0.0
    load_ms: float = 0.0  # loading it (torch.jit.load, ExecuTorch's load_method)
    first_ms: float = 0.0  # the first inference after loading
    warmup_ms: float = 0.0  # mean of the warm-up iterations
    spread_pct: float = 0.0  # range of the per-round medians relative to their median
    unstable: bool = False  # spread_pct > VARIANCE_LIMIT_PCT: the rounds disagree
    repeats: int = 1


@dataclass
class BenchRow(Timing):
    """A TorchScript CPU model's row of ``host-bench.json`` and ``host-bench.csv``."""

    file: str = ""
    variant: str = ""
    mode: str = ""
    backend: str = ""
    iters: int = 0
    warmup: int = 0
    threads: int = 0
    mobile_optimized: bool = False
    memory_kb: Optional[int] = None  # peak resident memory this model added (load, first run, warm-up); None: unknown
    quantized_engine: str = ""  # torch.backends.quantized.engine while it was loaded and timed


@dataclass
class HostBenchRecord(Record):
    """``<bench.out>/host-bench.json``: the last host timing of the CPU models (`invoke all` reuses it when it measured
    the same files with the same protocol).  A format's own record is a kind of it (another KIND, REMEDY, NAME)."""

    data: Dict[str, Any]

    KIND, SCHEMA, REMEDY = "torchdroid.host-bench", 1, "run `invoke bench` again"
    NAME = "host-bench.json"

    def body(self) -> Dict[str, Any]:
        return self.data

    @classmethod
    def from_body(cls, data: Dict[str, Any], path: Path) -> "HostBenchRecord":
        return cls(dict(data))

    @classmethod
    def last(cls, out: Path) -> Dict[str, Any]:
        """The last results in ``out``, when readable and ours (anything else, an earlier torchdroid's too: ``{}``,
        measure and write the record anew)."""
        try:
            return cls.load(Path(out) / cls.NAME).data
        except RecordError:
            return {}

    @classmethod
    def write_results(cls, out: Path, s: Any, task: str, rows: Sequence[Any], ratios: Sequence[Ratio],
                      notes: List[str], taken: Optional[Conditions], **more: Any) -> Path:
        """The record of one timing (``s``: the protocol's settings; ``more``: what the format adds) in ``out``,
        listed as ``task``'s output (clean removes it and keeps the user's files)."""
        import torch

        body = {"torch": torch.__version__, "threads": s.threads, "warmup": s.warmup, "iters": s.iters,
                "repeat": s.repeat, **more, "rows": [asdict(r) for r in rows], "ratios": [r.as_dict() for r in ratios],
                "notes": notes, "conditions": taken.as_dict() if taken else None}  # how the rounds were taken
        own_dir(Path(out), task)
        return cls(body).write(Path(out) / cls.NAME)


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
    """The timing protocol's numbers (``HostBenchSettings`` or a format's settings built on it), before anything is
    read; the output directory is another tool's, or a file is in its way: said before, not after, timing."""
    if settings.iters < 1 or settings.warmup < 0 or settings.threads < 1 or settings.repeat < 1:
        raise UsageError(f"{task} needs iter >= 1, warmup >= 0, threads >= 1 and repeat >= 1",
                         remedy="e.g. --warmup 5 --iter 50 --threads 1")
    refuse_another_owner(settings.out, task, "--out")
    ensure_writable_dir(settings.out, "output directory (--out)")


# --------------------------------------------------------------------------- the one timing protocol


@dataclass
class Candidate:
    """One thing to time: its key (the row's label), its file, how to load it (returns its call).  ``rough``: reference
    kernels, a few iterations per round (SHORT_ITERS); ``cpu_model``: a TorchScript CPU model, whose rounds the
    TorchScript format's result takes when another format timed it (:func:`measure`'s ``timed``)."""

    key: str
    file: str
    load: Callable[[], Callable[[], Any]]
    rough: bool = False
    cpu_model: bool = False


def cpu_candidate(f: Any, key: str = "") -> Candidate:
    """A TorchScript CPU model (a manifest's ModelFile, its hash checked) and its first bundled input."""
    f.check_hash()
    return Candidate(key or f.file, f.file, lambda p=f.path: load_bundled(p), cpu_model=True)


def measure(cands: Sequence[Candidate], s: Any, title: str,
            timed: Optional[Dict[str, Subject]] = None) -> Tuple[List[Subject], Conditions]:
    """Load and warm up every candidate alone, then time them all in ``s.repeat`` alternated rounds of ``s.iters``
    (``s``: the protocol's settings); returns (one Subject per candidate, how the rounds were taken).  ``timed``:
    filled with the TorchScript CPU models' rounds (file -> Subject), for the TorchScript format's result."""
    with progress(title, total=len(cands) * (1 + s.repeat)) as bar:
        subjects = [_prepare(c, s.warmup, bar) for c in cands]
        taken = time_alternated(subjects, s.repeat, s.iters, bar, s.threads)
    if timed is not None:
        timed.update((c.file, dataclasses.replace(subj, key=c.file)) for c, subj in zip(cands, subjects) if c.cpu_model)
    return subjects, taken


def _prepare(c: Candidate, warmup: int, bar) -> Subject:
    warmup = 1 if c.rough else warmup
    bar.describe(f"{c.file}: load, first inference, {warmup} warm-up")
    subj = prepare(c.key, c.load, warmup)
    subj.iters = SHORT_ITERS if c.rough else None
    bar.advance()
    return subj


def time_alternated(subjects: list, repeat: int, iters: int, bar, threads: int) -> Conditions:
    """Time prepared subjects (converter/rounds.py) in ``repeat`` alternated rounds of ``iters`` (or each one's
    own count), the progress saying which; returns how the rounds were taken (load, other processes' share)."""
    estimate = estimate_s(subjects, repeat, iters)
    log.info("timing %d models in %d alternated rounds of %d iterations: about %s", len(subjects), repeat, iters,
             duration(estimate))

    def on_round(r, s):
        bar.advance(text=f"round {r + 1}/{repeat}: {s.key} ({s.iters or iters} iterations; about "
                         f"{duration(estimate)} in all)")
    with watch(threads) as w:
        alternate(subjects, repeat, iters, on_round)
    return w.conditions


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def timing_key(files: Iterable[Tuple[str, Path]], s: Any, *more: Any) -> str:
    """What a timing depends on: every (key, file) timed, by content; the protocol, the threads, the quantized engine,
    torch's version, and ``more`` (what else the format's timing depends on)."""
    import torch

    return digest([PROTOCOL, [(key, sha256_file(path)) for key, path in files], s.warmup, s.iters, s.repeat,
                   s.threads, host_engine(), torch.__version__, *more])


def reused(last: Dict[str, Any], key: str, row: Callable[[Dict[str, Any]], Any]) -> Optional[tuple]:
    """(rows, ratios, how they were taken) of the last record (:meth:`HostBenchRecord.last`) when it has the same
    ``timing_key``; ``row``: a row from its dict (None: not a timed row).  None when it does not, or is unreadable."""
    if last.get("timing_key") != key:
        return None
    try:
        rows = [row(r) for r in last["rows"]]
        ratios = [Ratio.from_dict(r) for r in last.get("ratios", [])]
    except (KeyError, TypeError):
        return None
    return [r for r in rows if r is not None], ratios, Conditions.from_dict(last.get("conditions"))


def ratios_over(subjects: list, base_of: dict) -> List[Ratio]:
    """Each timed subject against its base subject (``base_of``: key -> base key), round by round."""
    by_key = {s.key: s for s in subjects}
    return [ratio(base, by_key[base].runs, key, by_key[key].runs) for key, base in base_of.items() if base in by_key]


def speedups(baselines: Iterable[str], ratios: Sequence[Ratio]) -> Dict[str, float]:
    """Each key's speed-up over its baseline: the headline of its per-round ratios (toolchain.stats.Comparison's one
    rule); the baselines 1.0."""
    out = {b: 1.0 for b in baselines}
    out.update((r.other, round(r.value, 3)) for r in ratios)
    return out


def timing_notes(ratios: Sequence[Ratio], timings: Dict[str, Timing], taken: Optional[Conditions]) -> List[str]:
    """The ratios that measured no difference or spread more than it, the machine's notes, and the rows (``timings``:
    label -> Timing) whose rounds disagree."""
    spreads = {label: t.spread_pct for label, t in timings.items() if t.unstable}
    return ratio_notes(list(ratios)) + unstable_notes(spreads, next(iter(timings.values())).repeats if timings else 0,
                                                      taken)


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


# --------------------------------------------------------------------------- the TorchScript format's bench


def run_host_bench(settings: HostBenchSettings, timed: Optional[Dict[str, Subject]] = None,
                   taken: Optional[Conditions] = None) -> HostBenchResult:
    """``timed``: the CPU models' rounds another format's bench took in this command (file -> Subject), and how
    (``taken``): when they cover every CPU model, none is timed again."""
    check_protocol(settings, "bench")  # before anything is measured
    manifest = ConvertManifest.load(settings.models)
    cpu_files = [f for f in manifest.files if f.backend == "cpu"]
    if not cpu_files:
        raise UsageError(f"{manifest.path} lists no CPU models", remedy="run `invoke convert`")
    from toolchain.logs import native_output_to_log

    engine = host_engine()
    if timed and taken is not None and all(f.file in timed for f in cpu_files):
        subjects = [timed[f.file] for f in cpu_files]
    else:
        with native_output_to_log(), pinned(threads=settings.threads, engine=engine), warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)  # torch's C++ warnings go to the run log
            subjects, taken = measure([cpu_candidate(f) for f in cpu_files], settings, "host benchmark")
    rows = [BenchRow(**s.stats(), file=f.file, variant=f.qualified_variant, mode=f.mode, backend=f.backend,
                     iters=settings.iters, warmup=settings.warmup, threads=settings.threads,
                     mobile_optimized=bool(f.extra.get("mobile_optimized", False)), memory_kb=s.memory_kb,
                     quantized_engine=engine) for f, s in zip(cpu_files, subjects)]
    floats = {f.stem: f.file for f in cpu_files if f.mode == "none"}  # each quantized model against its float one
    ratios = ratios_over(subjects, {f.file: floats.get(f.stem) for f in cpu_files if f.mode != "none"})
    notes = _notes(rows, ratios, taken)
    json_path, csv_path = _write_results(Path(settings.out), manifest, cpu_files, rows, notes, ratios, settings,
                                         taken)
    return HostBenchResult(rows, json_path, csv_path, notes, ratios, engine, taken)


def _notes(rows: List[BenchRow], ratios: List[Ratio], taken: Optional[Conditions]) -> List[str]:
    notes = ["NNAPI models are not run by the host benchmark: they need a phone (`invoke deploy`) "
             "or torchdroid's host NNAPI (`invoke verify`)"]
    notes.extend(timing_notes(ratios, {r.file: r for r in rows}, taken))
    if any(r.memory_kb is None for r in rows):
        notes.append("memory per model not shown: this system does not let a process reset its peak resident size "
                     "(/proc/self/clear_refs)")
    if any(not r.mobile_optimized for r in rows):
        notes.append("CPU models were converted without optimize_for_mobile (no XNNPACK in that torch)")
    return notes


CSV_COLUMNS = [f.name for f in fields(BenchRow) if f.name not in Timing.__dataclass_fields__] + list(
    Timing.__dataclass_fields__)  # what the row is first, then its times


def _write_results(out: Path, manifest: ConvertManifest, cpu_files, rows: List[BenchRow], notes: List[str],
                   ratios: List[Ratio], settings: Any, taken: Conditions):
    json_path = HostBenchRecord.write_results(
        out, settings, "bench", rows, ratios, notes, taken, protocol=PROTOCOL, manifest=str(manifest.path),
        quantized_engine=rows[0].quantized_engine,
        models={f.file: f.sha256 for f in cpu_files})  # what was measured (`invoke all` reuses it)
    return json_path, atomic_write_csv(out / "host-bench.csv", rows, CSV_COLUMNS)
