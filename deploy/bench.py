"""speed_benchmark_torch runs on a device, their output parsed; the in-app benchmark through logcat."""

from __future__ import annotations

import json
import logging
import re
import shlex
import statistics
import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from toolchain.errors import TorchdroidError, UsageError
from toolchain.records import APP_BENCH_PREFIX, APP_BENCH_TAG
from toolchain.settings import default

from .adb import Device

log = logging.getLogger(__name__)

BINARY_NAME = "speed_benchmark_torch"
GATORD_NAME = "gatord"
_PEP = re.compile(r'^PyTorchObserver (\{.*\})\s*$')
_MAIN = re.compile(r"Main run finished\. Microseconds per iter: ([0-9.eE+-]+)\. Iters per second: ([0-9.eE+-]+|inf|nan)")


@dataclass(frozen=True)
class BenchOptions:
    warmup: int = default("deploy.warmup")
    iters: int = default("deploy.iter")
    repeat: int = default("deploy.repeat")
    threads: Optional[int] = 1  # --pthreadpool_size; None leaves the flag out (binaries older than it)
    caching_allocator: bool = False  # --use_caching_allocator=true for CPU models
    timeout: float = default("deploy.bench_timeout")
    gatord: bool = False  # run under `gatord --app ...`
    bundled_input: int = 0  # --use_bundled_input=N; < 0: --input_dims/--input_type from the manifest instead


@dataclass
class ParsedRun:
    ok: bool
    latencies_us: List[float]
    per_iter_us: Optional[float]
    problem: Optional[str] = None


def parse_output(output: str, exit_code: int) -> ParsedRun:
    """Parse one run of speed_benchmark_torch (with or without --report_pep)."""
    lats: List[float] = []
    per_iter = None
    for line in output.splitlines():
        line = line.strip()
        m = _PEP.match(line)
        if m:
            try:
                rec = json.loads(m.group(1))
            except json.JSONDecodeError:
                continue
            if rec.get("type") == "NET" and rec.get("metric") == "latency":
                value = float(rec["value"])
                lats.append(value * 1000.0 if rec.get("unit") == "ms" else value)
            continue
        m = _MAIN.search(line)
        if m:
            per_iter = float(m.group(1))
    if exit_code != 0:
        return ParsedRun(False, lats, per_iter, _exit_problem(exit_code))
    if not lats and per_iter is None:
        return ParsedRun(False, lats, None, "no latency in the output (neither PyTorchObserver lines nor "
                                            "'Main run finished')")
    return ParsedRun(True, lats, per_iter)


def _exit_problem(code: int) -> str:
    signals = {134: "SIGABRT (an uncaught C++ exception: often a model the runtime cannot load)",
               139: "SIGSEGV (crashed)", 137: "SIGKILL (killed: out of memory?)", 132: "SIGILL"}
    return f"exit code {code}" + (f": {signals[code]}" if code in signals else "")


def percentile(values: Sequence[float], p: float) -> float:
    xs = sorted(values)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


@dataclass
class BenchStats:
    median_ms: float
    p90_ms: float
    min_ms: float
    spread_pct: float  # range of the per-run medians relative to their median
    samples: int
    runs: int


def summarize(runs: Sequence[ParsedRun]) -> Optional[BenchStats]:
    good = [r for r in runs if r.ok]
    if not good:
        return None
    lats = [x for r in good for x in r.latencies_us]
    if lats:
        per_run = [statistics.median(r.latencies_us) for r in good if r.latencies_us]
        med, p90, mn = statistics.median(lats), percentile(lats, 90), min(lats)
    else:  # no --report_pep lines: only the per-iteration mean of each run
        per_run = [r.per_iter_us for r in good]
        med, p90, mn = statistics.median(per_run), max(per_run), min(per_run)
    centre = statistics.median(per_run)
    spread = 100.0 * (max(per_run) - min(per_run)) / centre if centre else 0.0
    return BenchStats(med / 1000.0, p90 / 1000.0, mn / 1000.0, spread, len(lats) or len(per_run), len(good))


_INPUT_TYPES = {"float32": "float", "float": "float", "uint8": "uint8_t", "int64": "int64"}


def input_args(spec) -> List[str]:
    """``--input_dims/--input_type/--input_memory_format`` for a manifest input spec (no bundled input)."""
    itype = _INPUT_TYPES.get(getattr(spec, "dtype", None) or "")
    if spec is None or itype is None:
        raise UsageError(
            f"speed_benchmark_torch cannot make a {getattr(spec, 'dtype', 'unknown')} input itself",
            cause="without a bundled input it only creates float, uint8 and int64 tensors",
            remedy="use the bundled input the converter stores in every model (deploy.bundled_input = 0)")
    args = ["--input_dims=" + ",".join(str(d) for d in spec.shape), f"--input_type={itype}"]
    if spec.memory_format == "channels_last":
        args.append("--input_memory_format=channels_last")
    return args


