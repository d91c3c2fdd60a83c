"""`invoke deploy-executorch`: the .pte programs and ExecuTorch's executor_runner on every phone, beside the legacy results.

Per device: the runner (from `build-android --lane executorch`'s build-info) and the XNNPACK / portable
programs go through deploy's own push (temporary name, hash on the device, rename only on a match, unchanged
files not sent again); the programs run in ``repeat`` alternated rounds, each as ``executor_runner --model_path=P
--num_executions=warmup+iters --cpu_threads=T`` (the remote exit code is checked); the runner's
``Iteration i of N: X ms`` lines give the samples, the first ``warmup`` of each run are dropped.  The report
joins the latest legacy deploy results of the same device (TorchScript CPU and NNAPI, quant_none and
quant_full) and gives every line's speed-up over the legacy CPU model of the same precision.

Is the answer right (``numerics``, on by default): each program runs once more per recorded reference input with
``--inputs=... --print_output=all`` and its printed outputs are compared with the host ExecuTorch runtime's on the
same inputs (deploy/pte_numerics.py); the verdicts go to ``executorch-latest-numerics.json``, which
``executorch-latest.json`` names by sha256.
"""

from __future__ import annotations

import logging
import re
import shlex
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from toolchain import executorch_pins as pins
from toolchain.errors import DeviceError, RecordError, UsageError
from toolchain.numerics_records import NumericsRecord, NumericsVerdict, numerics_path
from toolchain.pte_records import PteFile, pte_files
from toolchain.fsutil import sha256_file
from toolchain.pte_results import PTE_RESULTS_STEM, PteDeployRecord, PteResultRow, add_speedups
from toolchain.records import BuildInfo, DeployResults, deploy_results_path
from toolchain.settings import default

from .adb import Adb, Device
from .lock import device_lock
from .plan import project_name
from .push import PushItem, check_dir, push_all

log = logging.getLogger(__name__)
ON_DEVICE_DELEGATES = ("xnnpack", "portable")  # what a runner built with XNNPACK (and the portable kernels) runs
ITERATION = re.compile(pins.RUNNER_ITERATION_RE)


@dataclass(frozen=True)
class PteDeploySettings:
    models: Path
    build_info: Path  # <build_dir>/android/<abi>/executorch/build-info.json
    results: Path = Path(default("deploy.results"))
    serials: Sequence[str] = ()
    adb_host: Optional[str] = None
    adb_port: Optional[int] = None
    device_dir: str = "/data/local/tmp/torchdroid"
    project: str = field(default_factory=lambda: Path.cwd().name)  # like deploy: <device_dir>/<project>/executorch
    warmup: int = 5
    iters: int = 50
    repeat: int = 3
    threads: int = 1
    timeout: float = 600.0
    numerics: bool = True  # run each program once more per reference input and compare its outputs with the host's


@dataclass
class PteDeployResult:
    rows: List[PteResultRow]
    json_path: Path
    csv_path: Path
    problems: List[str] = field(default_factory=list)
    record: Optional[PteDeployRecord] = None
    numerics: List[NumericsVerdict] = field(default_factory=list)  # is each phone's answer right (pte_numerics)
    numerics_path: Optional[Path] = None


def parse_iterations(output: str) -> List[float]:
    """The per-execution times (ms) executor_runner logged, in order."""
    return [float(m.group(3)) for m in ITERATION.finditer(output)]


def runner_command(directory: str, program: str, runs: int, threads: int, etdump: Optional[str] = None) -> str:
    """The runner's command line; ``etdump``: a runner built with the event tracer writes its ETDump there (EB4)."""
    trace = f" --etdump_path={shlex.quote(etdump)}" if etdump else ""
    return (f"cd {shlex.quote(directory)} && ./{pins.RUNNER} --model_path={shlex.quote(program)} "
            f"--num_executions={int(runs)} --cpu_threads={int(threads)}{trace} 2>&1")


def bench_programs(device: Device, directory: str, programs: Sequence[PteFile], s: PteDeploySettings,
                   event_tracer: bool = False) -> List[PteResultRow]:
    """``repeat`` rounds, each running every program once (warm-up + iterations), the order rotating by one per
    round, so the programs are compared in the same minutes; with the event tracer each program's first run also
    writes its ETDump.  A program whose run fails is not run again and keeps the runner's output as its note."""
    from .etdump import etdump_name

    rows = {f.file: PteResultRow(device.serial, f"ExecuTorch {f.variant}", f.precision, f.file, "failed")
            for f in programs}
    samples: Dict[str, List[float]] = {f.file: [] for f in programs}
    failed: set = set()
    n = len(programs)
    for r in range(s.repeat):
        for f in [programs[(r + i) % n] for i in range(n)]:
            if f.file in failed:
                continue
            etdump = etdump_name(f.file) if event_tracer and r == 0 else None
            res = device.shell(runner_command(directory, f.file, s.warmup + s.iters, s.threads, etdump),
                               timeout=s.timeout)
            times = parse_iterations(res.output)
            if not res.ok or len(times) != s.warmup + s.iters:
                rows[f.file].note = (f"executor_runner exited {res.code} after {len(times)} of {s.warmup + s.iters} "
                                     "executions: " + " | ".join(res.tail(3)))
                failed.add(f.file)
                continue
            samples[f.file].extend(times[s.warmup:])
    for f in programs:
        if f.file not in failed:
            _fill(rows[f.file], samples[f.file])
    return [rows[f.file] for f in programs]


