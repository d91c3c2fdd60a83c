"""``invoke bench-executorch``: each ``.pte`` in ExecuTorch's host runtime, checked and timed beside the legacy models.

Check: every program the host runtime can run is run on the recorded reference inputs and compared with
the recorded expected outputs (fp32: the eager model, within ``float_atol + float_rtol * max|ref|``; int8:
the PT2E reference graph, whose relative L2 error may not exceed twice the reference's own error against the
eager float model on the held-out inputs (INT8_BUDGET_FACTOR: a program as close to the float model as the
reference is within that of it); and where a dequantize produces the output, every value on its int8 grid (a
float operation after the last dequantize, e.g. bilinear upsampling, puts it off the grid by design: that
check is then not applied, and the row says why).  XNNPACK requantizes in
integers where the reference computes in float, a few LSBs per layer that add up over a deep network, so
an LSB bound or a top-1 bound would judge the model's fragility (random weights give near-ties) rather than
the delegate; the largest LSB difference and the top-1 / top-5 agreement are reported beside it).  Per operator: ETDump with
a debug buffer plus the ETRecord written at convert time go through ExecuTorch's Inspector
(``calculate_numeric_gap``); a delegate is opaque to it, so an XNNPACK program compares per delegated
block, the portable program per operator.

Timing: the protocol and statistics of ``invoke bench --host`` (converter/host_bench.py: warm-up, timed
iterations, median / p90 / min / mean, ``threads`` intra-op threads for torch, ExecuTorch's threadpool at its
default size: EXECUTORCH_THREADS), for the ``.pte`` programs, the legacy
TorchScript CPU models and, when the host NNAPI builds here, the legacy NNAPI models.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from toolchain import pins as executorch_pins
from toolchain.errors import RecordError, VerificationError
from toolchain.fsutil import atomic_write_json, ensure_writable_dir, own_dir, refuse_another_owner
from toolchain.progress import duration as _duration, progress, time_left
from toolchain.records import PteFile, load_method, load_section, program_args, pte_files, reference_path
from toolchain.records import ConvertManifest

from toolchain.host_conditions import Conditions

from .host_bench import HostBenchRecord, HostBenchSettings, check_protocol, load_bundled, ratios_over, time_alternated, unstable_notes
from .rounds import Ratio, prepare, ratio_notes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PteBenchSettings(HostBenchSettings):
    """The host timing protocol's settings (converter/host_bench.py) and what only this format has."""

    float_atol: float = 1e-4
    float_rtol: float = 1e-5
    per_operator: bool = True
    debug_buffer_mb: int = 512  # ETDump's buffer for every intermediate output of one run
    legacy: bool = True  # time the legacy CPU (and host NNAPI) models beside the .pte programs
    host_nnapi: bool = True
    reference_kernels: str = "short"  # portable .pte and host NNAPI lines: short (a few iterations) | full | skip
    again: bool = False  # measure again even when the last results measured the same files with the same settings


@dataclass
class Timing:
    """The statistics of ``invoke bench --host`` (converter/rounds.Subject.stats), for any runtime."""

    median_ms: float
    p90_ms: float
    min_ms: float
    mean_ms: float
    max_ms: float = 0.0
    std_ms: float = 0.0
    load_ms: float = 0.0
    first_ms: float = 0.0
    warmup_ms: float = 0.0
    spread_pct: float = 0.0
    unstable: bool = False
    repeats: int = 1


@dataclass
class CheckRow:
    variant: str
    file: str
    ran: bool
    reference: str = ""
    inputs: int = 0
    max_abs_diff: Optional[float] = None
    limit: Optional[float] = None
    max_lsb_diff: Optional[int] = None
    top1_agreement: Optional[float] = None
    top5_agreement: Optional[float] = None
    rel_error: Optional[float] = None  # worst relative L2 error against the reference
    rel_budget: Optional[float] = None  # int8: worst relative L2 error of the reference against the float model
    grid_offset_lsb: Optional[float] = None  # int8: largest distance of an output from its quantization grid (LSB)
    grid_rule: str = ""  # int8: why the grid check does not apply to this program's output ("": it applies)
    codes: Optional[tuple] = None  # int8: lowest and highest output code seen
    held_out: bool = False  # the reference inputs were not among the calibration inputs
    ok: bool = False
    reason: str = ""
    operators: List[Dict[str, Any]] = field(default_factory=list)
    operator_note: str = ""
    key: str = ""  # what the result depends on (programs, reference, bounds): an unchanged key reuses it
    seconds: float = 0.0  # how long the check (with its per-operator comparison) took


