"""speed_benchmark_torch on a device: the command, its output parsed, and statistics people can trust.

Per model: one cold run (a fresh process: load, first inference, warm-up iterations), then ``repeat``
timed runs; every run's peak memory (VmHWM) sampled by a shell wrapper.  The in-app benchmark is in
``app_bench``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import shlex
import statistics
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from toolchain.errors import TorchdroidError, UsageError
from toolchain.records import BENCH_BINARY
from toolchain.settings import default
from toolchain.stats import VARIANCE_LIMIT_PCT, percentile, spread_pct

from .adb import Device

log = logging.getLogger(__name__)

GATORD_NAME = "gatord"
_PEP = re.compile(r'^PyTorchObserver (\{.*\})\s*$')
RUN_MARK = "TORCHDROID_RUN"
PID_FILE = ".torchdroid-bench.pid"  # the running benchmark's pid, in the device directory (stop_command)
_WRAP = re.compile(RUN_MARK + r" ([0-9.]+) ([0-9.]+)[ \t]*(\d*)[ \t]*$", re.M)
_MAIN = re.compile(r"Main run finished\. Microseconds per iter: ([0-9.eE+-]+)\. Iters per second: ([0-9.eE+-]+|inf|nan)")


@dataclass(frozen=True)
class BenchOptions:
    warmup: int = default("deploy.warmup")
    iters: int = default("deploy.iter")
    repeat: int = default("deploy.repeat")
    threads: Optional[int] = default("deploy.threads")  # --pthreadpool_size; None leaves the flag out (binaries older than it)
    caching_allocator: bool = default("deploy.caching_allocator")  # --use_caching_allocator=true for CPU models
    timeout: float = default("deploy.bench_timeout")
    gatord: bool = False  # run under `gatord --app ...`
    bundled_input: int = default("deploy.bundled_input")  # --use_bundled_input=N; < 0: --input_dims/--input_type from the manifest instead
    cooldown: float = default("deploy.cooldown")  # seconds to wait between models (lets a hot phone cool down)

    def __post_init__(self) -> None:
        for name, low in (("iters", 1), ("repeat", 1), ("warmup", 0)):
            if int(getattr(self, name)) < low:
                raise UsageError(f"deploy {name} must be at least {low} (got {getattr(self, name)})",
                                 remedy=f"pass --{'iter' if name == 'iters' else name} with a value >= {low}")
        if self.timeout <= 0 or self.cooldown < 0:
            raise UsageError("deploy timeouts must be > 0 and the cool-down >= 0 seconds",
                             remedy="check deploy.bench_timeout and --cooldown")


@dataclass
class ParsedRun:
    ok: bool
    latencies_us: List[float]
    per_iter_us: Optional[float]
    problem: Optional[str] = None
    peak_kb: Optional[int] = None  # VmHWM of the benchmark process (sampled while it ran)
    wall_s: Optional[float] = None  # process start to exit on the device's clock (/proc/uptime, 10 ms steps)


def parse_output(output: str, exit_code: int) -> ParsedRun:
    """Parse one run of speed_benchmark_torch (with or without --report_pep) and our wrapper's line."""
    lats: List[float] = []
    per_iter = None
    for line in output.splitlines():
        line = line.strip()
        m = _PEP.match(line)
        if m:
            value = _pep_latency_us(m.group(1))
            if value is not None:
                lats.append(value)
            continue
        m = _MAIN.search(line)
        if m:
            per_iter = float(m.group(1))
    peak, wall = parse_wrapper(output)
    if exit_code != 0:
        return ParsedRun(False, lats, per_iter, _exit_problem(exit_code), peak, wall)
    if not lats and per_iter is None:
        return ParsedRun(False, lats, None, "no latency in the output (neither PyTorchObserver lines nor "
                                            "'Main run finished')", peak, wall)
    bad = [x for x in lats if not (x > 0 and math.isfinite(x))]
    if bad or (per_iter is not None and not (per_iter > 0 and math.isfinite(per_iter))):
        return ParsedRun(False, lats, per_iter, "the benchmark reported a latency of 0 or less (no iterations "
                                                "ran?)", peak, wall)
    return ParsedRun(True, lats, per_iter, None, peak, wall)