def _fill(row: PteResultRow, samples: List[float]) -> None:
    ordered = sorted(samples)
    row.status, row.samples = "ok", len(samples)
    row.median_ms, row.min_ms = statistics.median(samples), ordered[0]
    row.p90_ms = ordered[max(0, min(len(ordered) - 1, int(round(0.9 * len(ordered) + 0.5)) - 1))]


def _runner(s: PteDeploySettings) -> tuple:
    info = BuildInfo.load(s.build_info, remedy="run `invoke build-android --lane executorch` first (or pass its "
                                               "build-info with --build-info)")
    if info.lane != pins.RUNTIME_LANE:
        raise UsageError(f"{info.path} is a {info.lane!r} build, not ExecuTorch's runner",
                         remedy="run `invoke build-android --lane executorch` and pass its build-info")
    from .plan import _recorded

    # the runner that runs is the one build-android recorded: a rebuilt, replaced or modified file is refused
    # (the legacy deploy's check of its binary)
    path = _recorded(info, pins.RUNNER, remedy="run `invoke build-android --lane executorch` again (it rewrites the "
                                               "build-info)")
    digest = next((a.get("sha256") for a in info.get("artefacts", []) if a.get("name") == pins.RUNNER), None)
    return info, path, digest  # the phone's copy is verified against the recorded hash too


def _device_abi_problem(device: Device, abi: str) -> Optional[str]:
    have = device.shell("getprop ro.product.cpu.abilist").output.strip()
    return None if abi in have.split(",") else f"the runner is {abi}, the device supports {have or 'nothing known'}"


def load_legacy(results_dir: Path) -> Tuple[Optional[DeployResults], Dict[str, Any]]:
    """The legacy deploy's latest results (``latest.json``) and what the record says about them."""
    latest = deploy_results_path(results_dir, "latest")
    if not latest.is_file():
        return None, {}
    try:
        res = DeployResults.load(latest)
    except RecordError as e:
        log.warning("legacy results %s not readable: %s", latest, e.what)
        return None, {"path": str(latest.resolve()), "error": e.what}
    return res, {"path": str(latest.resolve()), "run_id": res.run_id, "started": res.started}


def legacy_rows(legacy: Optional[DeployResults], serial: str, stems: Sequence[str]) -> List[PteResultRow]:
    """The legacy binary benchmark's quant_none / quant_full CPU and NNAPI medians of this device."""
    if legacy is None:
        return []
    out = []
    for r in legacy.rows:
        if (r.serial == serial and r.source == "binary" and r.stem in stems and r.status == "ok"
                and r.variant in ("quant_none", "quant_full")):
            label = f"{'TorchScript CPU' if r.backend == 'cpu' else 'NNAPI'} {r.variant}"
            out.append(PteResultRow(serial, label, "fp32" if r.mode == "none" else "int8", r.model_file, "ok",
                                    r.median_ms, r.p90_ms, r.min_ms, r.samples,
                                    note=f"legacy deploy run {legacy.run_id}"))
    return out


def deploy_pte(s: PteDeploySettings) -> PteDeployResult:
    if s.iters < 1 or s.warmup < 0 or s.repeat < 1 or s.threads < 1:
        raise UsageError("deploy-executorch needs iter >= 1, warmup >= 0, repeat >= 1 and threads >= 1")
    project = check_dir(f"{s.device_dir.rstrip('/')}/{project_name(s.project)}")  # the legacy deploy's directory
    directory = check_dir(project + "/executorch")
    adb = Adb.locate(host=s.adb_host, port=s.adb_port)  # the address is checked before any record is read
    programs = [f for f in pte_files(s.models) if f.delegate in ON_DEVICE_DELEGATES]
    info, runner, runner_sha256 = _runner(s)
    server = adb.servers()[0]
    connected = server.devices()
    serials = list(s.serials) or [k for k, v in connected.items() if v == "device"]
    if not serials:
        raise DeviceError("no device is connected", remedy="connect a phone with USB debugging on (`adb devices`)")
    items = [PushItem(runner, pins.RUNNER, 0o755, runner_sha256)] + [PushItem(f.path, f.file, 0o644, f.sha256) for f in programs]
    rows: List[PteResultRow] = []
    problems: List[str] = []
    legacy, legacy_facts = load_legacy(s.results)
    operators: List[Dict[str, Any]] = []
    verdicts: List[NumericsVerdict] = []
    with tempfile.TemporaryDirectory(prefix="torchdroid-et-inputs-") as work:
        answers = _Answers.prepare(s, programs, Path(work)) if s.numerics else None
        if answers is not None:
            items += answers.items
        for serial in serials:
            found = _one_device(server, serial, connected.get(serial), project, directory, items, programs, info, s,
                                problems, operators, answers, verdicts)
            if found:
                rows.extend(legacy_rows(legacy, serial, sorted({f.stem for f in programs})) + found)
    add_speedups(rows)
    numerics_file = (NumericsRecord(legacy_facts.get("run_id"), verdicts).write(
        numerics_path(s.results, PTE_RESULTS_STEM)) if s.numerics else None)
    record = PteDeployRecord(models=str(Path(s.models).resolve()), build_info=str(Path(s.build_info).resolve()),
                             warmup=s.warmup, iters=s.iters, repeat=s.repeat, threads=s.threads, rows=rows,
                             problems=problems, legacy=legacy_facts, operators=operators,
                             notes=_baseline_notes(s.models),
                             numerics=({"file": numerics_file.name, "sha256": sha256_file(numerics_file)}
                                       if numerics_file else {}))
    paths = record.write(s.results)
    return PteDeployResult(rows, paths["json"], paths["csv"], problems, record, verdicts, numerics_file)