@dataclass
class BenchLine:
    """One row of the side-by-side table: a legacy model or a .pte program, same protocol."""

    label: str  # "TorchScript CPU quant_none", "ExecuTorch fp32-xnnpack", ...
    file: str
    runtime: str  # torchscript-cpu | host-nnapi | executorch
    precision: str  # fp32 | int8
    timing: Optional[Timing] = None
    note: str = ""
    stem: str = ""
    mobile_optimized: Optional[bool] = None  # legacy CPU models: did optimize_for_mobile run (XNNPACK prepacking)?


@dataclass
class PteBenchResult:
    checks: List[CheckRow]
    lines: List[BenchLine]
    json_path: Path
    notes: List[str] = field(default_factory=list)
    ratios: List[Any] = field(default_factory=list)  # converter.rounds.Ratio: each line over the legacy CPU line
    conditions: Optional[Conditions] = None  # how the timing rounds were taken (toolchain/host_conditions.py)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.ran)

    def raise_for_failures(self) -> None:
        """A VerificationError (exit 8) naming every program that differs from its reference."""
        bad = [c for c in self.checks if c.ran and not c.ok]
        if bad:
            raise VerificationError(f"{len(bad)} ExecuTorch program(s) differ from their reference: "
                                    + "; ".join(f"{c.variant}: {c.reason}" for c in bad),
                                    remedy=f"see {self.json_path}; convert again (`invoke convert --force` with the options you "
                                           "converted with), or report the "
                                           "delegate's numerics upstream")


# --------------------------------------------------------------------------- running a program


# ExecuTorch's threadpool (XNNPACK's threads) keeps the size ExecuTorch gives it: its Python API has no public means
# to set it (docs/architecture.md, "Private members of dependencies we still use, and why"); on a Linux host that is
# one thread per processor
EXECUTORCH_THREADS = "ExecuTorch's default (one per processor on a Linux host)"


def set_threads(threads: int) -> str:
    """``threads`` intra-op threads for torch; returns what ExecuTorch's threadpool uses (EXECUTORCH_THREADS)."""
    import torch

    torch.set_num_threads(threads)
    return EXECUTORCH_THREADS


# --------------------------------------------------------------------------- checking


def _compare(f: PteFile, got, ref, qparams, s: PteBenchSettings, row: CheckRow) -> None:
    diff = float((got - ref).abs().max())
    row.max_abs_diff = max(row.max_abs_diff or 0.0, diff)
    if f.precision == "int8" and qparams and qparams.get("scale"):
        row.max_lsb_diff = max(row.max_lsb_diff or 0, int(round(diff / qparams["scale"])))
    elif f.precision == "fp32":
        row.limit = max(row.limit or 0.0, s.float_atol + s.float_rtol * max(float(ref.abs().max()), 1.0))


def _agreement(got, ref) -> tuple:
    """(top-1 equal, top-5 overlap fraction) of one output row pair."""
    a, b = got.reshape(-1), ref.reshape(-1)
    k = min(5, a.numel())
    top5 = len(set(a.topk(k).indices.tolist()) & set(b.topk(k).indices.tolist())) / k
    return int(a.argmax() == b.argmax()), top5


def _rel(a, b) -> float:
    return float((a - b).norm() / max(float(b.norm()), 1e-12))


GRID_TOLERANCE_LSB = 1e-3  # float rounding of (q - zero_point) * scale; a float output is ~0.25 LSB off on average
INT8_RANGE = (-128, 127)  # XNNPACKQuantizer's activations are int8
# the int8 program may differ from the PT2E reference by twice the reference's own error against the float model:
# a program no further from the float model than the reference is, is within that of it (triangle inequality);
# both are int8 realisations of one float model that round differently (XNNPACK requantizes in integers)
INT8_BUDGET_FACTOR = 2.0


def grid_rule(qparams: Optional[Dict[str, Any]]) -> str:
    """"" when the int8-grid check applies to the output (a dequantize produces it, or an older reference that does
    not say); else why it does not: a float operation after the last dequantize puts the values off the grid."""
    if qparams and qparams.get("on_grid", True) is False:
        return f"not applied: the output is computed in float by {qparams.get('after')} after the last dequantize"
    return ""


def grid_offset(got, qparams: Dict[str, Any]) -> tuple:
    """(largest distance of an output from the int8 output's quantization grid in LSB, (lowest, highest) code).

    A dequantized int8 output is ``(q - zero_point) * scale`` for an integer ``q``: every value sits on that grid,
    within float rounding.  An unquantized (float) output, or a correct one rescaled on the way, does not."""
    k = got.double() / float(qparams["scale"]) + int(qparams["zero_point"])
    return float((k - k.round()).abs().max()), (int(k.round().min()), int(k.round().max()))


