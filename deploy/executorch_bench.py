"""The ExecuTorch format of deploy's one loop: ExecuTorch's executor_runner and the .pte programs on every phone.

`invoke deploy-executorch` is deploy (deploy/orchestrate.py) with this format: the same device selection (``--serial``,
``ANDROID_SERIAL``, every adb server of ``deploy.servers``), the same lock of the project's directory, push, checks
and statistics.  Planned once on the host (:func:`plan_executorch`: the runner build-android recorded, the XNNPACK /
portable programs, the numerics check's inputs and host outputs); per device (:func:`run_programs`, a step of
deploy/device_run.py) they go to ``<project>/executorch`` and the programs run in ``repeat`` alternated rounds,
each as ``executor_runner --model_path=P --num_executions=warmup+iters --cpu_threads=T`` (the remote exit code is
checked); the runner's ``Iteration i of N: X ms`` lines give the samples, the first ``warmup`` of each run dropped,
summarised like the TorchScript binary's (deploy/bench.py).  Each program's row is a row of the run (``format =
executorch``, deploy/rows.program_row), journaled the moment it is measured like every TorchScript row.
:func:`record_executorch` puts each device's programs beside the same run's TorchScript CPU and NNAPI rows
(quant_none and quant_full), gives every line's speed-up over the CPU model of the same precision and gathers
the facts the run's document keeps (``DeployResults.executorch``: per-operator tables, problems, notes).

Is the answer right (``deploy.numerics``, on by default): each program runs once more per recorded reference input
with ``--inputs=... --print_output=all`` and its printed outputs are compared with the host ExecuTorch runtime's on
the same inputs (deploy/pte_numerics.py); the verdicts go to the device's one list, in the run's document.
"""

from __future__ import annotations

import logging
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from toolchain import pins
from toolchain.errors import RecordError, UsageError
from toolchain.numerics_records import NumericsVerdict
from toolchain.records import PteFile, pte_files
from toolchain.pte_results import PteResultRow, add_speedups
from toolchain.records import BuildInfo, ResultRow

from .bench import BenchOptions, BenchStats, ParsedRun, stoppable, summarize
from .plan import BinaryPlan, DeploySettings, _recorded, unoptimized_warnings
from .preflight import elf_abi, load_alignment
from .push import PushItem, push_all
from .rows import program_row

log = logging.getLogger(__name__)
ON_DEVICE_DELEGATES = ("xnnpack", "portable")  # what a runner built with XNNPACK (and the portable kernels) runs
ITERATION = re.compile(pins.RUNNER_ITERATION_RE)
SUBDIR = "executorch"  # <device_dir>/<project>/executorch: under the project directory's lock
BUILD = "invoke build-android --lane executorch"
TRACED_RUNNER = f"{pins.RUNNER}_traced"  # build-android's second runner, with the event tracer (EB4)
RUN_TRACE = "run.etdump"  # where a traced runner's timing and output runs put the ETDump it always writes (removed)
TRACED_NOTE = ("traced: the runner was built with the event tracer (every execution profiled, EB4) and the build has "
               f"no untraced one: run `{BUILD}` (it builds both) for latencies without the tracer's overhead")


@dataclass
class ExecutorchPlan:
    """What every phone gets: the runners (as their build-info recorded them), the programs, the numerics inputs."""

    build_info: Path
    runner: BinaryPlan  # the runner the timing rounds run
    programs: List[PteFile]
    items: List[PushItem]
    timing: str = pins.RUNNER  # its name: the untraced runner when the build has one
    tracer: Optional[str] = None  # the runner built with the event tracer (per-operator tables); None: not built
    inputs: Optional[Dict[str, Any]] = None  # stem -> pte_numerics.ProgramInputs; None: the outputs are not checked
    references: Dict[str, Any] = field(default_factory=dict)  # file -> the host's outputs (a FileReference)
    work: Optional[tempfile.TemporaryDirectory] = None  # the numerics inputs' files, removed with the plan

    @property
    def traced_timing(self) -> bool:
        """Only a traced runner: every latency carries the tracer's overhead (and says so)."""
        return self.timing == self.tracer


