"""One device's deploy, step by step: check → lock → push → install → benchmark → conditions after.

Each step is a small function taking the ``DeviceRun`` (what this device has done so far); a step that
fails raises, and the caller records the device as failed with the reason.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import TorchdroidError, command
from toolchain.hardware_records import LISTER_NAME, Placement
from toolchain.numerics_records import NumericsVerdict
from toolchain.records import BENCH_BINARY, ModelFile, ResultRow

from . import app_bench as _app
from . import bench as _bench
from . import nnapi_log as _nnapi_log
from . import numerics as _numerics
from .adb import Device, state_error
from .environment import (READ_COMMAND, SECTION, Conditions, parse_snapshot, restore_all_command, restored,
                          throttle_warnings)
from .executorch import BUILD
from .executorch import SUBDIR as ET_SUBDIR
from .install import install_apk
from .lock import Attempt, answer, device_lock, lock_path, new_owner, phone_lock, take_command
from .plan import DeployPlan, DeploySettings, project_name
from .preflight import DeviceFacts, check_abi, check_page_size, check_space, parse_df_available, parse_page_size
from .push import PushItem, parse_state, push_all, state_command
from .rows import app_row, failed_device_row, model_row
from .servers import Target

log = logging.getLogger(__name__)
_PAGE_MARK = "--torchdroid-page--"
_LOCK_MARK = "--torchdroid-lock--"


@dataclass
class DeviceReport:
    serial: str  # unique in the run (SERIAL@HOST:PORT when two servers list the same serial)
    server: str = ""  # HOST:PORT of its adb server
    facts: Optional[DeviceFacts] = None
    conditions: Optional[Conditions] = None
    pushed_bytes: int = 0
    pushed_files: int = 0
    skipped_files: int = 0
    installed: Optional[bool] = None  # True: pm install ran; False: the same APK was already installed
    install_error: Optional[str] = None
    rows: List[ResultRow] = field(default_factory=list)  # every format's (an ExecuTorch program's: deploy/executorch.py)
    errors: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    # is each model's (and program's) answer right: every format's verdicts, one list (deploy/numerics.py)
    numerics: List[NumericsVerdict] = field(default_factory=list)
    hardware: List[Placement] = field(default_factory=list)  # which hardware NNAPI chose (deploy/nnapi_log.py)
    operators: List[dict] = field(default_factory=list)  # per program: its ETDump's operator table, or unknown and why
    # told of each row the moment it exists (deploy/orchestrate.Keeper: the run's journal, on disk at once)
    on_row: Optional[Callable[["DeviceReport", ResultRow], None]] = field(default=None, repr=False, compare=False)

    def add_row(self, row: ResultRow) -> None:
        self.rows.append(row)
        if self.on_row is not None:
            self.on_row(self, row)


@dataclass
class DeviceRun:
    dev: Device
    rep: DeviceReport
    s: DeploySettings
    plan: DeployPlan
    directory: str
    status: Callable[[str], None]
    facts: Optional[DeviceFacts] = None
    models: List[ModelFile] = field(default_factory=list)  # what this device benchmarks (NNAPI dropped below SDK 29)
    nnapi_reason: Optional[str] = None
    there: str = ""  # state_command output: what the directory holds already
    props: Dict[str, str] = field(default_factory=dict)  # getprop, from the probe
    df: str = ""  # df -k of the device directory's parent, from the probe
    tail: str = ""  # the probe's page size and conditions
    nnapi_devices: Optional[Tuple[List[List[str]], str]] = None  # the lister's devices or why none, read once
    cancel: threading.Event = field(default_factory=threading.Event)  # set by Ctrl-C (orchestrate.run_workers)

    def go_on(self) -> None:
        """Between steps: end here when the run was interrupted."""
        if self.cancel.is_set():
            raise Cancelled()


class Cancelled(Exception):
    """Ctrl-C: this device's run ends after its current step; its completed rows are kept."""


def run_device(target: Target, rep: DeviceReport, s: DeploySettings, plan: DeployPlan, directory: str,
               status: Callable[[str], None], steps: Sequence[Callable[[DeviceRun], None]],
               cancel: Optional[threading.Event] = None) -> None:
    """Probe, lock, check, then each format's ``steps`` (deploy/formats.py ``on_device``) under the lock."""
    if target.state != "device":
        raise state_error(rep.serial, target.state)
    run = DeviceRun(target.server.device(target.serial, s.timeout, command(*s.rerun)), rep, s, plan, directory, status,
                    cancel=cancel or threading.Event())
    attempt = probe(run)
    with device_lock(run.dev, directory, attempt), phone_lock(run.dev, project_name(s.project),
                                                              restore_all_command()) as phone:
        rep.notes += restored(phone.said)  # what an earlier run that was cut off had left changed, put back
        if answer(attempt.output) is not None:  # the lock was taken after a wait: read the directory again
            run.there = run.dev.shell(state_command(directory, _candidates(run)), check=True,
                                      what=f"reading {directory}").output
        check(run)
        for step in steps:
            step(run)
    conditions_after(run)
    status("done")