def _judge(f: PteFile, s: PteBenchSettings, row: CheckRow) -> None:
    if f.precision == "fp32":
        row.ok = row.max_abs_diff is not None and row.max_abs_diff <= row.limit
        if not row.ok:
            row.reason = f"max |diff| {row.max_abs_diff:.3g} > {row.limit:.3g} against the {row.reference}"
        return
    # the grid check where it applies: to every output a dequantize produces (none skipped, or some checked)
    problems = _grid_problems(row) if row.grid_offset_lsb is not None or not row.grid_rule else []
    limit = None if row.rel_budget is None else INT8_BUDGET_FACTOR * row.rel_budget
    if row.rel_error is None or limit is None or row.rel_error > limit:
        problems.append(f"relative error {row.rel_error:.3g} against the {row.reference} exceeds "
                        f"{INT8_BUDGET_FACTOR:g}x the quantization's own error against the float model "
                        f"({row.rel_budget:.3g}, held-out inputs)")
    row.ok = not problems
    row.reason = "; ".join(problems)


def _grid_problems(row: CheckRow) -> List[str]:
    problems = []
    if row.grid_offset_lsb is None:
        problems.append("the int8 output's scale and zero point are not recorded (convert again with --force)")
    elif row.grid_offset_lsb > GRID_TOLERANCE_LSB or not (INT8_RANGE[0] <= row.codes[0] and row.codes[1] <= INT8_RANGE[1]):
        problems.append(f"its outputs are not dequantized int8 values of the recorded output quantization (up to "
                        f"{row.grid_offset_lsb:.2f} LSB off the grid, codes {row.codes[0]}..{row.codes[1]}): not the "
                        "int8 program's output")
    return problems


def per_output(outputs: List[Any], reference: Dict[str, Any], precision: str) -> List[tuple]:
    """Per output tensor of the program, in ``forward``'s order: (its values on every reference input, the
    reference's, the float model's, its int8 output rule).  ``outputs`` and the recorded expected outputs hold one
    entry per reference input: a tensor (one output, every reference before issue 35) or a tuple of them."""
    rules = reference.get("int8_outputs") or [reference.get("int8_output")]
    got, ref, flt = ([program_args(y) for y in ys] for ys in
                     (outputs, reference["expected"][precision], reference["expected"]["fp32"]))
    count = min(len(y) for y in got + ref + flt) if got else 0
    return [([g[k] for g in got], [r[k] for r in ref], [x[k] for x in flt], rules[k] if k < len(rules) else None)
            for k in range(count)]


def judge_outputs(f: PteFile, outputs: List[Any], reference: Dict[str, Any], s: PteBenchSettings,
                  row: CheckRow) -> CheckRow:
    """Fill ``row`` from the program's ``outputs`` on the reference inputs, and decide, every output tensor on its
    own (fp32: within the float bound of the eager model; int8: on the output's quantization grid where a dequantize
    produces it, and no further from the PT2E reference than INT8_BUDGET_FACTOR x the quantization's own error on
    the float model); the row's relative error and budget are the worst output's."""
    outs = per_output(outputs, reference, f.precision)
    skipped, agreement, excess = [], [0.0, 0.0, 0], None
    for k, (gots, refs, flts, rule) in enumerate(outs):
        rule = rule if f.precision == "int8" else None
        why = grid_rule(rule)
        if why:
            skipped.append(f"output {k}: {why}" if len(outs) > 1 else why)
        error, budget = _judge_output(f, gots, refs, flts, rule if not why else None, s, row, agreement)
        if excess is None or error - INT8_BUDGET_FACTOR * budget > excess:
            excess, row.rel_error, row.rel_budget = error - INT8_BUDGET_FACTOR * budget, error, budget
    row.grid_rule = "; ".join(skipped)
    row.inputs = len(outputs)
    if agreement[2]:
        row.top1_agreement, row.top5_agreement = agreement[0] / agreement[2], agreement[1] / agreement[2]
    _judge(f, s, row)
    return row


def _judge_output(f: PteFile, gots, refs, flts, grid, s: PteBenchSettings, row: CheckRow, agreement: list) -> tuple:
    """One output tensor over the reference inputs: the row's differences, grid offsets (``grid``: the output's
    quantization when the grid check applies) and top-1/top-5 sums; returns (worst relative error against the
    reference, worst relative error of the reference against the float model)."""
    error = budget = 0.0
    for got, ref, flt in zip(gots, refs, flts):
        got, ref, flt = got.double(), ref.double(), flt.double()
        _compare(f, got, ref, grid, s, row)
        error, budget = max(error, _rel(got, ref)), max(budget, _rel(ref, flt))
        if grid:
            off, (lo, hi) = grid_offset(got, grid)
            row.grid_offset_lsb = max(row.grid_offset_lsb or 0.0, off)
            row.codes = (min(row.codes[0], lo), max(row.codes[1], hi)) if row.codes else (lo, hi)
        if ref.dim() == 2 and ref.shape[1] > 1:  # top-1/top-5 only where the output is [N, classes] logits
            one, five = _agreement(got, ref)
            agreement[0], agreement[1], agreement[2] = agreement[0] + one, agreement[1] + five, agreement[2] + 1
    return error, budget