@dataclass
class _Answers:
    """What the numerics check needs on every phone: each model's inputs (pushed as files) and each program's host
    outputs on them (computed once, here)."""

    inputs: Dict[str, Any]  # stem -> pte_numerics.ProgramInputs
    references: Dict[str, Any]  # file -> FileReference
    items: List[PushItem]

    @classmethod
    def prepare(cls, s: PteDeploySettings, programs: Sequence[PteFile], work: Path) -> "_Answers":
        from . import pte_numerics as pn

        inputs = pn.program_inputs(s.models, sorted({f.stem for f in programs}), programs, work)
        refs = {f.file: pn.host_reference(f, inputs[f.stem]) for f in programs}
        return cls(inputs, refs, pn.push_items(inputs))

    def check(self, device: Device, directory: str, f: PteFile, row: PteResultRow,
              s: PteDeploySettings, tracer: bool) -> NumericsVerdict:
        from . import pte_numerics as pn

        if row.status != "ok":
            return NumericsVerdict(device.serial, f.file, pn.BACKEND, f.precision, "unknown",
                                   reason="the program did not run: " + row.note)
        return pn.check_program(device, directory, f, self.inputs[f.stem], self.references[f.file], s.threads,
                                s.timeout, tracer)


def _baseline_notes(models: Path) -> List[str]:
    """Every speed-up's baseline is the legacy CPU model: say so when those were not optimised for mobile."""
    from toolchain.records import ConvertManifest

    from .plan import unoptimized_warning

    try:
        files = ConvertManifest.load(models).files
    except RecordError:
        return []
    bad = [f.file for f in files if f.backend == "cpu" and f.variant in ("quant_none", "quant_full")
           and not f.extra.get("mobile_optimized", False)]
    return [unoptimized_warning(bad)] if bad else []


def _one_device(server, serial, state, project, directory, items, programs, info, s, problems,
                operators, answers=None, verdicts=None) -> List[PteResultRow]:
    """Push and run under the project directory's lock (deploy/lock.py, the one the legacy deploy of this project
    takes): two runs of one project never replace or measure each other's programs; other projects have their own
    directories."""
    if state != "device":
        problems.append(f"device {serial} is {state or 'not connected'!r}")
        return []
    device = server.device(serial, timeout=s.timeout)
    why = _device_abi_problem(device, info.abi)
    if why:
        problems.append(f"{serial}: {why}")
        return []
    for f in programs:
        f.check_hash()
    with device_lock(device, project):
        push_all(device, directory, items)
        tracer = bool(info.get("event_tracer"))
        rows = bench_programs(device, directory, programs, s, tracer)
        for f, row in zip(programs, rows):
            if row.status != "ok":
                problems.append(f"{serial}: {f.file}: {row.note}")
            operators.append(_operators(device, directory, f, row, tracer, s))
            if answers is not None:
                verdicts.append(answers.check(device, directory, f, row, s, tracer))
    return rows


def _operators(device: Device, directory: str, f: PteFile, row: PteResultRow, tracer: bool,
               s: PteDeploySettings) -> Dict[str, Any]:
    """The program's per-operator table from the phone's ETDump, or "unknown" and why."""
    from .etdump import program_operators, unknown

    if not tracer:
        return unknown(device.serial, f.file, "the runner was built without ExecuTorch's event tracer: run "
                                              "`invoke build-android --lane executorch` (event tracer on by default)")
    if row.status != "ok":
        return unknown(device.serial, f.file, "the program did not run: " + row.note)
    return program_operators(device, directory, f, s.models, Path(s.results) / "etdump", s.warmup)
