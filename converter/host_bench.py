"""``invoke bench`` on this machine: the one host timing protocol, and what each format gives it to time.

Protocol (speed_benchmark_torch's): load the model, take its first input, run ``warmup`` untimed iterations, then
``iters`` timed ones, single-threaded by default (``--pthreadpool_size=1``).  Every candidate (:class:`Candidate`:
a key, a file, how to load it as a call) is loaded and warmed up alone first, then all are timed in ``repeat``
alternated rounds (:mod:`converter.rounds`), so that each one's speed-up over its baseline is measured in the same
rounds (:func:`measure`).  A format gives its candidates; the rounds, the statistics, the notes, the reuse of an
unchanged timing (:func:`timing_key`, :func:`reused`) and the record (:class:`HostBenchRecord`) are these.  The
quantized engine and the thread count are pinned for the measurement and restored after it
(:mod:`converter.torch_state`): the same files give the same numbers whatever ran before in the process.

TorchScript (:func:`run_host_bench`): its CPU models on their first bundled input; NNAPI models are not run here
(they need a phone, ``invoke deploy``, or the host NNAPI, ``invoke verify``).  ExecuTorch (:func:`run_pte_bench`):
each ``.pte`` checked against its reference first (converter/executorch_check.py), then the programs that run here
timed beside the legacy TorchScript CPU (and host NNAPI) models of the same stem.
"""
from __future__ import annotations

import dataclasses
import logging
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from toolchain import pins
from toolchain.errors import RecordError, UsageError, VerificationError
from toolchain.host_conditions import Conditions, watch
from toolchain.logs import native_output_to_log
from toolchain.fsutil import atomic_write_csv, digest_of, ensure_writable_dir, own_dir, refuse_another_owner, sha256_file
from toolchain.progress import duration, progress
from toolchain.record_base import FlatRecord, Record
from toolchain.records import (PteFile, load_method, load_reference, load_section, program_args, pte_files,
                               reference_path)
from toolchain.records import UNOPTIMIZED_CPU, ConvertManifest
from toolchain.settings import default
from toolchain.stats import VARIANCE_LIMIT_PCT

from .executorch_check import check_all
from .rounds import Ratio, Subject, Timing, alternate, estimate_s, prepare, ratio, ratio_notes
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
class BenchRow(FlatRecord):
    """One row of a host bench, either format's (the records' ``rows``, their CSV, ``show.bench_table``): a TorchScript
    model or an ExecuTorch program, timed by the one protocol, or not timed here (``timing`` None, ``note`` says why)."""

    label: str  # its name in the table and the ratios: a TorchScript model's file, "ExecuTorch fp32-xnnpack", ...
    file: str
    runtime: str  # torchscript-cpu | host-nnapi | executorch
    precision: str  # fp32 | int8
    timing: Optional[Timing] = None
    note: str = ""
    stem: str = ""
    variant: str = ""  # the manifest's variant ("mobilenetv2-quant_none", "fp32-xnnpack")
    mode: str = ""  # a TorchScript model's quantization mode: none | core | full
    mobile_optimized: Optional[bool] = None  # TorchScript CPU models: did optimize_for_mobile run (XNNPACK prepacking)?
    memory_kb: Optional[int] = None  # peak resident memory it added (load, first run, warm-up); None: unknown

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "BenchRow":
        timing = d.get("timing")
        return super().from_dict({**d, "timing": Timing(**timing) if timing is not None else None})

    def csv_cells(self) -> Dict[str, Any]:
        """The row as one CSV line: what it is, then its times (empty when not timed)."""
        return {**{k: v for k, v in self.to_dict().items() if k != "timing"},
                **(asdict(self.timing) if self.timing else {})}