def check_program(f: PteFile, reference: Dict[str, Any], s: PteBenchSettings) -> CheckRow:
    row = CheckRow(f.variant, f.file, ran=f.runs_on_host,
                   reference="eager model" if f.precision == "fp32" else "PT2E int8 reference graph")
    if not f.runs_on_host:
        row.reason = (f.extra.get("host_check") or {}).get("reason", "its delegate is not in this host runtime")
        return row
    f.check_hash()
    method = load_method(f.path)
    outputs = [_as_recorded(method.execute(program_args(x))) for x in reference["inputs"]]
    row.held_out = bool(reference.get("held_out"))
    return judge_outputs(f, outputs, reference, s, row)


def _as_recorded(values: List[Any]):
    """A program's outputs as the reference records them: one tensor, or a tuple for several."""
    return values[0] if len(values) == 1 else tuple(values)


def per_operator(programs: Sequence[Tuple[PteFile, Path]], models_dir: Path, debug_buffer_mb: int) -> Dict[str, tuple]:
    """``{file: (rows, note)}`` for ``(program, reference path)`` pairs: the Inspector's numeric gap per operator
    (per delegated block for a delegate).

    Runs in a child process (converter/pte_operators.py), one for all the programs: ETDump aborts the process when
    its debug buffer overflows, and that must not take the stage down.  When a child dies on a program, that
    program gets the reason and a new child goes on with the programs after it.
    """
    found = {f.file: ([], "no ETRecord recorded for this program (convert again with --force)")
             for f, _ in programs if not (f.extra.get("etrecord") or {})}
    todo = [(f, ref) for f, ref in programs if f.file not in found]
    with tempfile.TemporaryDirectory(prefix="torchdroid-ops-") as tmp:
        while todo:
            outs = [Path(tmp) / f"ops-{len(found) + i}.json" for i in range(len(todo))]
            code, output = _compare_in_child(todo, outs, models_dir, debug_buffer_mb,
                                             Path(tmp) / f"jobs-{len(found)}.json")
            done = 0
            while done < len(todo) and outs[done].is_file():
                found[todo[done][0].file] = (json.loads(outs[done].read_text())["rows"], _note(todo[done][0]))
                done += 1
            if done < len(todo):  # the child ended on this program
                found[todo[done][0].file] = ([], f"per-operator comparison not possible: "
                                                 f"{_child_failure(code, output, debug_buffer_mb)}")
                done += 1
            todo = todo[done:]
    return found


def _child_failure(code: int, output: str, debug_buffer_mb: int) -> str:
    """Why the comparing child ended on a program, with its cause: the last line it wrote (the exception raised,
    e.g. a damaged ETRecord the Inspector cannot read), or the signal that killed it."""
    if "Ran out of space" in output:
        return f"the ETDump debug buffer ({debug_buffer_mb} MB) is too small for this program's intermediate outputs"
    how = f"exited with {code}"
    if code < 0:
        how = f"was killed by {signal.Signals(-code).name if -code in signal.valid_signals() else -code}"
    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
    return f"the comparison {how}" + (f": {last[:300]}" if last else " (it wrote nothing)")


def _compare_in_child(todo, outs: List[Path], models_dir: Path, debug_buffer_mb: int, jobs_file: Path) -> tuple:
    """``(exit code, output)`` of one child comparing ``todo`` in turn (converter/pte_operators.py)."""
    from .pte_operators import compare_forked

    # absolute paths: what the child reads does not depend on its working directory
    atomic_write_json(jobs_file, [{"program": str(Path(f.path).resolve()),
                                   "etrecord": str((models_dir / f.extra["etrecord"]["file"]).resolve()),
                                   "reference": str(Path(ref).resolve()), "out": str(out)}
                                  for (f, ref), out in zip(todo, outs)])
    return compare_forked(jobs_file, debug_buffer_mb)


def _note(f: PteFile) -> str:
    return ("the XNNPACK delegate is opaque to the Inspector: its graph compares as one block per delegate call"
            if f.delegate == "xnnpack" else "per operator (portable kernels)")


# --------------------------------------------------------------------------- timing

UNOPTIMIZED_BASELINE = ("the legacy TorchScript CPU models (every speed-up's baseline) were converted without "
                        "optimize_for_mobile: this torch has no XNNPACK (x86_64 PyPI wheels), so they are fused but not "
                        "XNNPACK-prepacked and slower than the fully optimised files a torch with XNNPACK makes; "
                        "ExecuTorch's speed-ups over them are larger than over optimised ones")
SHORT_ITERS = 3  # reference-kernel lines in ``short`` mode: timed calls per round (and one warm-up)