# --------------------------------------------------------------------------- check


def _candidates(run: DeviceRun) -> List[str]:
    return [BENCH_BINARY, _bench.GATORD_NAME, LISTER_NAME] + [m.file for m in run.plan.models]


def _lists_devices(run: DeviceRun) -> bool:
    """The NNAPI device lister goes along when placements are read and build-android built it."""
    binary = run.plan.binary
    return (binary is not None and binary.lister is not None and run.s.hardware
            and any(m.backend == "nnapi" for m in run.models))


def _measures(run: DeviceRun) -> bool:
    return run.s.bench or (run.plan.app is not None and run.s.app_bench)  # conditions only matter then


def probe(run: DeviceRun) -> Attempt:
    """One round trip: facts, free space, the first attempt at the directory's lock, then (under it, when
    taken) the directory's state, the page size and the conditions.  Returns the lock attempt; ``check``
    reads the rest."""
    run.status("checking")
    parent = run.directory.rsplit("/", 1)[0]
    me = new_owner()
    then = (f"{take_command(lock_path(run.directory), me)}; echo \"{_LOCK_MARK} $?\"; "
            f"{state_command(run.directory, _candidates(run))}; echo {_PAGE_MARK}; getconf PAGE_SIZE 2>/dev/null; "
            f"{READ_COMMAND if _measures(run) else ''}")
    props, run.df, rest = run.dev.probe(parent, then=then)
    lock_out, _, rest = rest.partition(_LOCK_MARK)
    code, _, rest = rest.partition("\n")
    run.there, _, run.tail = rest.partition(_PAGE_MARK)
    run.props = props
    return Attempt(me, lock_out, int(code) if code.strip().isdigit() else 1)


def check(run: DeviceRun) -> None:
    """The facts of the probe's round trip, and the checks: ABI, page size, NNAPI's SDK, free space."""
    parent = run.directory.rsplit("/", 1)[0]
    page_text, _, env_text = run.tail.partition(SECTION)
    facts = dataclasses.replace(DeviceFacts.from_props(run.rep.serial, run.props),
                                page_size=parse_page_size(page_text))
    run.facts = run.rep.facts = facts
    if _measures(run):  # a push-only deploy (--no-bench) does not pay two environment reads on its critical path
        run.rep.conditions = Conditions(run.rep.serial, facts.soc, facts.page_size, parse_snapshot(SECTION + env_text))
    et = run.plan.executorch
    for binary, build in ((run.plan.binary, "invoke build-android"), (et and et.runner, et and BUILD)):
        if binary is not None:
            check_abi(facts, binary.abi or "?", build)
            check_page_size(facts, binary.path, binary.alignment)
    run.nnapi_reason = facts.nnapi_skip_reason()
    run.models = [m for m in run.plan.models if m.backend != "nnapi" or run.nnapi_reason is None]
    _note_nnapi(run)
    check_space(facts, parse_df_available(run.df), _bytes_needed(run), parent)


def _note_nnapi(run: DeviceRun) -> None:
    facts = run.facts
    if run.nnapi_reason:
        run.rep.notes.append(f"NNAPI skipped: {run.nnapi_reason}")
        if run.plan.binary is not None:
            for m in run.plan.models:
                if m.backend == "nnapi":
                    run.rep.add_row(model_row(facts, run.plan, m, "skipped", run.s.options, reason=run.nnapi_reason))
    elif facts.nnapi_note() and any(m.backend == "nnapi" for m in run.plan.models):
        run.rep.notes.append(facts.nnapi_note())


def _push_items(run: DeviceRun) -> List[PushItem]:
    items: List[PushItem] = []
    if run.plan.binary is not None:
        items.append(PushItem(run.plan.binary.path, BENCH_BINARY, 0o755))
        if run.s.gatord:
            items.append(PushItem(run.s.gatord, _bench.GATORD_NAME, 0o755))
        if _lists_devices(run):
            items.append(PushItem(run.plan.binary.lister, LISTER_NAME, 0o755))
    return items + [PushItem(m.path, m.file, 0o644, m.sha256) for m in run.models]