@dataclass
class HostBenchRecord(Record):
    """``<bench.out>/host-bench.json`` (and its rows as ``host-bench.csv``): the last host timing of the CPU models
    (`invoke all` reuses it when it measured the same files with the same protocol).  A format's own record is a kind
    of it (another KIND, REMEDY, NAME).  Schema 2: a row's times are its ``timing`` (schema 1's were the row's own
    keys, ``median_ms`` beside ``file``), refused naming the command that measures again."""

    data: Dict[str, Any]

    KIND, SCHEMA, REMEDY = "torchdroid.host-bench", 2, "run `invoke bench` again"
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
    def write_results(cls, out: Path, s: Any, task: str, rows: Sequence[BenchRow], ratios: Sequence[Ratio],
                      notes: List[str], taken: Optional[Conditions], **more: Any) -> Tuple[Path, Path]:
        """The record of one timing (``s``: the protocol's settings; ``more``: what the format adds) and its rows as
        CSV in ``out``, listed as ``task``'s output (clean removes them and keeps the user's files)."""
        import torch

        body = {"torch": torch.__version__, "threads": s.threads, "warmup": s.warmup, "iters": s.iters,
                "repeat": s.repeat, **more, "rows": [asdict(r) for r in rows], "ratios": [r.as_dict() for r in ratios],
                "notes": notes, "conditions": taken.as_dict() if taken else None}  # how the rounds were taken
        own_dir(Path(out), task)
        protocol = {"iters": s.iters, "warmup": s.warmup, "threads": s.threads}
        csv_path = atomic_write_csv(Path(out) / Path(cls.NAME).with_suffix(".csv"),
                                    [{**r.csv_cells(), **protocol} for r in rows], CSV_COLUMNS)
        return cls(body).write(Path(out) / cls.NAME), csv_path


CSV_COLUMNS = ["file", "variant", "mode"] + [f.name for f in fields(BenchRow) if f.name not in (
    "file", "variant", "mode", "timing")] + [f.name for f in fields(Timing)] + ["iters", "warmup", "threads"]
# what the row is (file, variant and mode first, as before), its times, the protocol's numbers


@dataclass
class HostBenchResult:
    """A format's host bench: its rows, each ratio measured in the same rounds, the notes, the record and CSV written;
    the ExecuTorch format's also each program's check against its reference (``checks``)."""

    rows: List[BenchRow]
    json_path: Path
    csv_path: Path
    notes: List[str] = field(default_factory=list)
    ratios: List[Ratio] = field(default_factory=list)  # TorchScript: each quantized model over its float model
    conditions: Optional[Conditions] = None  # how the rounds were taken (toolchain/host_conditions.py)
    quantized_engine: str = ""
    checks: List[Any] = field(default_factory=list)  # converter.executorch_check.CheckRow, one per program

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.ran)

    def raise_for_failures(self) -> None:
        """A VerificationError (exit 8) naming every program that differs from its reference."""
        bad = [c for c in self.checks if c.ran and not c.ok]
        if bad:
            raise VerificationError(f"{len(bad)} ExecuTorch program(s) differ from their reference: "
                                    + "; ".join(f"{c.variant}: {c.reason}" for c in bad),
                                    remedy=f"see {self.json_path}; convert again (`invoke convert --force` with the "
                                           "options you converted with), or report the delegate's numerics upstream")


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


def timing_key(files: Iterable[Tuple[str, Path]], s: Any, *more: Any) -> str:
    """What a timing depends on: every (key, file) timed, by content; the protocol, the threads, the quantized engine,
    torch's version, and ``more`` (what else the format's timing depends on)."""
    import torch

    return digest_of([PROTOCOL, [(key, sha256_file(path)) for key, path in files], s.warmup, s.iters, s.repeat,
                      s.threads, host_engine(), torch.__version__, *more])


def reused(last: Dict[str, Any], key: str) -> Optional[tuple]:
    """(the timed rows, ratios, how they were taken) of the last record (:meth:`HostBenchRecord.last`) when it has
    the same ``timing_key`` (the rows not timed are made anew from this run's files).  None when it does not, or is
    unreadable."""
    if last.get("timing_key") != key:
        return None
    try:
        rows = [BenchRow.from_dict(r) for r in last["rows"] if r.get("timing") is not None]
        ratios = [Ratio.from_dict(r) for r in last.get("ratios", [])]
    except (KeyError, TypeError):
        return None
    return rows, ratios, Conditions.from_dict(last.get("conditions"))


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