@dataclass
class Candidate:
    """A line to time: how to load it (returns its call), and whether it runs reference kernels."""

    line: BenchLine
    load: Callable[[], Callable[[], Any]]
    reference_kernels: bool = False


def _pte_loader(path: Path, example) -> Callable[[], Callable[[], Any]]:
    def load():
        method = load_method(path)
        args = program_args(example)
        return lambda: method.execute(args)
    return load


def pte_candidates(files: List[PteFile], refs: Dict[str, Any]) -> tuple:
    """(candidates, lines not runnable here) of the .pte programs."""
    cands, idle = [], []
    for f in files:
        line = BenchLine(f"ExecuTorch {f.variant}", f.file, "executorch", f.precision, stem=f.stem)
        if not f.runs_on_host:
            line.note = "not runnable here: " + (f.extra.get("host_check") or {}).get("reason", "delegate not registered")
            idle.append(line)
            continue
        cands.append(Candidate(line, _pte_loader(f.path, refs[f.stem]["inputs"][0]), f.delegate == "portable"))
    return cands, idle


def legacy_candidates(models_dir: Path, stems: List[str], s: PteBenchSettings, notes: List[str]) -> List[Candidate]:
    """The legacy TorchScript CPU models (and, where the host NNAPI builds, the NNAPI ones) of quant_none/quant_full."""
    man = ConvertManifest.load(models_dir)
    wanted = [f for f in man.files if f.stem in stems and f.variant in ("quant_none", "quant_full")]
    if not wanted:
        notes.append("no legacy TorchScript models in the manifest to compare with: run `invoke convert` "
                     "with --format torchscript,executorch")
        return []
    nnapi_ok, why = _host_nnapi(s)
    if not nnapi_ok:
        notes.append(f"host NNAPI not timed: {why}")
    cands = []
    for f in wanted:
        if f.backend != "cpu" and not nnapi_ok:
            continue
        f.check_hash()
        runtime = "torchscript-cpu" if f.backend == "cpu" else "host-nnapi"
        label = f"{'TorchScript CPU' if f.backend == 'cpu' else 'host NNAPI'} {f.variant}"
        line = BenchLine(label, f.file, runtime, "fp32" if f.mode == "none" else "int8", stem=f.stem,
                         mobile_optimized=bool(f.extra.get("mobile_optimized")) if f.backend == "cpu" else None)
        cands.append(Candidate(line, lambda p=f.path: load_bundled(p), reference_kernels=f.backend != "cpu"))
    return cands


def _host_nnapi(s: PteBenchSettings) -> tuple:
    if not s.host_nnapi:
        return False, "turned off"
    import host_nnapi

    ok, why = host_nnapi.availability()
    if ok:
        host_nnapi.load()
    return ok, why


def _prepare(c: Candidate, s: PteBenchSettings, bar) -> Any:
    """A candidate loaded and warmed (converter.rounds.Subject); reference kernels in ``short`` mode: a few
    iterations, said in its note."""
    short = c.reference_kernels and s.reference_kernels == "short"
    bar.describe(f"{c.line.file}: load, first run, {1 if short else s.warmup} warm-up")
    subj = prepare(c.line.label, c.load, 1 if short else s.warmup)
    subj.iters = SHORT_ITERS if short else None
    if short:
        c.line.note = (f"reference kernels: {SHORT_ITERS} iterations per round, a rough number "
                       "(--reference-kernels full for the whole protocol)")
    bar.advance()
    return subj


def _prepare_cpu_model(f: Any, s: PteBenchSettings, bar) -> Any:
    """A TorchScript CPU model (ModelFile) loaded and warmed, for the TorchScript format's table."""
    bar.describe(f"{f.file}: load, first run, {s.warmup} warm-up")
    f.check_hash()
    subj = prepare(f.file, lambda p=f.path: load_bundled(p), s.warmup)
    bar.advance()
    return subj


def measure_lines(cands: List[Candidate], s: PteBenchSettings, bar, also: Sequence[Any] = (),
                  timed: Optional[Dict[str, Any]] = None) -> tuple:
    """Load and warm every candidate, say how long the rounds will take, then time them alternated round by round;
    ``also``: TorchScript CPU models (ModelFile) timed in the same rounds, for the TorchScript format's result, which
    gets every TorchScript CPU model's rounds in ``timed`` (file -> Subject): each is timed once.

    Returns (lines, ratios of each line over the legacy CPU line of the same stem and precision, how the rounds were
    taken)."""
    subjects = [_prepare(c, s, bar) for c in cands]
    extra = {f.file: _prepare_cpu_model(f, s, bar) for f in also}
    taken = time_alternated(subjects + list(extra.values()), s.repeat, s.iters, bar, s.threads)
    if timed is not None:
        timed.update({c.line.file: dataclasses.replace(subj, key=c.line.file) for c, subj in zip(cands, subjects)
                      if c.line.runtime == "torchscript-cpu"})
        timed.update(extra)
    lines = []
    for c, subj in zip(cands, subjects):
        st = subj.stats()
        c.line.timing = Timing(**{k: st[k] for k in Timing.__dataclass_fields__})
        lines.append(c.line)
    base = {(x.stem, x.precision): x.label for x in lines if x.runtime == "torchscript-cpu"}
    return lines, ratios_over(subjects, {x.label: base.get((x.stem, x.precision)) for x in lines
                                         if x.runtime != "torchscript-cpu"}), taken