def recorded_runners(info: BuildInfo) -> Tuple[List[PushItem], str, Optional[str]]:
    """The runners the build-info lists (each checked against its recorded hash), the timing runner's name and the
    traced one's (None: none built).  build-android records an untraced ``executor_runner`` and
    ``executor_runner_traced``, each with its ``event_tracer``; an earlier one recorded one runner, traced when its
    top-level ``event_tracer`` says so (EB4).  The timing runner is the untraced one when there is one."""
    listed = {a["name"]: a for a in info.get("artefacts", []) if a.get("name") in (pins.RUNNER, TRACED_RUNNER)}
    traced = {name: bool(a.get("event_tracer", info.get("event_tracer") if name == pins.RUNNER else True))
              for name, a in listed.items()} or {pins.RUNNER: bool(info.get("event_tracer"))}
    timing = next((name for name, on in traced.items() if not on), next(iter(traced)))
    tracer = next((name for name, on in traced.items() if on), None)
    items = [PushItem(_recorded(info, name, remedy=f"run `{BUILD}` again (it rewrites the build-info)"), name, 0o755,
                      listed.get(name, {}).get("sha256")) for name in dict.fromkeys((timing, tracer)) if name]
    return items, timing, tracer


def parse_iterations(output: str) -> List[float]:
    """The per-execution times (ms) executor_runner logged, in order."""
    return [float(m.group(3)) for m in ITERATION.finditer(output)]


def runner_command(directory: str, program: str, runs: int, threads: int, etdump: Optional[str] = None,
                   runner: str = pins.RUNNER, printed: Optional[str] = None) -> str:
    """The runner's one command line; ``etdump``: a runner built with the event tracer writes its ETDump there (EB4);
    ``printed``: print every output (E19-E20), the executions on that input file ("": the all-ones default, E18)."""
    trace = f" --etdump_path={shlex.quote(etdump)}" if etdump else ""
    check = "" if printed is None else (f" --inputs={shlex.quote(printed)}" if printed else "") + " --print_output=all"
    return stoppable(directory, f"./{runner} --model_path={shlex.quote(program)}{check} "
                                f"--num_executions={int(runs)} --cpu_threads={int(threads)}{trace} 2>&1")


def threads(opts: BenchOptions) -> int:
    """``--cpu_threads``: deploy.threads (0, which leaves the TorchScript binary's flag out, runs one thread)."""
    return int(opts.threads or 1)


def program_stats(outputs: Sequence[str], warmup: int) -> Optional[BenchStats]:
    """deploy's statistics (bench.summarize) over the runs' executions, the first ``warmup`` of each run dropped."""
    return summarize([ParsedRun(True, [ms * 1000.0 for ms in parse_iterations(o)[warmup:]], None) for o in outputs])


def run_programs(run: Any) -> None:
    """This format's step of one device's deploy (deploy/device_run.py ``DeviceRun``, under the project directory's
    lock): push, then ``repeat`` rounds each running every program once (warm-up + iterations) on the untraced runner,
    the order rotating by one per round so the programs are compared in the same minutes; then, per program, its
    per-operator table from one more run of the traced runner and its output check.  A program whose run fails is not
    run again and keeps the runner's output as its note."""
    et: ExecutorchPlan = run.plan.executorch
    directory = f"{run.directory}/{SUBDIR}"
    run.status("pushing ExecuTorch's runner and programs")
    push_all(run.dev, directory, et.items, on_progress=run.status, hashes=run.plan.hashes)
    if not run.s.bench:  # deploy.bench off: pushed only
        return
    outputs, failures = _timing_rounds(run, et, directory)
    for f in et.programs:
        run.go_on()
        failure = failures.get(f.file, "")
        stats = None if failure else program_stats(outputs[f.file], run.s.options.warmup)
        row = program_row(run.facts, et.runner, f, stats, failure, run.s.options, et.traced_timing)
        run.rep.add_row(row)  # onto the disk at once (the run's journal), like every TorchScript row
        run.rep.operators.append(_operators(run, et, directory, f, row))
        if et.inputs is not None:
            run.status(f"checking the output of {f.file}")
            run.rep.numerics.append(_answer(run, et, directory, f, row))