def _pep_latency_us(payload: str) -> Optional[float]:
    try:
        rec = json.loads(payload)
    except json.JSONDecodeError:
        return None
    if rec.get("type") != "NET" or rec.get("metric") != "latency":
        return None
    try:
        value = float(rec["value"])
    except (KeyError, TypeError, ValueError):
        return None
    return value * 1000.0 if rec.get("unit") == "ms" else value


def parse_wrapper(output: str) -> Tuple[Optional[int], Optional[float]]:
    """``(VmHWM kB, wall seconds)`` from the line our shell wrapper prints after the benchmark exits."""
    m = _WRAP.search(output)
    if not m:
        return None, None
    start, end, hwm = m.group(1), m.group(2), m.group(3)
    wall = float(end) - float(start) if start and end else None
    return (int(hwm) if hwm else None), wall


def _exit_problem(code: int) -> str:
    signals = {134: "SIGABRT (an uncaught C++ exception: often a model the runtime cannot load)",
               139: "SIGSEGV (crashed)", 137: "SIGKILL (killed: out of memory?)", 132: "SIGILL"}
    return f"exit code {code}" + (f": {signals[code]}" if code in signals else "")


@dataclass
class BenchStats:
    median_ms: float
    p90_ms: float
    min_ms: float
    spread_pct: float  # range of the per-run medians relative to their median
    samples: int
    runs: int
    mean_ms: float = 0.0
    std_ms: float = 0.0
    max_ms: float = 0.0
    peak_kb: Optional[int] = None

    @property
    def unstable(self) -> bool:
        """The repeats disagree: their medians differ by more than VARIANCE_LIMIT_PCT."""
        return self.runs > 1 and self.spread_pct > VARIANCE_LIMIT_PCT

    def variance_note(self) -> str:
        if not self.unstable:
            return ""
        return (f"repeats disagree: their medians differ by {self.spread_pct:.0f}% (> {VARIANCE_LIMIT_PCT:.0f}%); "
                "the device may be throttling or busy: let it cool down (--cooldown) and use more --repeat")


def _samples(good: Sequence[ParsedRun]) -> Tuple[List[float], List[float]]:
    """Every iteration's latency and each run's median; without --report_pep lines each run's mean only."""
    lats = [x for r in good for x in r.latencies_us]
    if lats:
        return lats, [statistics.median(r.latencies_us) for r in good if r.latencies_us]
    means = [r.per_iter_us for r in good if r.per_iter_us]
    return means, means


def summarize(runs: Sequence[ParsedRun]) -> Optional[BenchStats]:
    """Statistics over every good run's per-iteration latencies; None when no run gave any."""
    good = [r for r in runs if r.ok]
    lats, per_run = _samples(good)
    if not lats:
        return None
    peaks = [r.peak_kb for r in runs if r.peak_kb]
    return BenchStats(
        median_ms=statistics.median(lats) / 1000.0, p90_ms=percentile(lats, 90) / 1000.0, min_ms=min(lats) / 1000.0,
        spread_pct=spread_pct(per_run), samples=len(lats), runs=len(good), mean_ms=statistics.fmean(lats) / 1000.0,
        std_ms=(statistics.stdev(lats) if len(lats) > 1 else 0.0) / 1000.0, max_ms=max(lats) / 1000.0,
        peak_kb=max(peaks) if peaks else None)


@dataclass
class ColdStart:
    """One fresh process: load (process start + model load), the first inference, the warm-up iterations."""

    load_ms: Optional[float] = None
    first_ms: Optional[float] = None
    warmup_ms: Optional[float] = None  # mean of the warm-up iterations after the first
    peak_kb: Optional[int] = None
    problem: Optional[str] = None