def _bytes_needed(run: DeviceRun) -> int:
    apk = run.plan.app.apk.stat().st_size * 2 if run.plan.app else 0
    items = _push_items(run) + (run.plan.executorch.items if run.plan.executorch else [])
    return sum(it.local.stat().st_size for it in items) + apk


# --------------------------------------------------------------------------- push and install


def push(run: DeviceRun) -> None:
    """The files to the device directory."""
    items = _push_items(run)
    if not items:
        return
    total = sum(it.local.stat().st_size for it in items)
    done = [0, time.monotonic()]

    def on_bytes(n: int) -> None:  # push_all calls it one call at a time
        done[0] += n
        if time.monotonic() - done[1] >= 2.0:
            done[1] = time.monotonic()
            run.status(f"pushing: {done[0] / 1e6:.1f} of up to {total / 1e6:.1f} MB")

    existing = parse_state(run.dev, run.directory, run.there, [it.name for it in items])
    outcomes = push_all(run.dev, run.directory, items, on_progress=run.status, on_bytes=on_bytes, existing=existing,
                        hashes=run.plan.hashes)
    rep = run.rep
    rep.pushed_bytes = sum(o.bytes for o in outcomes)
    rep.pushed_files = sum(o.pushed for o in outcomes)
    rep.skipped_files = sum(not o.pushed for o in outcomes)
    run.status(f"files ready: {rep.pushed_files} pushed ({rep.pushed_bytes / 1e6:.1f} MB of {total / 1e6:.1f}), "
               f"{rep.skipped_files} unchanged")


def install(run: DeviceRun) -> None:
    app = run.plan.app
    if app is None:
        return
    run.status(f"installing {app.package}")
    try:
        run.rep.installed = install_apk(run.dev, run.directory, app.apk, app.package)
    except TorchdroidError as e:  # the binary benchmarks do not need the app: record and go on
        run.rep.install_error = e.what
        run.rep.errors.append(str(e))
        run.rep.add_row(app_row(run.facts, run.plan, _app.AppBench("cpu", None, f"install failed: {e.what}"),
                                    run.s.options))
        run.status(f"install failed: {e.what}")


# --------------------------------------------------------------------------- benchmarks


def _cool_down(run: DeviceRun, i: int) -> None:
    if run.s.options.cooldown > 0 and i > 1:
        run.status(f"cooling down {run.s.options.cooldown:g}s")
        time.sleep(run.s.options.cooldown)


def bench_binary(run: DeviceRun) -> None:
    if run.plan.binary is None:
        return
    opts = run.s.options
    for i, m in enumerate(run.models, 1):
        run.go_on()
        _cool_down(run, i)
        run.status(f"benchmarking {m.file} ({i}/{len(run.models)}, cold start + {opts.repeat}x{opts.iters} iterations)")
        mb = _bench.run_model(run.dev, run.directory, m.file, m.backend, opts, m.inputs, stop=run.cancel)
        run.go_on()  # a benchmark stopped by Ctrl-C is not a result: the completed ones are kept
        row = model_row(run.facts, run.plan, m, "ok", opts, bench=mb)
        run.rep.add_row(row)
        check_numerics(run, m, mb)
        find_hardware(run, m, row)


def check_numerics(run: DeviceRun, m: ModelFile, mb: _bench.ModelBench) -> None:
    """The model's output on each bundled input, printed by the phone, against the host's reference."""
    refs = run.plan.references
    if refs is None or not run.s.numerics:
        return
    ref = refs.current(m.file, m.sha256)
    if ref is None or not ref.outputs:  # nothing to compare with: no run on the phone, the reason recorded
        run.rep.numerics.append(_numerics.judge(run.rep.serial, m, [], [], ref))
        return
    if mb.cold is not None and mb.cold.problem and not any(r.ok for r in mb.runs):
        run.rep.numerics.append(NumericsVerdict(run.rep.serial, m.file, m.backend, m.mode, "unknown",
                                                reason=f"the model did not run: {mb.cold.problem}"))
        return
    run.status(f"checking the output of {m.file}")
    inputs = ref.runs()  # bundled inputs: each gives every output tensor of the model
    opts = run.s.options

    def command(i: int) -> str:
        return _bench.output_command(run.directory, m.file, m.backend, dataclasses.replace(opts, bundled_input=i))

    commands = [command(i) for i in range(max(1, inputs))]
    run.rep.numerics.append(_numerics.check_on_device(run.dev, run.rep.serial, m, commands, ref, opts.timeout,
                                                      run.facts.sdk if run.facts else None))