# --------------------------------------------------------------------------- the stage


def run_pte_bench(s: PteBenchSettings, timed: Optional[Dict[str, Any]] = None) -> PteBenchResult:
    """``timed``: a dict to fill with every TorchScript CPU model's rounds (file -> Subject), all of them timed in this
    format's rounds beside its baselines, so that the TorchScript format's result times none again."""
    check_protocol(s, "bench-executorch")
    refuse_another_owner(s.out, "bench-executorch", "--out")  # before anything is measured
    ensure_writable_dir(s.out, "output directory (--out)")  # a file in the way: said before, not after, timing
    from toolchain.logs import native_output_to_log

    with native_output_to_log():  # ExecuTorch's and cpuinfo's C++ lines go to the run log, not over the progress
        return _run_pte_bench(s, timed)


def _programs(s: PteBenchSettings) -> tuple:
    """(the .pte files, their reference paths and references by stem); every tampered or missing program that
    would run here is refused before anything runs."""
    files = pte_files(s.models)
    executorch_pins.require_executorch()
    for f in files:
        if f.runs_on_host:
            f.check_hash()
    section = load_section(s.models)
    ref_paths = {stem: reference_path(s.models, stem, section) for stem in sorted({f.stem for f in files})}
    return files, ref_paths, {stem: load_reference(path) for stem, path in ref_paths.items()}


def _run_pte_bench(s: PteBenchSettings, timed: Optional[Dict[str, Any]]) -> PteBenchResult:
    from .torch_state import host_engine, pinned

    files, ref_paths, refs = _programs(s)
    notes: List[str] = []
    last = _previous(s)
    previous = {} if s.again else last  # --again: nothing reused, the last times still say how long it takes
    with pinned(threads=s.threads, engine=host_engine()):
        set_threads(s.threads)
        checks = _checks(files, refs, ref_paths, s, previous, notes, last)
        cands, idle = _candidates(files, refs, s, notes)
        key = timing_key(cands, s, host_engine())
        lines, ratios, taken = _timings(cands, s, previous, key, notes, timed)
    lines += idle
    if any(x.mobile_optimized is False for x in lines):
        notes.append(UNOPTIMIZED_BASELINE)
    notes.extend(ratio_notes(ratios))
    notes.extend(_unstable(lines, taken))
    return PteBenchResult(checks, lines, _write(s, checks, lines, notes, ratios, key, taken), notes, ratios, taken)


def _candidates(files: List[PteFile], refs: Dict[str, Any], s: PteBenchSettings, notes: List[str]) -> tuple:
    """(the lines to time: the legacy models first, then the programs; the lines not timed)."""
    cands, idle = pte_candidates(files, refs)
    if s.legacy:
        cands = legacy_candidates(s.models, sorted(refs), s, notes) + cands
    if s.reference_kernels == "skip":
        for c in [c for c in cands if c.reference_kernels]:
            c.line.note = "reference kernels: not timed (--reference-kernels short or full times them)"
            idle.append(c.line)
        cands = [c for c in cands if not c.reference_kernels]
    return cands, idle


def _timings(cands: List[Candidate], s: PteBenchSettings, previous: Dict[str, Any], key: str,
             notes: List[str], timed: Optional[Dict[str, Any]] = None) -> tuple:
    """(lines, ratios, how they were taken): the last results' when they measured the same files with the same
    settings, else measured."""
    reused = _reused_timing(previous, key)
    if reused is not None:
        notes.append(f"timings reused from {previous.get('written')}: the same files measured with the same "
                     "settings (--again measures again)")
        return reused
    also = [] if timed is None else _other_cpu_models(s.models, cands)
    with progress("ExecuTorch host timing", total=(len(cands) + len(also)) * (1 + s.repeat)) as bar:
        return measure_lines(cands, s, bar, also, timed)


def _other_cpu_models(models_dir: Path, cands: List[Candidate]) -> list:
    """The manifest's TorchScript CPU models that are not baselines among ``cands``."""
    timed = {c.line.file for c in cands if c.line.runtime == "torchscript-cpu"}
    return [f for f in ConvertManifest.load(models_dir).files if f.backend == "cpu" and f.file not in timed]


# --------------------------------------------------------------------------- reusing unchanged measurements

CACHE_PROTOCOL = 2  # bump when what a check or a timing measures changes


