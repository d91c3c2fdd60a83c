"""The ExecuTorch format's own steps in deploy's one loop (deploy/formats.py): executor_runner and the .pte programs.

Planned once on the host (:func:`plan_executorch`: the runners build-android recorded, the XNNPACK / portable
programs, the output check's inputs and host outputs); per device (:func:`run_programs`, under the project
directory's lock) they go to ``<project>/executorch`` and run in ``repeat`` alternated rounds as
``executor_runner --model_path=P --num_executions=warmup+iters --cpu_threads=T``; its ``Iteration i of N: X ms``
lines are the samples (deploy/bench.py's statistics), each program's row a row of the run (``format = executorch``),
journaled when measured.  Then one traced run per program gives its per-operator table (deploy/etdump.py) and one
run per reference input with ``--inputs=... --print_output=all`` its outputs, judged against the host ExecuTorch
runtime's on the same inputs by deploy/numerics.py (fp32: the float rule plus half of ``%f``'s last digit; int8:
2 LSB of the recorded output quantization, unsnapped where a float operation follows the dequantize).
:func:`record_executorch` gathers what the run's document keeps (``DeployResults.executorch``); the report compares
the app's ExecuTorch with the runner's (:func:`runtime_notes`, docs/facts.md EA8).
"""

from __future__ import annotations

import re
import shlex
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from toolchain import pins
from toolchain.errors import RecordError, TorchdroidError, UsageError
from toolchain.fsutil import sha256_file
from toolchain.numerics_records import FileReference, NumericsVerdict, TensorValues
from toolchain.records import (PteFile, host_outputs, load_reference, load_section, program_args, pte_files,
                               reference_path)
from toolchain.records import AppInfo, BuildInfo, ResultRow

from .bench import BenchOptions, BenchStats, ParsedRun, stoppable, summarize
from .numerics import NoOutput, Subject, check_on_device
from .plan import BinaryPlan, DeploySettings, _recorded, baseline_notes
from .preflight import elf_abi, load_alignment
from .push import PushItem, push_all
from .results import Line, format_lines
from .rows import program_row

ON_DEVICE_DELEGATES = ("xnnpack", "portable")  # what a runner built with XNNPACK (and the portable kernels) runs
ITERATION = re.compile(pins.RUNNER_ITERATION_RE)
SUBDIR = "executorch"  # <device_dir>/<project>/executorch: under the project directory's lock
BUILD = "invoke build-android --lane executorch"
TRACED_RUNNER = f"{pins.RUNNER}_traced"  # build-android's second runner, with the event tracer (EB4)
RUN_TRACE = "run.etdump"  # where a traced runner's timing and output runs put the ETDump it always writes (removed)
BACKEND, HOST_KEY = "executorch", "host-executorch"  # its verdicts' backend, its host reference's name
OUTPUT_LINE = re.compile(r"^Output\[(\d+)\]\[(\d+)\]: \((float|int|char|bool)\) (\S+)")  # --print_output=all (E19)
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
    inputs: Optional[Dict[str, "ProgramInputs"]] = None  # per model stem; None: the outputs are not checked
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
    _drop_trace(run, et, directory)
    return outputs, failures


def _drop_trace(run: Any, et: ExecutorchPlan, directory: str) -> None:
    """A traced-only build's runs leave their ETDump in :data:`RUN_TRACE` (OF2): removed."""
    if et.traced_timing:
        run.dev.shell(f"rm -f {shlex.quote(f'{directory}/{RUN_TRACE}')}", timeout=run.s.options.timeout)