def find_hardware(run: DeviceRun, m: ModelFile, row: ResultRow) -> None:
    """After the model's benchmark (its cold start stays cold): one more run with NNAPI's placement log on, the
    property put back by the same device shell; a row whose operations (partly) ran on the CPU fallback says so."""
    if m.backend != "nnapi" or not run.s.hardware:
        return
    run.status(f"reading which hardware NNAPI chose for {m.file}")
    try:
        res = run.dev.shell(_nnapi_log.probe_command(run.directory, m, run.s.options), timeout=run.s.options.timeout)
        probe = _nnapi_log.read_probe(res.output)
    except TorchdroidError as e:
        probe = _nnapi_log.ProbeOutput()
        log.warning("[%s] NNAPI placement log of %s: %s", run.rep.serial, m.file, e.what)
    found = _nnapi_log.placement(run.rep.serial, m, probe, nnapi_devices(run))
    run.rep.hardware.append(found)
    if found.restored is False:
        run.rep.notes.append(f"WARNING: {_nnapi_log.VLOG_PROP} could not be put back to {probe.before!r} "
                             f"(reads {probe.after!r}): set it with `adb shell setprop {_nnapi_log.VLOG_PROP} ...`")
    flag = {"cpu": "nnapi-cpu-fallback", "partly-cpu": "nnapi-partly-cpu"}.get(found.status)
    if flag:
        row.flags = ",".join(x for x in (row.flags, flag) if x)


def nnapi_devices(run: DeviceRun) -> Tuple[List[List[str]], str]:
    """The phone's NNAPI devices with type and feature level (the lister, run once per phone), or none and why."""
    if run.nnapi_devices is None:
        if not _lists_devices(run):
            run.nnapi_devices = ([], _nnapi_log.NO_LISTER)
        else:
            try:
                out = run.dev.shell(_nnapi_log.lister_command(run.directory), timeout=run.s.options.timeout).output
                run.nnapi_devices = _nnapi_log.parse_devices(out)
            except TorchdroidError as e:
                run.nnapi_devices = ([], f"{LISTER_NAME} failed on the phone: {e.what}")
    return run.nnapi_devices


def bench_app(run: DeviceRun) -> None:
    app = run.plan.app
    if app is None or run.rep.installed is None or not run.s.app_bench:
        return
    if app.bench_skip:  # not torchdroid's app: it would never log a result line, so nothing is waited for
        run.status(f"in-app benchmark skipped: {app.package} does not declare torchdroid's contract")
        run.rep.add_row(app_row(run.facts, run.plan, _app.AppBench("cpu", None, app.bench_skip), run.s.options,
                                    status="skipped"))
        return
    for backend in app.backends:
        run.go_on()
        if backend == "nnapi" and run.nnapi_reason:
            continue
        run.status(f"in-app benchmark ({backend})")
        ab = _app.run_app(run.dev, app.package, app.activity, backend, run.s.options, run.s.app_wait)
        run.rep.add_row(app_row(run.facts, run.plan, ab, run.s.options))
        if ab.device_fault:
            break  # the next backend would fail the same way


def conditions_after(run: DeviceRun) -> None:
    cond = run.rep.conditions
    if cond is None:
        return
    try:
        cond.after = parse_snapshot(run.dev.shell(READ_COMMAND, timeout=60).output)
    except TorchdroidError as e:
        run.rep.notes.append(f"could not read the conditions after the benchmark: {e.what}")
    cond.warnings = throttle_warnings(cond.before, cond.after)
    if cond.warnings:
        for r in run.rep.rows:
            if r.status == "ok":
                r.flags = ",".join(x for x in (r.flags, "throttled") if x)
        run.rep.notes += [f"WARNING: {w}" for w in cond.warnings]


def stop_benchmarks(target: Target, s: DeploySettings, directory: str) -> bool:
    """Ctrl-C: stop the benchmark (or ExecuTorch's runner) running on the phone (its pid is in the device directory,
    or its ExecuTorch sub-directory, while it runs);
    True when the phone was told.  Never raises: the run is ending anyway."""
    try:
        dev = target.server.device(target.serial, min(s.timeout, 15.0))
        dev.shell(_bench.stop_command(directory, f"{directory}/{ET_SUBDIR}"), timeout=15)
        return True
    except Exception as e:  # noqa: BLE001 - a phone that cannot be told is said so, the others still are
        log.warning("[%s] could not stop the benchmark on the phone: %s", target.label, getattr(e, "what", e))
        return False


def record_failure(rep: DeviceReport, reason: str) -> None:
    """A device that failed is a row with status ``failed`` and the reason (the report shows it)."""
    rep.errors.append(reason)
    rep.add_row(failed_device_row(rep.serial, rep.facts, reason, rep.server))