def _timing_rounds(run: Any, et: ExecutorchPlan, directory: str) -> Tuple[Dict[str, List[str]], Dict[str, str]]:
    """The runs' outputs per program and why a program failed.  The timing runner is the untraced one; when the build
    has only a traced runner, the ETDump it writes after every run goes to :data:`RUN_TRACE`, removed after."""
    opts, programs = run.s.options, et.programs
    runs = opts.warmup + opts.iters
    trace = RUN_TRACE if et.traced_timing else None
    outputs: Dict[str, List[str]] = {f.file: [] for f in programs}
    failures: Dict[str, str] = {}
    for r in range(opts.repeat):
        for f in [programs[(r + i) % len(programs)] for i in range(len(programs))]:
            if f.file in failures:
                continue
            run.go_on()
            run.status(f"running {f.file} (round {r + 1} of {opts.repeat}, {opts.warmup} + {opts.iters} executions)")
            res = run.dev.shell(runner_command(directory, f.file, runs, threads(opts), trace, et.timing),
                                timeout=opts.timeout)
            run.go_on()  # a run stopped by Ctrl-C is not a result
            times = parse_iterations(res.output)
            if not res.ok or len(times) != runs:
                failures[f.file] = (f"executor_runner exited {res.code} after {len(times)} of {runs} executions: "
                                    + " | ".join(res.tail(3)))
            else:
                outputs[f.file].append(res.output)
    if trace:
        run.dev.shell(f"rm -f {shlex.quote(f'{directory}/{trace}')}", timeout=opts.timeout)
    return outputs, failures


def _answer(run: Any, et: ExecutorchPlan, directory: str, f: PteFile, row: ResultRow) -> NumericsVerdict:
    """Is the phone's answer right: the program's printed outputs on each input (the timing runner, once per input)
    against the host's."""
    from . import pte_numerics as pn

    if row.status != "ok":
        return NumericsVerdict(run.dev.serial, f.file, pn.BACKEND, f.precision, "unknown",
                               reason="the program did not run: " + row.reason)
    trace, opts = RUN_TRACE if et.traced_timing else None, run.s.options
    verdict = pn.check_program(run.dev, f, et.inputs[f.stem], et.references[f.file], lambda name: runner_command(
        directory, f.file, 1, threads(opts), trace, et.timing, name or ""), opts.timeout)
    if trace:
        run.dev.shell(f"rm -f {shlex.quote(f'{directory}/{trace}')}", timeout=opts.timeout)
    return verdict


def plan_executorch(s: DeploySettings) -> ExecutorchPlan:
    """The runner build-android recorded (a rebuilt, replaced or modified file is refused, like the TorchScript
    binary; the phone's copy is verified against the recorded hash too), the programs it runs (each checked against
    the manifest: a tampered program is never pushed) and, with ``numerics``, their inputs and host outputs."""
    remedy = f"run `{BUILD}` first (or pass its build-info with --build-info)"
    if s.runner_build_info is None:
        raise UsageError("no build-info of ExecuTorch's runner was given", remedy=remedy)
    info = BuildInfo.load(s.runner_build_info, remedy=remedy)
    if info.lane != pins.RUNTIME_LANE:
        raise UsageError(f"{info.path} is a {info.lane!r} build, not ExecuTorch's runner",
                         remedy=f"run `{BUILD}` and pass its build-info")
    items, timing, tracer = recorded_runners(info)
    programs = [f for f in pte_files(s.models) if f.delegate in ON_DEVICE_DELEGATES]
    for f in programs:
        f.check_hash()
    path = items[0].local
    runner = BinaryPlan(path, info.abi or elf_abi(path), info.commit or "", load_alignment(path))
    plan = ExecutorchPlan(Path(s.runner_build_info), runner, programs,
                          items + [PushItem(f.path, f.file, 0o644, f.sha256) for f in programs], timing, tracer)
    if s.numerics:  # each model's inputs (pushed as files), each program's host outputs on them
        from . import pte_numerics as pn

        plan.work = tempfile.TemporaryDirectory(prefix="torchdroid-et-inputs-")
        plan.inputs = pn.program_inputs(s.models, sorted({f.stem for f in programs}), programs, Path(plan.work.name))
        plan.references = {f.file: pn.host_reference(f, plan.inputs[f.stem]) for f in programs}
        plan.items += pn.push_items(plan.inputs)
    return plan


def legacy_rows(rows: Sequence[ResultRow], stems: Sequence[str]) -> List[PteResultRow]:
    """The run's TorchScript binary benchmark's quant_none / quant_full CPU and NNAPI medians of one device."""
    out = []
    for r in rows:
        if (r.format == "torchscript" and r.source == "binary" and r.stem in stems and r.status == "ok"
                and r.variant in ("quant_none", "quant_full")):
            label = f"{'TorchScript CPU' if r.backend == 'cpu' else 'NNAPI'} {r.variant}"
            out.append(PteResultRow(r.serial, label, "fp32" if r.mode == "none" else "int8", r.model_file, "ok",
                                    r.median_ms, r.p90_ms, r.min_ms, r.samples, note=f"deploy run {r.run_id}"))
    return out