def _answer(run: Any, et: ExecutorchPlan, directory: str, f: PteFile, row: ResultRow) -> NumericsVerdict:
    """Is the phone's answer right: the program's printed outputs on each input (the timing runner, once per input)
    against the host's, each output by its own rule."""
    if row.status != "ok":
        return NumericsVerdict(run.dev.serial, f.file, BACKEND, f.precision, "unknown",
                               reason="the program did not run: " + row.reason)
    pi, ref, opts = et.inputs[f.stem], et.references[f.file], run.s.options
    host = next(iter(ref.outputs.values()), [])
    count = max(1, len(host) // (len(pi.tensors) or 1))  # outputs per run
    commands = [runner_command(directory, f.file, 1, threads(opts), RUN_TRACE if et.traced_timing else None,
                               et.timing, name) for name in pi.runs or [""]]
    v = check_on_device(run.dev, run.dev.serial, Subject(f.file, BACKEND, f.precision), commands, ref, opts.timeout,
                        read=partial(_printed, host, count))
    _drop_trace(run, et, directory)
    if f.precision == "int8" and v.tolerance:
        v.tolerance += rules_note(pi, count)
    return v


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
        plan.work = tempfile.TemporaryDirectory(prefix="torchdroid-et-inputs-")
        plan.inputs = program_inputs(s.models, programs, Path(plan.work.name))
        plan.references = {f.file: host_reference(f, plan.inputs[f.stem]) for f in programs}
        plan.items += [PushItem(p, p.name, 0o644, sha256_file(p)) for pi in plan.inputs.values() for p in pi.files]
    return plan


@dataclass
class ExecutorchRun:
    """The ExecuTorch format's part of a run: per device its lines (the programs beside the run's TorchScript rows,
    with their speed-ups) and the facts the run's document keeps (``DeployResults.executorch``)."""

    rows: List[Line]
    facts: Dict[str, Any]

    @property
    def problems(self) -> List[str]:
        return self.facts.get("problems", [])


def record_executorch(s: DeploySettings, et: ExecutorchPlan, reports: Sequence[Any]) -> ExecutorchRun:
    """Every device's ExecuTorch rows (kept in the run like the TorchScript ones) beside the run's TorchScript rows of
    that device, each device's failure and each failed program a problem; the facts go into the run's document."""
    problems: List[str] = []
    for rep in reports:
        problems += [f"{rep.serial}: {' '.join(line.strip() for line in e.splitlines())}" for e in rep.errors]  # with the fix
        problems += [f"{rep.serial}: {r.model_file}: {r.reason}" for r in rep.rows
                     if r.format == "executorch" and r.status != "ok"]
    opts, lines = s.options, format_lines([r for rep in reports for r in rep.rows])
    notes = baseline_notes(str(s.models), [x.row for x in lines]) + ([TRACED_NOTE] if et.traced_timing else [])
    return ExecutorchRun(lines, {
        "models": str(Path(s.models).resolve()), "build_info": str(et.build_info.resolve()), "warmup": opts.warmup,
        "iters": opts.iters, "repeat": opts.repeat, "threads": threads(opts), "checked": et.inputs is not None,
        "operators": [o for rep in reports for o in rep.operators], "problems": problems, "notes": notes})


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


# --------------------------------------------------------------------------- the output check's inputs and parser


@dataclass
class ProgramInputs:
    """What one model's programs run on: the recorded reference inputs (``<stem>-executorch-reference.pt``, written
    as raw little-endian files, E17) or, without them, the runner's all-ones default (E18)."""

    stem: str
    tensors: List[object] = field(default_factory=list)  # one per run: a tensor, or a tuple (one per program input)
    files: List[Path] = field(default_factory=list)  # their raw bytes here, pushed beside the programs
    source: str = "reference inputs"  # or "all-ones input (...why)"
    rules: List[Optional[Dict[str, object]]] = field(default_factory=list)  # each output's int8 rule, in order
    runs: List[str] = field(default_factory=list)  # per run: its files' names as --inputs takes them (a,b: E17)

    def rule(self, k: int) -> Optional[Dict[str, object]]:
        """Output ``k``'s int8 rule (converter.executorch.output_rule): each output is judged by its own."""
        return self.rules[k] if k < len(self.rules) else None


def program_inputs(models: Path, programs: Sequence[PteFile], work: Path) -> Dict[str, ProgramInputs]:
    """Per model stem: the recorded reference inputs written under ``work``, or the all-ones default on the
    programs' declared input shape."""

    section = load_section(models)
    out: Dict[str, ProgramInputs] = {}
    for stem in sorted({f.stem for f in programs}):
        try:
            ref = load_reference(reference_path(models, stem, section))
        except RecordError as e:
            out[stem] = _ones(stem, programs, f"no recorded reference inputs: {e.what}")
            continue
        out[stem] = pi = ProgramInputs(stem, rules=list(ref.get("int8_outputs") or [ref.get("int8_output")]))
        work.mkdir(parents=True, exist_ok=True)
        for i, x in enumerate(ref["inputs"]):
            _write_run(pi, work, i, x)
    return out


def _write_run(pi: ProgramInputs, work: Path, i: int, sample) -> None:
    """One reference input as raw little-endian bytes in each tensor's own dtype (a float32 image, int64 token
    ids), one file per program input (E17): ``<stem>-input-<i>.bin``, or ``-<i>-<k>.bin`` for several."""
    args = [t.detach().contiguous() for t in program_args(sample)]
    names = []
    for k, t in enumerate(args):
        path = work / (f"{pi.stem}-input-{i}.bin" if len(args) == 1 else f"{pi.stem}-input-{i}-{k}.bin")
        data = t.numpy()
        path.write_bytes(data.astype(data.dtype.newbyteorder("<")).tobytes())
        pi.files.append(path)
        names.append(path.name)
    pi.tensors.append(args[0] if len(args) == 1 else tuple(args))
    pi.runs.append(",".join(names))


def _ones(stem: str, programs: Sequence[PteFile], why: str) -> ProgramInputs:
    import torch

    mine = [f for f in programs if f.stem == stem]
    shape = tuple(int(d) for d in (mine[0].input.shape if mine else ()) or ())
    quant = next(((f.extra.get("quantization") or {}).get("output") for f in mine if f.precision == "int8"), None)
    return ProgramInputs(stem, [torch.ones(shape)] if shape else [], [], f"all-ones input (the runner's default; {why})",
                         [quant or None])


def _values(out, qparams: Optional[Dict[str, object]]) -> TensorValues:
    """An output as the judge takes it, measured in LSB of its int8 rule's scale when it has one (also off the grid,
    where a float operation follows the dequantize: deploy.numerics.lsb_difference)."""
    scaled = qparams if qparams and qparams.get("scale") else None
    return TensorValues([int(d) for d in out.shape], [float(v) for v in out.detach().reshape(-1).double().tolist()],
                        float(scaled["scale"]) if scaled else None, int(scaled["zero_point"]) if scaled else None)


def host_reference(f: PteFile, pi: ProgramInputs) -> FileReference:
    """The program's outputs on the host's ExecuTorch runtime: every output of ``forward`` on every input, run by
    run (``[input 0 output 0, input 0 output 1, ..., input 1 output 0, ...]``), each with its own int8 rule."""
    ref = FileReference(f.file, f.sha256, BACKEND, f.precision)
    key = f"{HOST_KEY} ({pi.source.split(' (')[0]})"
    if not pi.tensors:
        ref.problems[key] = f"the programs' input shape is not recorded ({pi.source})"
    elif not f.runs_on_host:
        ref.problems[key] = "the host's ExecuTorch runtime cannot run this program's delegate"
    else:
        try:
            ref.outputs[key] = [_values(y, pi.rule(k) if f.precision == "int8" else None)
                                for ys in host_outputs(f.path, pi.tensors) for k, y in enumerate(ys)]
        except Exception as e:  # noqa: BLE001 - the host runtime's errors are RuntimeErrors of several kinds
            ref.problems[key] = f"the host's ExecuTorch runtime could not run it: {type(e).__name__}: {e}"
            ref.outputs.pop(key, None)
    return ref


class Unprintable(ValueError):
    """The runner's output holds no output values in the form ``--print_output=all`` prints."""


def parse_outputs(text: str) -> Dict[int, List[float]]:
    """``Output[i][j]: (float) v`` lines -> {i: [v_0, v_1, ...]} (every index present, in order)."""
    found: Dict[int, Dict[int, float]] = {}
    for m in filter(None, (OUTPUT_LINE.match(line.strip()) for line in text.splitlines())):
        kind, raw = m.group(3), m.group(4)
        found.setdefault(int(m.group(1)), {})[int(m.group(2))] = (
            (1.0 if raw == "true" else 0.0) if kind == "bool" else float(raw))
    if not found:
        raise Unprintable("no 'Output[i][j]: (float) v' line")
    for i, vals in sorted(found.items()):
        if sorted(vals) != list(range(len(vals))):
            raise Unprintable(f"output {i}'s elements are not all printed (indices {min(vals)}..{max(vals)}, "
                              f"{len(vals)} lines)")
    return {i: [vals[j] for j in range(len(vals))] for i, vals in sorted(found.items())}


def _printed(host: List[TensorValues], count: int, i: int, res: Any) -> List[TensorValues]:
    """Output run ``i``'s ``count`` printed outputs, each with the host's shape (when it holds as many values) and
    int8 rule."""
    if res.code != 0:
        unknown_flag = "print_output" in res.output and ("unknown command line flag" in res.output
                                                         or "Unknown --print_output" in res.output)
        raise NoOutput("the runner does not know --print_output=all (a runner older than ExecuTorch 1.3, E21): "
                       f"run `{BUILD}`" if unknown_flag else f"the output run exited {res.code}: "
                       + " | ".join(res.tail(2)))
    try:
        printed = parse_outputs(res.output)
    except Unprintable as e:
        raise NoOutput(f"the runner printed no output values ({e})") from e
    if len(printed) != count:
        raise NoOutput(f"the runner printed {len(printed)} output(s), the program returns {count}")
    out = []
    for k, values in enumerate(printed.values()):
        h = host[i * count + k]
        out.append(TensorValues(h.shape if len(values) == len(h.values) else [len(values)], values, h.scale,
                                h.zero_point))
    return out


def rules_note(pi: ProgramInputs, count: int) -> str:
    """What an int8 program's tolerance is derived from when it is not its output's int8 grid, output by output
    where there are several (each is judged by its own recorded rule)."""
    if count == 1:
        return _rule_note(pi.rule(0))
    notes = [_rule_note(pi.rule(k)).strip()[1:-1] or "its int8 grid" for k in range(count)]
    return " (each output by its own rule: " + "; ".join(f"output {k}: {n}" for k, n in enumerate(notes)) + ")"


def _rule_note(qparams: Optional[Dict[str, object]]) -> str:
    if not (qparams and qparams.get("scale")):
        return " (no recorded output quantization: the float rule)"
    if qparams.get("on_grid", True) is False:
        return f" (output computed in float by {qparams.get('after')} after the dequantize: unsnapped)"
    return ""


# --------------------------------------------------------------------------- the app's runtime and the runner's


def runner_runtime(build_info: str) -> Tuple[Optional[str], str]:
    """``(ExecuTorch version of executor_runner, why unknown)`` from the runner's build-info."""
    try:
        version = BuildInfo.load(Path(build_info)).get("executorch_version")
    except TorchdroidError as e:
        return None, f"its build-info {build_info} could not be read: {e.what}"
    return (str(version), "") if version else (None, f"its build-info {build_info} records no executorch_version")


def app_runtime(run_settings: Dict[str, Any], package: str) -> Tuple[Optional[str], str]:
    """``(org.pytorch:executorch-android version the app links, why unknown)`` from the app-info the run deployed."""
    app_dir = run_settings.get("app_dir")
    if not app_dir or not AppInfo.exists(Path(app_dir)):
        return None, "the run names no app-info (torchdroid-app.json) for it"
    try:
        info = AppInfo.load(Path(app_dir))
    except TorchdroidError as e:
        return None, f"its app-info in {app_dir} could not be read: {e.what}"
    if info.application_id != package:
        return None, f"the app-info in {app_dir} is for {info.application_id}, not {package}"
    runtime = info.runtime or {}
    if runtime.get("library") != "executorch":
        return None, f"the app-info in {app_dir} records no ExecuTorch runtime"
    if runtime.get("executorch_android"):
        return str(runtime["executorch_android"]), ""
    aar = (runtime.get("aar") or {}).get("source") or "a local AAR"
    return None, f"it links {aar}, whose ExecuTorch release is not recorded"


def compare_runtimes(package: str, app: Optional[str], app_why: str, runner: Optional[str], runner_why: str) -> str:
    """One line saying whether the app's and executor_runner's ExecuTorch numbers come from the same runtime."""
    if app and runner and app.split("+")[0] == runner.split("+")[0]:
        return f"same runtime: the app {package} (org.pytorch:executorch-android:{app}) and executor_runner both run " \
               f"ExecuTorch {runner.split('+')[0]}"
    if app and runner:
        return (f"DIFFERENT RUNTIMES: the app {package} runs org.pytorch:executorch-android:{app}, executor_runner "
                f"ExecuTorch {runner}: a gap between their numbers is not only the app's overhead (ExecuTorch promises "
                f"no forward compatibility either: docs/facts.md EA8). Rebuild the app with --executorch-android "
                f"{runner} (make-app) to compare one runtime")
    unknown = "; ".join(w for w in (f"the app's: {app_why}" if not app else "",
                                    f"the runner's: {runner_why}" if not runner else "") if w)
    return (f"RUNTIMES NOT KNOWN to be the same: the app {package} "
            f"({'org.pytorch:executorch-android:' + app if app else 'runtime unknown'}) and executor_runner "
            f"({'ExecuTorch ' + runner if runner else 'runtime unknown'}) may be different ExecuTorch releases ({unknown})")


def runtime_notes(build_info: str, run_rows: Sequence[ResultRow], run_settings: Dict[str, Any]) -> List[str]:
    """When the reported run has in-app numbers of an ExecuTorch program's app (variant ``fp32-xnnpack``...; a
    TorchScript app's are quant_*): whether that app and executor_runner are one ExecuTorch runtime."""
    apps = dict.fromkeys(r.model_file.replace(" (app)", "") for r in run_rows if r.source == "app" and r.status == "ok"
                         and r.variant and not r.variant.startswith("quant_") and r.variant != "unknown")
    runner = runner_runtime(build_info) if apps else (None, "")
    return [compare_runtimes(package, *app_runtime(run_settings, package), *runner) for package in apps]
