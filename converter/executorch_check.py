"""The ExecuTorch format's host check: does each ``.pte`` program compute what its recorded reference does?

Every program the host runtime can run is run on the recorded reference inputs and compared with the recorded
expected outputs, output tensor by output tensor (:func:`judge_outputs`).  fp32: the eager model, within
``float_atol + float_rtol * max|ref|``.  int8: the PT2E reference graph, whose relative L2 error may not exceed
INT8_BUDGET_FACTOR times the reference's own error against the eager float model on the held-out inputs; and where a
dequantize produces the output, every value on its int8 grid (:func:`grid_rule`: a float operation after the last
dequantize, e.g. bilinear upsampling, puts it off the grid by design, and the row says so).  XNNPACK requantizes in
integers where the reference computes in float, a few LSBs per layer that add up over a deep network, so an LSB or a
top-1 bound would judge the model's fragility rather than the delegate: the largest LSB difference and the top-1 /
top-5 agreement are reported beside it.  A check is reused while nothing it depends on changes (:func:`check_key`).

Per operator: ETDump with a debug buffer plus the ETRecord written at convert time go through ExecuTorch's Inspector
(``calculate_numeric_gap``); a delegate is opaque to it, so an XNNPACK program compares per delegated block, the
portable program per operator.  ETDump aborts the process (C++) when the debug buffer is too small for a program's
intermediate outputs, so the comparison runs in a child (:func:`per_operator`), forked from the stage: it starts with
the torch and ExecuTorch already imported (a new interpreter spent ~12 s of CPU importing them again).  It computes
on one thread: OpenMP's thread team does not survive a fork (a parallel region in the child waits for the parent's
threads forever); PyTorch's and ExecuTorch's own thread pools reset themselves in a forked child.  By hand:

    python -m converter.executorch_check JOBS_JSON DEBUG_BUFFER_MB

JOBS_JSON: a list of ``{"program", "etrecord", "reference", "out"}`` (absolute paths; ``out`` is the JSON written).
"""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import signal
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from toolchain.fsutil import atomic_write_json, digest_of, sha256_file
from toolchain.progress import duration, progress, time_left
from toolchain.records import PteFile, host_outputs, load_program, load_reference, program_args
from toolchain.record_base import FlatRecord

from .reuse import code_digest, made_with

log = logging.getLogger(__name__)
CHECK_PROTOCOL = 2  # bump when what a check measures changes
GRID_TOLERANCE_LSB = 1e-3  # float rounding of (q - zero_point) * scale; a float output is ~0.25 LSB off on average
INT8_RANGE = (-128, 127)  # XNNPACKQuantizer's activations are int8
# the int8 program may differ from the PT2E reference by twice the reference's own error against the float model:
# a program no further from the float model than the reference is, is within that of it (triangle inequality);
# both are int8 realisations of one float model that round differently (XNNPACK requantizes in integers)
INT8_BUDGET_FACTOR = 2.0


@dataclass
class CheckRow(FlatRecord):
    """One program's check (a row of executorch-host-bench.json's ``checks``)."""

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


def check_program(f: PteFile, reference: Dict[str, Any], s: Any) -> CheckRow:
    """One program run on the reference inputs and judged (``s``: the bounds, PteBenchSettings)."""
    row = CheckRow(f.variant, f.file, ran=f.runs_on_host,
                   reference="eager model" if f.precision == "fp32" else "PT2E int8 reference graph")
    if not f.runs_on_host:
        row.reason = (f.extra.get("host_check") or {}).get("reason", "its delegate is not in this host runtime")
        return row
    f.check_hash()
    outputs = [_as_recorded(y) for y in host_outputs(f.path, reference["inputs"])]
    row.held_out = bool(reference.get("held_out"))
    return judge_outputs(f, outputs, reference, s, row)


def _as_recorded(values: List[Any]):
    """A program's outputs as the reference records them: one tensor, or a tuple for several."""
    return values[0] if len(values) == 1 else tuple(values)


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