def cold_start(run: ParsedRun) -> ColdStart:
    """From a run with ``--warmup=0 --iter=1+W``: iteration 1 is the first inference, 2..W+1 the warm-up."""
    if not run.ok or not run.latencies_us:
        return ColdStart(problem=run.problem or "no per-iteration latencies (--report_pep) in the cold run",
                         peak_kb=run.peak_kb)
    first = run.latencies_us[0] / 1000.0
    rest = run.latencies_us[1:]
    load = None
    if run.wall_s is not None:  # what the wall clock saw minus the inferences the binary timed itself
        load = max(0.0, run.wall_s * 1000.0 - sum(run.latencies_us) / 1000.0)
    return ColdStart(load, first, statistics.fmean(rest) / 1000.0 if rest else None, run.peak_kb)


_INPUT_TYPES = {"float32": "float", "float": "float", "uint8": "uint8_t", "int64": "int64"}


def input_args(spec) -> List[str]:
    """``--input_dims/--input_type/--input_memory_format`` for a manifest input spec, or a list of them (one per
    ``forward`` argument), with no bundled input.  speed_benchmark_torch splits each flag at ``;``, one item per
    input, and refuses counts that differ (its memory format defaults to one ``contiguous_format``: several inputs
    name one each); it makes float, uint8_t and int64 tensors of ones (docs/facts.md F15, LI1)."""
    specs = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    types = [_INPUT_TYPES.get(getattr(s, "dtype", None) or "") for s in specs]
    if not specs or None in types:
        bad = specs[types.index(None)] if None in types else None
        raise UsageError(
            f"speed_benchmark_torch cannot make a {getattr(bad, 'dtype', 'unknown')} input itself",
            cause="without a bundled input it only creates float, uint8 and int64 tensors",
            remedy="use the bundled input the converter stores in every model (deploy.bundled_input = 0)")
    args = ["--input_dims=" + ";".join(",".join(str(d) for d in s.shape) for s in specs),
            "--input_type=" + ";".join(types)]
    formats = ["channels_last" if s.memory_format == "channels_last" else "contiguous_format" for s in specs]
    if len(specs) > 1 or formats[0] == "channels_last":
        args.append("--input_memory_format=" + ";".join(formats))
    return args


def bench_args(model_name: str, backend: str, opts: BenchOptions, input_spec=None,
               warmup: Optional[int] = None, iters: Optional[int] = None) -> List[str]:
    inputs = ([f"--use_bundled_input={opts.bundled_input}"] if opts.bundled_input >= 0 else input_args(input_spec))
    args = [f"./{BENCH_BINARY}", f"--model=./{model_name}", *inputs,
            f"--warmup={opts.warmup if warmup is None else warmup}",
            f"--iter={opts.iters if iters is None else iters}", "--report_pep=true"]
    if opts.threads is not None:
        args.append(f"--pthreadpool_size={opts.threads}")
    if opts.caching_allocator and backend == "cpu":
        args.append("--use_caching_allocator=true")
    if opts.gatord:
        args = [f"./{GATORD_NAME}", "--app"] + args
    return args


def bench_command(directory: str, model_name: str, backend: str, opts: BenchOptions, input_spec=None,
                  warmup: Optional[int] = None, iters: Optional[int] = None) -> str:
    """The benchmark in the background, its VmHWM sampled every 0.2 s, and one TORCHDROID_RUN line at the end
    (start and end on /proc/uptime, the last VmHWM in kB); the exit code is the benchmark's."""
    argv = " ".join(shlex.quote(a) for a in bench_args(model_name, backend, opts, input_spec, warmup, iters))
    return (f"cd {shlex.quote(directory)} && {{ read s _ < /proc/uptime; {argv} & p=$!; echo $p > {PID_FILE}; h=; "
            "while kill -0 $p 2>/dev/null; do x=$(grep VmHWM /proc/$p/status 2>/dev/null) && h=${x#VmHWM:}; "
            f"sleep 0.2; done; wait $p; c=$?; rm -f {PID_FILE}; read e _ < /proc/uptime; "
            f"echo \"{RUN_MARK} $s $e ${{h% kB}}\"; exit $c; }}")