def timing_notes(ratios: Sequence[Ratio], rows: Sequence[BenchRow], taken: Optional[Conditions]) -> List[str]:
    """The ratios that measured no difference or spread more than it, the machine's notes, the timed rows whose
    rounds disagree, and (the same in both formats: said once in a run) the baselines made without
    optimize_for_mobile."""
    timings = {r.label: r.timing for r in rows if r.timing}
    spreads = {label: t.spread_pct for label, t in timings.items() if t.unstable}
    unoptimized = [UNOPTIMIZED_CPU] if any(r.mobile_optimized is False for r in rows) else []
    return ratio_notes(list(ratios)) + unstable_notes(spreads, next(iter(timings.values())).repeats if timings else 0,
                                                      taken) + unoptimized


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
    engine = host_engine()
    subjects, taken = _rounds(cpu_files, settings, engine, timed, taken)
    rows = [timed_row(torchscript_row(f), s) for f, s in zip(cpu_files, subjects)]
    floats = {f.stem: f.file for f in cpu_files if f.mode == "none"}  # each quantized model against its float one
    ratios = ratios_over(subjects, {f.file: floats.get(f.stem) for f in cpu_files if f.mode != "none"})
    notes = _notes(rows, ratios, taken)
    paths = HostBenchRecord.write_results(
        Path(settings.out), settings, "bench", rows, ratios, notes, taken, protocol=PROTOCOL,
        manifest=str(manifest.path), quantized_engine=engine,
        models={f.file: f.sha256 for f in cpu_files})  # what was measured (`invoke all` reuses it)
    return HostBenchResult(rows, *paths, notes, ratios, taken, engine)


def _rounds(cpu_files, settings: HostBenchSettings, engine: str, timed: Optional[Dict[str, Subject]],
            taken: Optional[Conditions]) -> Tuple[List[Subject], Optional[Conditions]]:
    """The CPU models' rounds: another format's (``timed``, ``taken``) when they cover every CPU model, else timed."""
    if timed and taken is not None and all(f.file in timed for f in cpu_files):
        return [timed[f.file] for f in cpu_files], taken
    with native_output_to_log(), pinned(threads=settings.threads, engine=engine), warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)  # torch's C++ warnings go to the run log
        return measure([cpu_candidate(f) for f in cpu_files], settings, "host benchmark")


def torchscript_row(f: Any, label: str = "") -> BenchRow:
    """A TorchScript model's row (a manifest's ModelFile: CPU, or NNAPI on the host), not yet timed."""
    cpu = f.backend == "cpu"
    return BenchRow(label or f.file, f.file, "torchscript-cpu" if cpu else "host-nnapi",
                    "fp32" if f.mode == "none" else "int8", stem=f.stem, variant=f.qualified_variant, mode=f.mode,
                    mobile_optimized=bool(f.extra.get("mobile_optimized")) if cpu else None)


def timed_row(row: BenchRow, subject: Subject) -> BenchRow:
    """``row`` with what its rounds measured."""
    return dataclasses.replace(row, timing=subject.stats(), memory_kb=subject.memory_kb)


def _notes(rows: List[BenchRow], ratios: List[Ratio], taken: Optional[Conditions]) -> List[str]:
    notes = ["NNAPI models are not run by the host benchmark: they need a phone (`invoke deploy`) "
             "or torchdroid's host NNAPI (`invoke verify`)"]
    notes.extend(timing_notes(ratios, rows, taken))
    if any(r.memory_kb is None for r in rows):
        notes.append("memory per model not shown: this system does not let a process reset its peak resident size "
                     "(/proc/self/clear_refs)")
    return notes


# --------------------------------------------------------------------------- the ExecuTorch format's bench


@dataclass(frozen=True)
class PteBenchSettings(HostBenchSettings):
    """The host timing protocol's settings and what only the ExecuTorch format has (its check's bounds, its lines)."""

    float_atol: float = 1e-4
    float_rtol: float = 1e-5
    per_operator: bool = True
    debug_buffer_mb: int = 512  # ETDump's buffer for every intermediate output of one run
    legacy: bool = True  # time the legacy CPU (and host NNAPI) models beside the .pte programs
    host_nnapi: bool = True
    reference_kernels: str = "short"  # portable .pte and host NNAPI lines: short (a few iterations) | full | skip
    again: bool = False  # measure again even when the last results measured the same files with the same settings