def judge_outputs(f: PteFile, outputs: List[Any], reference: Dict[str, Any], s: Any, row: CheckRow) -> CheckRow:
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
        error, budget = _judge_output(f, zip(gots, refs, flts), None if why else rule, s, row, agreement)
        if excess is None or error - INT8_BUDGET_FACTOR * budget > excess:
            excess, row.rel_error, row.rel_budget = error - INT8_BUDGET_FACTOR * budget, error, budget
    row.grid_rule = "; ".join(skipped)
    row.inputs = len(outputs)
    if agreement[2]:
        row.top1_agreement, row.top5_agreement = agreement[0] / agreement[2], agreement[1] / agreement[2]
    problems = _problems(f, row)
    row.ok, row.reason = not problems, "; ".join(problems)
    return row


def _judge_output(f: PteFile, triples, qparams, s: Any, row: CheckRow, agreement: list) -> tuple:
    """One output tensor over the reference inputs (``triples``: the program's, the reference's, the float model's):
    the row's differences, grid offsets (``qparams``: the output's quantization, when the grid check applies) and
    top-1/top-5 sums; returns (worst relative error against the reference, worst relative error of the reference
    against the float model)."""
    from .host_check import is_logits

    error = budget = 0.0
    for got, ref, flt in triples:
        got, ref, flt = got.double(), ref.double(), flt.double()
        diff = float((got - ref).abs().max())
        row.max_abs_diff = max(row.max_abs_diff or 0.0, diff)
        if f.precision == "fp32":
            row.limit = max(row.limit or 0.0, s.float_atol + s.float_rtol * max(float(ref.abs().max()), 1.0))
        elif qparams and qparams.get("scale"):
            row.max_lsb_diff = max(row.max_lsb_diff or 0, int(round(diff / qparams["scale"])))
        error, budget = max(error, _rel(got, ref)), max(budget, _rel(ref, flt))
        if qparams:
            off, (lo, hi) = grid_offset(got, qparams)
            row.grid_offset_lsb = max(row.grid_offset_lsb or 0.0, off)
            row.codes = (min(row.codes[0], lo), max(row.codes[1], hi)) if row.codes else (lo, hi)
        if is_logits(ref):  # top-1/top-5 only where the output is [N, classes] logits
            a, b = got.reshape(-1), ref.reshape(-1)
            top = min(5, a.numel())
            agreement[0] += int(a.argmax() == b.argmax())
            agreement[1] += len(set(a.topk(top).indices.tolist()) & set(b.topk(top).indices.tolist())) / top
            agreement[2] += 1
    return error, budget


def _rel(a, b) -> float:
    return float((a - b).norm() / max(float(b.norm()), 1e-12))


def _problems(f: PteFile, row: CheckRow) -> List[str]:
    if f.precision == "fp32":
        if row.max_abs_diff is not None and row.max_abs_diff <= row.limit:
            return []
        return [f"max |diff| {row.max_abs_diff:.3g} > {row.limit:.3g} against the {row.reference}"]
    problems = []  # the grid check where it applies: to every output a dequantize produces (none skipped, or some)
    if row.grid_offset_lsb is None and not row.grid_rule:
        problems.append("the int8 output's scale and zero point are not recorded (convert again with --force)")
    elif row.grid_offset_lsb is not None and (row.grid_offset_lsb > GRID_TOLERANCE_LSB or not (
            INT8_RANGE[0] <= row.codes[0] and row.codes[1] <= INT8_RANGE[1])):
        problems.append(f"its outputs are not dequantized int8 values of the recorded output quantization (up to "
                        f"{row.grid_offset_lsb:.2f} LSB off the grid, codes {row.codes[0]}..{row.codes[1]}): not the "
                        "int8 program's output")
    limit = None if row.rel_budget is None else INT8_BUDGET_FACTOR * row.rel_budget
    if row.rel_error is None or limit is None or row.rel_error > limit:
        problems.append(f"relative error {row.rel_error:.3g} against the {row.reference} exceeds "
                        f"{INT8_BUDGET_FACTOR:g}x the quantization's own error against the float model "
                        f"({row.rel_budget:.3g}, held-out inputs)")
    return problems


def check_cells(c: CheckRow) -> tuple:
    """One row of the check table, as text."""
    diff = f"{c.max_abs_diff:.2e}" if c.max_abs_diff is not None else "-"
    limit = (f"{c.limit:.2e}" if c.limit is not None else
             f"rel {c.rel_error:.3f} <= {INT8_BUDGET_FACTOR:g}x{c.rel_budget:.3f}, {c.max_lsb_diff} LSB" if c.rel_budget is not None else "-")
    top = f"{c.top1_agreement:.0%}/{c.top5_agreement:.0%}" if c.top1_agreement is not None else "-"
    ops = f"{len(c.operators)} rows" if c.operators else (c.operator_note or "-")[:40]
    verdict = "ok" if c.ok else (f"not run: {c.reason}" if not c.ran else f"FAILED: {c.reason}")
    return c.variant, c.reference, diff, limit, top, ops, verdict