def bench_command(directory: str, model_name: str, backend: str, opts: BenchOptions, input_spec=None) -> str:
    inputs = ([f"--use_bundled_input={opts.bundled_input}"] if opts.bundled_input >= 0 else input_args(input_spec))
    args = [f"./{BINARY_NAME}", f"--model=./{model_name}", *inputs,
            f"--warmup={opts.warmup}", f"--iter={opts.iters}", "--report_pep=true"]
    if opts.threads is not None:
        args.append(f"--pthreadpool_size={opts.threads}")
    if opts.caching_allocator and backend == "cpu":
        args.append("--use_caching_allocator=true")
    if opts.gatord:
        args = [f"./{GATORD_NAME}", "--app"] + args
    return f"cd {shlex.quote(directory)} && " + " ".join(shlex.quote(a) for a in args)


@dataclass
class ModelBench:
    file: str
    backend: str
    runs: List[ParsedRun] = field(default_factory=list)
    outputs: List[str] = field(default_factory=list)
    command: str = ""

    @property
    def stats(self) -> Optional[BenchStats]:
        return summarize(self.runs)

    @property
    def problem(self) -> Optional[str]:
        bad = [r.problem for r in self.runs if not r.ok]
        if not bad:
            return None
        return f"{len(bad)} of {len(self.runs)} runs failed: {bad[0]}"


def run_model(device: Device, directory: str, model_name: str, backend: str, opts: BenchOptions,
              input_spec=None) -> ModelBench:
    """Run the benchmark ``opts.repeat`` times; a crash is recorded with its output, never raised."""
    mb = ModelBench(model_name, backend, command=bench_command(directory, model_name, backend, opts, input_spec))
    for _ in range(max(1, opts.repeat)):
        try:
            res = device.shell(mb.command, timeout=opts.timeout)
        except TorchdroidError as e:  # timeout or lost device: recorded, the caller decides what next
            mb.runs.append(ParsedRun(False, [], None, e.what))
            mb.outputs.append(str(e))
            break
        parsed = parse_output(res.output, res.code)
        mb.runs.append(parsed)
        mb.outputs.append(res.output)
        if not parsed.ok:
            log.warning("[%s] %s (%s): %s", device.serial, model_name, backend, parsed.problem)
            break  # a crash repeats; keep the output and move on to the next model
    return mb


# --------------------------------------------------------------------------- in-app benchmark


@dataclass
class AppBench:
    backend: str
    record: Optional[dict]
    problem: Optional[str] = None


def parse_app_lines(output: str) -> List[dict]:
    out = []
    for line in output.splitlines():
        idx = line.find(APP_BENCH_PREFIX)
        if idx < 0:
            continue
        try:
            out.append(json.loads(line[idx + len(APP_BENCH_PREFIX):]))
        except json.JSONDecodeError:
            continue
    return out


def app_command(application_id: str, activity: str, backend: str, opts: BenchOptions) -> str:
    component = f"{application_id}/{activity}"
    return (f"am start -W -n {shlex.quote(component)} --ez benchmark true --ei iters {int(opts.iters)} "
            f"--ei warmup {int(opts.warmup)} --es backend {shlex.quote(backend)}")


def run_app(device: Device, application_id: str, activity: str, backend: str, opts: BenchOptions,
            wait: float = 120.0) -> AppBench:
    """Launch the app's benchmark intent and wait for its TORCHDROID_BENCH logcat line."""
    device.shell("logcat -c")
    res = device.shell(app_command(application_id, activity, backend, opts), timeout=60)
    if not res.ok or "Error" in res.output:
        return AppBench(backend, None, "the benchmark intent could not be started: " + " / ".join(res.tail(3)))
    deadline = time.monotonic() + wait
    while True:
        out = device.shell(f"logcat -d -s {APP_BENCH_TAG}:I").output
        lines = [r for r in parse_app_lines(out) if r.get("backend") == backend]
        if lines:
            rec = lines[-1]
            return AppBench(backend, rec, rec.get("error"))
        if time.monotonic() > deadline:
            return AppBench(backend, None, f"no {APP_BENCH_PREFIX.strip()} line in logcat within {wait:g}s "
                                           f"(see `adb -s {device.serial} logcat -s {APP_BENCH_TAG}`)")
        time.sleep(0.5)