def _digest(obj: Any) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


class PteHostBenchRecord(HostBenchRecord):
    """``<bench.out>/executorch-host-bench.json``: the last host check and timing of the ExecuTorch programs."""

    KIND, REMEDY = "torchdroid.executorch-host-bench", "run `invoke bench --format executorch` again"
    NAME = "executorch-host-bench.json"


def _previous(s: PteBenchSettings) -> Dict[str, Any]:
    """The last results of this output directory, when readable and ours (anything else, an earlier torchdroid's
    too: measure, and write the record anew)."""
    try:
        return PteHostBenchRecord.load(Path(s.out) / PteHostBenchRecord.NAME).data
    except RecordError:
        return {}


def check_key(f: PteFile, ref_path: Path, s: PteBenchSettings) -> str:
    """What a check's result depends on: the program, its reference and ETRecord, the bounds, the runtime."""
    from toolchain.fsutil import sha256_file

    etrecord = (f.extra.get("etrecord") or {}).get("sha256")
    return _digest([CACHE_PROTOCOL, f.sha256, sha256_file(ref_path), etrecord, s.float_atol, s.float_rtol,
                    s.per_operator, s.debug_buffer_mb, executorch_pins.identity()])


def timing_key(cands: List["Candidate"], s: PteBenchSettings, engine: str) -> str:
    """What the timings depend on: every file timed (by content), the protocol, the threads, engine and versions."""
    import torch

    from toolchain.fsutil import sha256_file

    return _digest([CACHE_PROTOCOL, [(c.line.label, sha256_file(Path(s.models) / c.line.file)) for c in cands],
                    s.warmup, s.iters, s.repeat, s.threads, s.reference_kernels, engine, torch.__version__,
                    executorch_pins.identity()])


def _reused_check(previous: Dict[str, Any], key: str) -> Optional[CheckRow]:
    for row in previous.get("checks") or []:
        if isinstance(row, dict) and row.get("key") == key:
            try:
                fields = {k: v for k, v in row.items() if k in CheckRow.__dataclass_fields__}
                c = CheckRow(**fields)
                c.codes = tuple(c.codes) if c.codes else None
                return c
            except TypeError:
                return None
    return None


def _reused_timing(previous: Dict[str, Any], key: str) -> Optional[tuple]:
    if previous.get("timing_key") != key:
        return None
    try:
        lines = []
        for row in previous["rows"]:
            if row.get("timing") is None:
                continue  # idle lines are rebuilt from this run's files
            timing = Timing(**row["timing"])
            lines.append(BenchLine(**{**{k: v for k, v in row.items() if k in BenchLine.__dataclass_fields__},
                                      "timing": timing}))
        ratios = [Ratio.from_dict(r) for r in previous.get("ratios", [])]
    except (KeyError, TypeError):
        return None
    return lines, ratios, Conditions.from_dict(previous.get("conditions"))


def _checks(files: List[PteFile], refs, ref_paths, s: PteBenchSettings, previous: Dict[str, Any],
            notes: List[str], last: Optional[Dict[str, Any]] = None) -> List[CheckRow]:
    """Each program checked against its reference, or its last check reused when nothing it depends on changed."""
    keys, rows = _reusable_checks(files, ref_paths, s, previous)
    reused = [f.variant for f in files if rows[f.file] is not None]
    if reused:
        notes.append(f"checks reused from {previous.get('written')} for {', '.join(reused)}: the same program, "
                     "reference and bounds (--again checks again)")
    todo = [f for f in files if rows[f.file] is None]
    on_host = [f for f in todo if f.runs_on_host]
    _say_check_time(on_host, last or previous)
    spent: List[float] = []  # a first run has no earlier times: from the second check on, these say how long
    with progress("ExecuTorch host check", total=len(files)) as bar:
        for f in files:
            rows[f.file] = rows[f.file] or _check_one(f, refs[f.stem], s, spent, len(on_host), bar)
            rows[f.file].key = keys[f.file]
            bar.advance()
    if s.per_operator:
        _compare_operators([(f, rows[f.file]) for f in todo if rows[f.file].ran], ref_paths, s)
    return [rows[f.file] for f in files]


def _reusable_checks(files: List[PteFile], ref_paths, s: PteBenchSettings, previous: Dict[str, Any]) -> tuple:
    """({file: what its check depends on}, {file: its last check when that is unchanged, else None})."""
    keys = {f.file: check_key(f, ref_paths[f.stem], s) if f.runs_on_host else "" for f in files}
    return keys, {f.file: _reused_check(previous, keys[f.file]) if keys[f.file] else None for f in files}