# --------------------------------------------------------------------------- every program, reusing unchanged checks


CHECK_CODE = ("executorch_check.py", "host_check.py")  # the converter code a check's result depends on


def check_key(f: PteFile, ref_path: Path, s: Any) -> str:
    """What a check's result depends on: the program, its reference and ETRecord, the bounds, the versions it runs
    with (:func:`made_with`'s), the check's own code (CHECK_CODE: a change to it checks again what the last record
    holds)."""
    etrecord = (f.extra.get("etrecord") or {}).get("sha256")
    return digest_of([CHECK_PROTOCOL, f.sha256, sha256_file(ref_path), etrecord, s.float_atol, s.float_rtol,
                      s.per_operator, s.debug_buffer_mb, made_with(executorch=True), code_digest(only=CHECK_CODE)])


def _reused_check(previous: Dict[str, Any], key: str) -> Optional[CheckRow]:
    row = next((r for r in previous.get("checks") or [] if isinstance(r, dict) and key and r.get("key") == key), None)
    try:
        c = CheckRow.from_dict(row) if row else None
    except TypeError:
        return None
    if c is not None:
        c.codes = tuple(c.codes) if c.codes else None
    return c


def check_all(files: List[PteFile], refs, ref_paths, s: Any, previous: Dict[str, Any], notes: List[str],
              last: Dict[str, Any]) -> List[CheckRow]:
    """Each program checked against its reference, or its check in ``previous`` (the last record's) reused when
    nothing it depends on changed; ``last``: the last record, whose check times say how long the checks take."""
    keys, rows = _reusable(files, ref_paths, s, previous, notes)
    todo = [f for f in files if rows[f.file] is None]
    on_host = [f for f in todo if f.runs_on_host]
    _say_check_time(on_host, last)
    spent: List[float] = []  # a first run has no earlier times: from the second check on, these say how long
    with progress("ExecuTorch host check", total=len(files)) as bar:
        for f in files:
            rows[f.file] = rows[f.file] or _check_one(f, refs[f.stem], s, spent, len(on_host), bar)
            rows[f.file].key = keys[f.file]
            bar.advance()
    if s.per_operator:
        _compare_operators([(f, rows[f.file]) for f in todo if rows[f.file].ran], ref_paths, s)
    return [rows[f.file] for f in files]


def _reusable(files: List[PteFile], ref_paths, s: Any, previous: Dict[str, Any], notes: List[str]) -> tuple:
    """({file: what its check depends on}, {file: its last check when that is unchanged, else None})."""
    keys = {f.file: check_key(f, ref_paths[f.stem], s) if f.runs_on_host else "" for f in files}
    rows = {f.file: _reused_check(previous, keys[f.file]) for f in files}
    if any(rows.values()):
        notes.append(f"checks reused from {previous.get('written')} for "
                     f"{', '.join(f.variant for f in files if rows[f.file])}: the same program, reference and bounds "
                     "(--again checks again)")
    return keys, rows


def _check_one(f: PteFile, reference: Dict[str, Any], s: Any, spent: List[float], total: int, bar) -> CheckRow:
    """One program's check, timed (its time joins ``spent``, of ``total`` checks that run here)."""
    eta = time_left(spent, total - len(spent), "the checks") if f.runs_on_host else ""
    bar.describe(f"{f.file}: check against the {'eager model' if f.precision == 'fp32' else 'int8 reference'}" + eta)
    t0 = time.monotonic()
    row = check_program(f, reference, s)
    row.seconds = time.monotonic() - t0
    if f.runs_on_host:
        spent.append(row.seconds)
    return row


def _say_check_time(todo: List[PteFile], last: Dict[str, Any]) -> None:
    """How long the checks to run will take, from the last results' times for the same programs (when known)."""
    times = {row.get("file"): row.get("seconds") for row in last.get("checks") or [] if isinstance(row, dict)}
    known = [float(times[f.file]) for f in todo if times.get(f.file)]
    if todo and len(known) == len(todo):
        log.info("checking %d program(s): about %s (their last checks)", len(todo), duration(sum(known)))
    elif todo:
        log.info("checking %d program(s), then their per-operator comparison in a child process", len(todo))