def program_line(r: ResultRow) -> PteResultRow:
    """An ExecuTorch program's row of the run as a line of the ExecuTorch record."""
    return PteResultRow(r.serial, f"ExecuTorch {r.variant}{' (traced)' if r.has_flag('traced') else ''}",
                        r.variant.split("-")[0], r.model_file, "ok" if r.status == "ok" else "failed", r.median_ms,
                        r.p90_ms, r.min_ms, r.samples, note=r.reason)


def device_lines(rows: Sequence[ResultRow], stems: Sequence[str]) -> List[PteResultRow]:
    """One device's lines of a run: its ExecuTorch programs beside its TorchScript CPU and NNAPI rows of the same
    models (none when no program ran)."""
    programs = [r for r in rows if r.format == "executorch"]
    return legacy_rows(rows, stems) + [program_line(r) for r in programs] if programs else []


@dataclass
class ExecutorchRun:
    """The ExecuTorch format's part of a run: per device its lines (the programs beside the run's TorchScript rows,
    with their speed-ups) and the facts the run's document keeps (``DeployResults.executorch``)."""

    rows: List[PteResultRow]
    facts: Dict[str, Any]

    @property
    def problems(self) -> List[str]:
        return self.facts.get("problems", [])


def record_executorch(s: DeploySettings, et: ExecutorchPlan, reports: Sequence[Any]) -> ExecutorchRun:
    """Every device's ExecuTorch rows (kept in the run like the TorchScript ones) beside the run's TorchScript rows of
    that device, each device's failure and each failed program a problem; the facts go into the run's document."""
    stems = sorted({f.stem for f in et.programs})
    rows: List[PteResultRow] = []
    problems: List[str] = []
    for rep in reports:
        rows += device_lines(rep.rows, stems)
        problems += [f"{rep.serial}: {' '.join(line.strip() for line in e.splitlines())}" for e in rep.errors]  # with the fix
        problems += [f"{rep.serial}: {r.model_file}: {r.reason}" for r in rep.rows
                     if r.format == "executorch" and r.status != "ok"]
    add_speedups(rows)
    opts = s.options
    facts = {"models": str(Path(s.models).resolve()), "build_info": str(et.build_info.resolve()),
             "warmup": opts.warmup, "iters": opts.iters, "repeat": opts.repeat, "threads": threads(opts),
             "checked": et.inputs is not None, "operators": [o for rep in reports for o in rep.operators],
             "problems": problems, "notes": _baseline_notes(s.models) + ([TRACED_NOTE] if et.traced_timing else [])}
    return ExecutorchRun(rows, facts)


def _baseline_notes(models: Path) -> List[str]:
    """Every speed-up's baseline is the legacy CPU model: say so when those were not optimised for mobile."""
    from toolchain.records import ConvertManifest

    try:
        files = ConvertManifest.load(models).files
    except RecordError:
        return []
    return unoptimized_warnings([f for f in files if f.variant in ("quant_none", "quant_full")])


def _operators(run: Any, et: ExecutorchPlan, directory: str, f: PteFile, row: ResultRow) -> Dict[str, Any]:
    """The program's per-operator table from one run of the traced runner (its ETDump pulled back and removed from
    the phone), or "unknown" and why."""
    from .etdump import etdump_name, program_operators, unknown

    serial, opts = run.dev.serial, run.s.options
    if et.tracer is None:
        return unknown(serial, f.file, "the runner was built without ExecuTorch's event tracer: run "
                                       f"`{BUILD}` (event tracer on by default)")
    if row.status != "ok":
        return unknown(serial, f.file, "the program did not run: " + row.reason)
    run.status(f"reading where the time went in {f.file} (traced runner)")
    res = run.dev.shell(runner_command(directory, f.file, opts.warmup + opts.iters, threads(opts), etdump_name(f.file),
                                       et.tracer), timeout=opts.timeout)
    if not res.ok:
        return unknown(serial, f.file, f"the traced runner exited {res.code}: " + " | ".join(res.tail(2)))
    return program_operators(run.dev, directory, f, run.s.models, Path(run.s.results) / "etdump", opts.warmup)