class PteHostBenchRecord(HostBenchRecord):
    """``<bench.out>/executorch-host-bench.json``: the last host check and timing of the ExecuTorch programs."""

    KIND, REMEDY = "torchdroid.executorch-host-bench", "run `invoke bench --format executorch` again"
    NAME = "executorch-host-bench.json"
    READS = (1,)  # schema 1's rows had these rows' keys but variant, mode and memory_kb: read with their defaults


# ExecuTorch's threadpool (XNNPACK's threads) keeps the size ExecuTorch gives it: its Python API has no public means
# to set it (docs/architecture.md, "Private members of dependencies we still use, and why"); on a Linux host that is
# one thread per processor
EXECUTORCH_THREADS = "ExecuTorch's default (one per processor on a Linux host)"


def set_threads(threads: int) -> str:
    """``threads`` intra-op threads for torch; returns what ExecuTorch's threadpool uses (EXECUTORCH_THREADS)."""
    import torch

    torch.set_num_threads(threads)
    return EXECUTORCH_THREADS


def run_pte_bench(s: PteBenchSettings, timed: Optional[Dict[str, Subject]] = None) -> HostBenchResult:
    """Each program checked against its reference (converter/executorch_check.py), then timed beside the legacy
    models.  ``timed``: a dict to fill with every TorchScript CPU model's rounds (file -> Subject), all of them timed
    in this format's rounds beside its baselines, so that the TorchScript format's result times none again."""
    check_protocol(s, "bench-executorch")  # before anything is measured
    notes: List[str] = []
    last = PteHostBenchRecord.last(s.out)
    previous = {} if s.again else last  # --again: nothing reused, the last times still say how long it takes
    # ExecuTorch's and cpuinfo's C++ lines go to the run log, not over the progress
    with native_output_to_log(), pinned(threads=s.threads, engine=host_engine()):
        files, ref_paths, refs = _programs(s)
        set_threads(s.threads)
        checks = check_all(files, refs, ref_paths, s, previous, notes, last)
        pairs, idle = _candidates(files, refs, s, notes)
        key = timing_key([(row.label, Path(s.models) / row.file) for row, _ in pairs], s, s.reference_kernels,
                         pins.identity())
        rows, ratios, taken = _timings(pairs, s, previous, key, notes, timed)
    rows += idle
    notes.extend(timing_notes(ratios, rows, taken))
    baselines = [x.label for x in rows if x.runtime == "torchscript-cpu" and x.timing]  # every speed-up's (1.0)
    paths = PteHostBenchRecord.write_results(
        s.out, s, "bench-executorch", rows, ratios, notes, taken, models=str(s.models),
        executorch=pins.identity(), executorch_threads=EXECUTORCH_THREADS,
        checks=[asdict(c) for c in checks], reference_kernels=s.reference_kernels,
        speedups=speedups(baselines, ratios), timing_key=key)
    return HostBenchResult(rows, *paths, notes, ratios, taken, checks=checks)


def _programs(s: PteBenchSettings) -> tuple:
    """(the .pte files, their reference paths and references by stem); every tampered or missing program that
    would run here is refused before anything runs."""
    files = pte_files(s.models)
    pins.require_executorch()
    for f in files:
        if f.runs_on_host:
            f.check_hash()
    section = load_section(s.models)
    ref_paths = {stem: reference_path(s.models, stem, section) for stem in sorted({f.stem for f in files})}
    return files, ref_paths, {stem: load_reference(path) for stem, path in ref_paths.items()}


def _pte_loader(path: Path, example) -> Callable[[], Callable[[], Any]]:
    def load():
        method = load_method(path)
        args = program_args(example)
        return lambda: method.execute(args)
    return load