def stoppable(directory: str, command: str) -> str:
    """``command`` (quoted already) run in ``directory`` so that Ctrl-C on the host can stop it: in the background
    with its pid in the directory's pid file while it runs (``stop_command``); its output and exit code are the
    shell's.  A subshell, not braces: the command stays one ``str.format``-safe text."""
    return (f"cd {shlex.quote(directory)} && ( {command} & p=$!; echo $p > {PID_FILE}; wait $p; c=$?; "
            f"rm -f {PID_FILE}; exit $c )")


def stop_command(*directories: str) -> str:
    """Ctrl-C on the host: stop the benchmark ``bench_command``, ``stoppable`` or the NNAPI placement probe runs in
    each of ``directories`` (its pid file) and the processes it started, and say so."""
    return "; ".join(f"p=$(cat {shlex.quote(d)}/{PID_FILE} 2>/dev/null) && [ -n \"$p\" ] && "
                     "{ pkill -P $p 2>/dev/null; r=$?; kill $p 2>/dev/null || [ $r = 0 ]; } "
                     "&& echo \"stopped $p\" || echo 'no benchmark running'" for d in directories)


def output_command(directory: str, model_name: str, backend: str, opts: BenchOptions) -> str:
    """One run that prints the model's output on bundled input ``opts.bundled_input`` (upstream's --print_output,
    docs/facts.md NU1) before "Starting benchmark.": the numerics check's run, with the benchmark's own flags."""
    argv = bench_args(model_name, backend, dataclasses.replace(opts, gatord=False), None, warmup=0, iters=1)
    return stoppable(directory, " ".join(shlex.quote(a) for a in argv + ["--print_output=true"]))  # Ctrl-C stops it


@dataclass
class ModelBench:
    file: str
    backend: str
    runs: List[ParsedRun] = field(default_factory=list)
    outputs: List[str] = field(default_factory=list)
    command: str = ""
    cold: Optional[ColdStart] = None

    @property
    def stats(self) -> Optional[BenchStats]:
        return summarize(self.runs)

    @property
    def problem(self) -> Optional[str]:
        bad = [r.problem for r in self.runs if not r.ok]
        if not bad:
            return None
        return f"{len(bad)} of {len(self.runs)} runs failed: {bad[0]}"


def _run_once(device: Device, command: str, timeout: float) -> Tuple[ParsedRun, str]:
    try:
        res = device.shell(command, timeout=timeout)
    except TorchdroidError as e:  # timeout or lost device: recorded, the caller decides what next
        return ParsedRun(False, [], None, e.what), str(e)
    return parse_output(res.output, res.code), res.output


def run_model(device: Device, directory: str, model_name: str, backend: str, opts: BenchOptions,
              input_spec=None, stop=None) -> ModelBench:
    """A cold run (load, first inference, warm-up), then ``opts.repeat`` timed runs; a crash is recorded with
    its output, never raised."""
    mb = ModelBench(model_name, backend, command=bench_command(directory, model_name, backend, opts, input_spec))
    cold_cmd = bench_command(directory, model_name, backend, opts, input_spec, warmup=0, iters=1 + opts.warmup)
    cold, out = _run_once(device, cold_cmd, opts.timeout)
    mb.cold = cold_start(cold)
    if not cold.ok:  # a model that cannot load fails the same way every time
        mb.runs.append(cold)
        mb.outputs.append(out)
        if stop is None or not stop.is_set():  # a run Ctrl-C stopped is no failure of the model
            log.warning("[%s] %s (%s): %s", device.serial, model_name, backend, cold.problem)
        return mb
    for _ in range(max(1, opts.repeat)):
        if stop is not None and stop.is_set():  # Ctrl-C (a threading.Event): the caller keeps no partial result
            break
        parsed, out = _run_once(device, mb.command, opts.timeout)
        mb.runs.append(parsed)
        mb.outputs.append(out)
        if not parsed.ok:
            if stop is None or not stop.is_set():
                log.warning("[%s] %s (%s): %s", device.serial, model_name, backend, parsed.problem)
            break  # a crash repeats; keep the output and move on to the next model
    return mb