def _check_one(f: PteFile, reference: Dict[str, Any], s: PteBenchSettings, spent: List[float], total: int,
               bar) -> CheckRow:
    """One program's check, timed (its time joins ``spent``, of ``total`` checks that run here)."""
    eta = time_left(spent, total - len(spent), "the checks") if f.runs_on_host else ""
    bar.describe(f"{f.file}: check against the {'eager model' if f.precision == 'fp32' else 'int8 reference'}" + eta)
    t0 = time.monotonic()
    row = check_program(f, reference, s)
    row.seconds = time.monotonic() - t0
    if f.runs_on_host:
        spent.append(row.seconds)
    return row


def _compare_operators(compare: List[Tuple[PteFile, CheckRow]], ref_paths, s: PteBenchSettings) -> None:
    """Each checked program's per-operator comparison (one child process for all); its time shared out."""
    if not compare:
        return
    log.info("per-operator comparison of %d program(s) in a child process", len(compare))
    t0 = time.monotonic()
    found = per_operator([(f, ref_paths[f.stem]) for f, _ in compare], s.models, s.debug_buffer_mb)
    share = (time.monotonic() - t0) / len(compare)
    for f, row in compare:
        row.operators, row.operator_note = found[f.file]
        row.seconds += share


def _say_check_time(todo: List[PteFile], times: Dict[str, Any]) -> None:
    """How long the checks to run will take, from the last results' times for the same programs (when known)."""
    last = {row.get("file"): row for row in times.get("checks") or [] if isinstance(row, dict)}
    known = [float(last[f.file]["seconds"]) for f in todo if (last.get(f.file) or {}).get("seconds")]
    if todo and len(known) == len(todo):
        log.info("checking %d program(s): about %s (their last checks)", len(todo), _duration(sum(known)))
    elif todo:
        log.info("checking %d program(s), then their per-operator comparison in a child process", len(todo))


def _unstable(lines: List[BenchLine], taken) -> List[str]:
    timed = [x for x in lines if x.timing]
    return unstable_notes({x.label: x.timing.spread_pct for x in timed if x.timing.unstable},
                          timed[0].timing.repeats if timed else 0, taken)


def load_reference(path: Path) -> Dict[str, Any]:
    import pickle

    import torch

    try:
        ref = torch.load(path, weights_only=True)
        if not isinstance(ref, dict) or not {"inputs", "expected"} <= set(ref):
            raise ValueError("not a torchdroid reference (inputs and expected outputs)")
        return ref
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as e:
        raise RecordError(f"the reference file {path} cannot be read", cause=f"{type(e).__name__}: {e}",
                          remedy="run `invoke convert --format executorch --force`") from e


def _write(s: PteBenchSettings, checks, lines, notes, ratios, timing_key: str, taken: Optional[Conditions]) -> Path:
    import torch

    body = {"models": str(s.models),
            "torch": torch.__version__, "executorch": executorch_pins.identity(), "threads": s.threads,
            "executorch_threads": EXECUTORCH_THREADS,
            "warmup": s.warmup, "iters": s.iters, "checks": [asdict(c) for c in checks],
            "repeat": s.repeat, "reference_kernels": s.reference_kernels, "rows": [asdict(x) for x in lines],
            "speedups": speedups(lines, ratios), "ratios": [r.as_dict() for r in ratios], "timing_key": timing_key,
            "notes": notes, "conditions": taken.as_dict() if taken else None}  # how the timing rounds were taken
    own_dir(Path(s.out), "bench-executorch")  # each file listed in its manifest: clean keeps the user's
    return PteHostBenchRecord(body).write(Path(s.out) / PteHostBenchRecord.NAME)


def check_cells(c: CheckRow) -> tuple:
    """One row of the check table, as text."""
    diff = f"{c.max_abs_diff:.2e}" if c.max_abs_diff is not None else "-"
    limit = (f"{c.limit:.2e}" if c.limit is not None else
             f"rel {c.rel_error:.3f} <= {INT8_BUDGET_FACTOR:g}x{c.rel_budget:.3f}, {c.max_lsb_diff} LSB" if c.rel_budget is not None else "-")
    top = f"{c.top1_agreement:.0%}/{c.top5_agreement:.0%}" if c.top1_agreement is not None else "-"
    ops = f"{len(c.operators)} rows" if c.operators else (c.operator_note or "-")[:40]
    verdict = "ok" if c.ok else (f"not run: {c.reason}" if not c.ran else f"FAILED: {c.reason}")
    return c.variant, c.reference, diff, limit, top, ops, verdict


def speedups(lines: List[BenchLine], ratios: Sequence[Any]) -> Dict[str, float]:
    """Each line's speed-up over the legacy TorchScript CPU line of the same model and precision: the headline of its
    per-round ratios (``ratios``, :class:`toolchain.stats.Comparison`'s one rule); the timed baselines 1.0."""
    out = {x.label: 1.0 for x in lines if x.runtime == "torchscript-cpu" and x.timing}
    out.update((r.other, round(r.value, 3)) for r in ratios)
    return out