def legacy_candidates(models_dir: Path, stems: List[str], s: PteBenchSettings, notes: List[str]) -> list:
    """[(row, candidate)] of the legacy TorchScript CPU models (and, where the host NNAPI builds, the NNAPI ones,
    ``rough``: reference kernels) of quant_none/quant_full."""
    man = ConvertManifest.load(models_dir)
    wanted = [f for f in man.files if f.stem in stems and f.variant in ("quant_none", "quant_full")]
    if not wanted:
        notes.append("no legacy TorchScript models in the manifest to compare with: run `invoke convert` "
                     "with --format torchscript,executorch")
        return []
    nnapi_ok, why = _host_nnapi(s)
    if not nnapi_ok:
        notes.append(f"host NNAPI not timed: {why}")
    pairs = []
    for f in [f for f in wanted if f.backend == "cpu" or nnapi_ok]:
        cpu = f.backend == "cpu"
        row = torchscript_row(f, f"{'TorchScript CPU' if cpu else 'host NNAPI'} {f.variant}")
        cand = cpu_candidate(f, row.label)
        pairs.append((row, cand if cpu else dataclasses.replace(cand, rough=True, cpu_model=False)))
    return pairs


def _host_nnapi(s: PteBenchSettings) -> tuple:
    if not s.host_nnapi:
        return False, "turned off"
    import host_nnapi

    ok, why = host_nnapi.availability()
    if ok:
        host_nnapi.load()
    return ok, why


ROUGH = {"short": f"reference kernels: {SHORT_ITERS} iterations per round, a rough number (--reference-kernels full "
                  "for the whole protocol)", "skip": "reference kernels: not timed (--reference-kernels short or full "
                                                    "times them)", "full": ""}


def _candidates(files: List[PteFile], refs: Dict[str, Any], s: PteBenchSettings, notes: List[str]) -> tuple:
    """([(row, candidate)] to time: the legacy models first, then the programs that run here, ``rough`` the reference
    kernels in ``short`` mode; the rows not timed: the programs that do not run here, reference kernels in ``skip``)."""
    pairs = legacy_candidates(s.models, sorted(refs), s, notes) if s.legacy else []
    idle = []
    for f in files:
        line = BenchRow(f"ExecuTorch {f.variant}", f.file, "executorch", f.precision, stem=f.stem, variant=f.variant)
        if f.runs_on_host:
            load = _pte_loader(f.path, refs[f.stem]["inputs"][0])
            pairs.append((line, Candidate(line.label, f.file, load, rough=f.delegate == "portable")))
        else:
            line.note = "not runnable here: " + (f.extra.get("host_check") or {}).get("reason", "delegate not registered")
            idle.append(line)
    timed = []
    for line, c in pairs:
        if c.rough:
            line.note, c.rough = ROUGH[s.reference_kernels], s.reference_kernels == "short"
            if s.reference_kernels == "skip":
                idle.append(line)
                continue
        timed.append((line, c))
    return timed, idle


def _timings(pairs: list, s: PteBenchSettings, previous: Dict[str, Any], key: str,
             notes: List[str], timed: Optional[Dict[str, Subject]] = None) -> tuple:
    """(rows, ratios of each row over the legacy CPU row of the same stem and precision, how they were taken): the
    last results' when they measured the same files with the same settings, else measured (with, when ``timed`` is
    asked for, the manifest's other CPU models, for the TorchScript format's result)."""
    last = reused(previous, key)
    if last is not None:
        notes.append(f"timings reused from {previous.get('written')}: the same files measured with the same "
                     "settings (--again measures again)")
        return last
    baselines = {line.file for line, _ in pairs if line.runtime == "torchscript-cpu"}
    also = [] if timed is None else [cpu_candidate(f) for f in ConvertManifest.load(s.models).files
                                     if f.backend == "cpu" and f.file not in baselines]
    subjects, taken = measure([c for _, c in pairs] + also, s, "ExecuTorch host timing", timed)
    rows = [timed_row(row, subj) for (row, _), subj in zip(pairs, subjects)]
    base = {(x.stem, x.precision): x.label for x in rows if x.runtime == "torchscript-cpu"}
    return rows, ratios_over(subjects, {x.label: base.get((x.stem, x.precision)) for x in rows
                                        if x.runtime != "torchscript-cpu"}), taken