def _compare_operators(compare: List[Tuple[PteFile, CheckRow]], ref_paths, s: Any) -> None:
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


# --------------------------------------------------------------------------- per operator, in a forked child


def per_operator(programs: Sequence[Tuple[PteFile, Path]], models_dir: Path, debug_buffer_mb: int) -> Dict[str, tuple]:
    """``{file: (rows, note)}`` for ``(program, reference path)`` pairs: the Inspector's numeric gap per operator
    (per delegated block for a delegate), in one child process for all the programs; when the child dies on a
    program, that program gets the reason and a new child goes on with the programs after it."""
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


def _note(f: PteFile) -> str:
    return ("the XNNPACK delegate is opaque to the Inspector: its graph compares as one block per delegate call"
            if f.delegate == "xnnpack" else "per operator (portable kernels)")


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
    """``(exit code, output)`` of one child comparing ``todo`` in turn; the jobs are written to ``jobs_file`` (what
    ``python -m converter.executorch_check`` reads by hand), with absolute paths: what the child reads does not
    depend on its working directory."""
    atomic_write_json(jobs_file, [{"program": str(Path(f.path).resolve()),
                                   "etrecord": str((models_dir / f.extra["etrecord"]["file"]).resolve()),
                                   "reference": str(Path(ref).resolve()), "out": str(out)}
                                  for (f, ref), out in zip(todo, outs)])
    return compare_forked(jobs_file, debug_buffer_mb)


def numeric_gap(program: Path, etrecord: Path, example, debug_buffer_mb: int) -> list:
    """Inspector.calculate_numeric_gap (MSE) of the program's run on ``example``, one row per compared block."""
    from executorch.devtools import Inspector
    loaded = load_program(program, enable_etdump=True, debug_buffer_size=debug_buffer_mb << 20)
    loaded.load_method("forward").execute(program_args(example))
    with tempfile.TemporaryDirectory(prefix="torchdroid-etdump-") as tmp:
        etdump, debug = Path(tmp) / "run.etdp", Path(tmp) / "run.debug"
        loaded.write_etdump_result_to_file(str(etdump), str(debug))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inspector = Inspector(etdump_path=str(etdump), etrecord=str(etrecord), debug_buffer_path=str(debug))
            gap = inspector.calculate_numeric_gap("MSE")
    return [{"aot_ops": list(r["aot_ops"]), "runtime_ops": list(r["runtime_ops"]), "mse": float(r["gap"][0])}
            for r in gap.to_dict("records")]


def main(argv=None) -> int:
    """Compare the jobs of JOBS_JSON in turn (the child's work; by hand: ``python -m converter.executorch_check``)."""
    jobs, mb = (argv or sys.argv[1:])[:2]
    for job in json.loads(Path(jobs).read_text()):
        ref = load_reference(Path(job["reference"]))
        example = ref.get("example", ref["inputs"][0])  # the ETRecord's representative input (lowering's example)
        rows = numeric_gap(Path(job["program"]), Path(job["etrecord"]), example, int(mb))
        atomic_write_json(Path(job["out"]), {"rows": rows})
    return 0


def compare_forked(jobs: Path, debug_buffer_mb: int) -> Tuple[int, str]:
    """``(exit code, output)`` of :func:`main` on ``jobs`` in a forked child (negative: killed by that signal, e.g.
    -6 for ETDump's abort); the child's stdout and stderr, Python's and native code's, go to a file beside
    ``jobs``.  Interrupted (Ctrl-C), the parent kills the child before it raises: no comparison outlives the stage."""
    output = jobs.with_suffix(".out")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the parent's code, never runs its atexit handlers
        code = 1
        try:
            fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            if faulthandler.is_enabled():  # (PYTHONFAULTHANDLER, pytest) a crash's traceback goes to that file too
                faulthandler.enable(file=2)
            import torch

            torch.set_num_threads(1)  # OpenMP's team is not usable after a fork
            code = main([str(jobs), str(debug_buffer_mb)])
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status), output.read_text(errors="replace") if output.is_file() else ""


if __name__ == "__main__":
    sys.exit(main())
