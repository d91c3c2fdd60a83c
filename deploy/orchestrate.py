"""``invoke deploy``: plan on the host → one worker per device on every adb server → record every device's rows,
failed ones too."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import DeviceError, TorchdroidError, VerificationError
from toolchain.fsutil import ensure_writable_dir
from toolchain.hardware_records import Placement
from toolchain.numerics_records import NumericsVerdict
from toolchain.records import ResultRow, now_iso

from .adb import Adb
from .device_run import Cancelled, DeviceReport, record_failure, run_device, stop_benchmarks
from .formats import DeployFormat, chosen, keep_run
from .hashes import HASH_CACHE_NAME
from .journal import import_journals
from .keeper import Keeper
from .plan import DeployPlan, DeploySettings, check_values, project_name
from .push import check_dir
from .results import DB_NAME, ResultStore
from .servers import Target, Unreachable, list_servers, select
from .status import device_lines
from .stf import farm_targets, needs_of

log = logging.getLogger(__name__)


@dataclass
class DeployResult:
    devices: List[DeviceReport]
    run_id: Optional[int]  # the run's id in the results store (None only before its rows are kept)
    db_path: Optional[Path]
    exports: Dict[str, Path]
    warnings: List[str]
    directory: str
    executorch: Optional[Any] = None  # the ExecuTorch format's part (executorch.ExecutorchRun)
    fail_on_numerics: bool = False  # deploy.fail_on_numerics: a phone whose outputs differ fails the task

    @property
    def differing(self) -> List[NumericsVerdict]:
        """Every phone x model (TorchScript and ExecuTorch) whose outputs differ from the host's."""
        return [v for v in self.numerics if v.verdict == "differs"]

    @property
    def rows(self) -> List[ResultRow]:
        return [r for d in self.devices for r in d.rows]

    @property
    def numerics(self) -> List[NumericsVerdict]:
        return [v for d in self.devices for v in d.numerics]

    @property
    def hardware(self) -> List[Placement]:
        return [p for d in self.devices for p in d.hardware]

    @property
    def failed(self) -> List[DeviceReport]:
        return [d for d in self.devices if d.errors]


DEVICE_PROBLEM, NUMERICS_DIFFER = DeviceError.exit_code, VerificationError.exit_code  # 7, 8


def numerics_policy(result: DeployResult) -> str:
    """The summary's line on outputs that differ: whether they fail this run (empty when none differ)."""
    n = len(result.differing)
    if not n:
        return ""
    if result.fail_on_numerics:
        return f"{n} phone output(s) differ from the host: deploy fails with exit code {NUMERICS_DIFFER} " \
               "(--fail-on-numerics)"
    return (f"{n} phone output(s) differ from the host: reported and warned about only, the exit code is not "
            f"affected (--fail-on-numerics or deploy.fail_on_numerics makes it exit {NUMERICS_DIFFER})")


def outcome(result: DeployResult, formats: Sequence[str]) -> Optional[Tuple[str, int]]:
    """What fails the task, with its exit code: a format's problem (a device or benchmark that failed: 7) before
    outputs that differ (8, only with ``fail_on_numerics``); None when the run succeeded."""
    problem = next(filter(None, (f.problem(result) for f in chosen(formats))), None)
    if problem:
        return problem, DEVICE_PROBLEM
    if result.fail_on_numerics and result.differing:
        return numerics_policy(result), NUMERICS_DIFFER
    return None


def wanted_serials(serials: Sequence[str]) -> List[str]:
    """The serials asked for; with none, ``ANDROID_SERIAL`` (adb's convention), else every device."""
    asked = [s for s in serials if s]
    if not asked and os.environ.get("ANDROID_SERIAL", "").strip():
        asked = [os.environ["ANDROID_SERIAL"].strip()]
    return list(dict.fromkeys(asked))


def pick_targets(s: DeploySettings, plan: DeployPlan, lent: contextlib.ExitStack
                 ) -> Tuple[List[Target], List[Unreachable]]:
    """The devices of the run on every adb server (``--serial``, else ``ANDROID_SERIAL``, else all); with a farm
    (``s.stf``), the phones it lends that can run ``plan``, connected to the first adb server and given back by
    ``lent``."""
    adb = Adb.locate(s.servers, s.adb_host, s.adb_port, timeout=s.timeout, source=s.servers_from)
    asked = wanted_serials(s.serials)
    if s.stf is not None:
        # --serial names the farm's serials; ANDROID_SERIAL is a local phone's, not the farm's
        return farm_targets(s.stf, adb, [x for x in s.serials if x], needs_of(plan, s.install), lent), []
    try:
        return select(list_servers(adb), asked, s.rerun)
    except DeviceError as e:
        if asked and not [x for x in s.serials if x]:  # the serial came from the environment: say so
            raise DeviceError(e.what, cause=e.cause, remedy="the serial came from ANDROID_SERIAL: check it against "
                              "`adb devices -l`, or unset it to deploy to every device") from e
        raise


def deploy(s: DeploySettings, on_status: Optional[Callable[[str, str], None]] = None) -> DeployResult:
    """Deploy to every selected device in parallel; a failing device never stops the others.

    The results store is checked (a torchdroid database, not damaged, not locked, writable) and the run's id
    reserved before any device work; each device's rows are stored and exported (``run-NNNN.csv``/``.json``)
    as soon as that device is done.  Ctrl-C stops the benchmarks on the phones, keeps every completed row and
    then ends the run (KeyboardInterrupt).  Phones a farm lent (``s.stf``) are given back whatever happens."""
    with contextlib.ExitStack() as lent:
        return _deploy(s, on_status, lent)


def _deploy(s: DeploySettings, on_status: Optional[Callable[[str, str], None]], lent: contextlib.ExitStack
            ) -> DeployResult:
    check_values(s)
    formats = chosen(s.formats)
    plan = DeployPlan(None, [], None)
    for f in formats:
        f.plan(s, plan)
    plan.hashes.load(Path(s.results) / HASH_CACHE_NAME)  # local files' digests: not read again when unchanged
    for w in plan.warnings:
        log.warning("%s", w)
    directory = check_dir(f"{s.device_dir.rstrip('/')}/{project_name(s.project)}")
    targets, unreachable = pick_targets(s, plan, lent)
    reports = [DeviceReport(t.label, t.source) for t in targets]
    started = now_iso()
    ensure_writable_dir(s.results, "results directory (deploy.results)")
    # before any device work: a store that cannot take the rows stops here
    imported = import_journals(ResultStore(Path(s.results) / DB_NAME), Path(s.results))
    for line in imported:
        log.warning("%s", line)
    plan.warnings += imported
    keeper = Keeper.open(s, plan, started)
    interrupted = None
    try:
        with contextlib.ExitStack() as stack:
            status = on_status or stack.enter_context(device_lines())
            run_workers(reports, targets, s, plan, directory, status, keeper, formats)
    except KeyboardInterrupt as e:
        interrupted = e
    finally:
        plan.hashes.close()
    for u in unreachable:  # a server that is down, and the named devices it may hold: rows with the reason
        rep = DeviceReport(u.serial or f"(adb server {u.address})", str(u.address))
        record_failure(rep, str(u.error))
        reports.append(rep)
        keeper.device_done(rep)
    if interrupted is not None:
        interrupted.detail = keep_completed(s, plan, reports, keeper, directory)  # the run's one closing line says it
        raise interrupted
    return record(s, plan, reports, keeper, directory, formats)


def keep_completed(s: DeploySettings, plan: DeployPlan, reports: List[DeviceReport], keeper: Keeper,
                   directory: str) -> str:
    """Ctrl-C: the rows that completed (every format's) are recorded, not the formats' own records (a run without
    a row is forgotten: no empty run, no empty ``latest``).  Returns what was kept, for the one line the task
    prints."""
    rows = [r for rep in reports for r in rep.rows]
    if rows:
        record(s, plan, reports, keeper, directory, [])
        kept = f"{len(rows)} completed row(s) kept in {keeper.where()}"
    else:
        keeper.discard()
        kept = "nothing was recorded"
    return "the benchmarks on the phones were stopped; " + kept


def run_workers(reports: List[DeviceReport], targets: List[Target], s: DeploySettings, plan: DeployPlan,
                directory: str, status: Callable[[str, str], None], keeper: Keeper,
                formats: Sequence[DeployFormat]) -> None:
    """One worker thread per device (whichever adb server it is on); whatever one device does, the others go on.

    Ctrl-C: the benchmarks running on the phones are stopped (each phone is told, a status line says so), each
    worker ends after its current step, the completed rows are kept, then KeyboardInterrupt is raised again."""
    cancel = threading.Event()
    for rep in reports:
        rep.on_row = keeper.measured  # each row onto the disk the moment it is measured

    def work(rep: DeviceReport, target: Target) -> None:
        try:
            run_device(target, rep, s, plan, directory, lambda t: status(rep.serial, t),
                       [f.on_device for f in formats], cancel)
        except Cancelled:
            status(rep.serial, "interrupted: benchmark stopped, completed rows kept")
        except TorchdroidError as e:
            record_failure(rep, str(e))
            status(rep.serial, f"failed: {e.what}")
        except Exception as e:  # a bug or an unexpected adb failure: this device only
            log.debug("[%s] unexpected failure", rep.serial, exc_info=True)
            record_failure(rep, f"{type(e).__name__}: {e}")
            status(rep.serial, f"failed: {type(e).__name__}: {e}")
        finally:
            name_loss(target, rep)
            keeper.device_done(rep)

    pool = ThreadPoolExecutor(max_workers=max(1, len(reports)), thread_name_prefix="deploy")
    futures = [pool.submit(work, rep, t) for rep, t in zip(reports, targets)]
    try:
        while not all(f.done() for f in futures):
            wait(futures, timeout=0.5)
    except KeyboardInterrupt:
        cancel.set()
        for rep, t in zip(reports, targets):
            if not futures[reports.index(rep)].done():
                status(rep.serial, "interrupted: stopping the benchmark on the phone")
                stop_benchmarks(t, s, directory)
        wait(futures)
        raise
    finally:
        pool.shutdown(wait=True)


def name_loss(target: Target, rep: DeviceReport) -> None:
    """A phone its farm took back during the run (``target.lost``): its failure and failed rows say so first."""
    failed = [r for r in rep.rows if r.status == "failed"]
    gone = target.lost() if target.lost is not None and (rep.errors or failed) else None
    if gone:
        rep.errors = [f"{gone}: {e}" for e in rep.errors] or [gone]
        for r in failed:
            r.reason = f"{gone}: {r.reason}"


def record(s: DeploySettings, plan: DeployPlan, reports: List[DeviceReport], keeper: Keeper,
           directory: str, formats: Sequence[DeployFormat]) -> DeployResult:
    """What each of ``formats`` records of its own (in deploy/formats.py's order), then the run's rows (every
    format's, stored already device by device by the ``Keeper``) and all of that in the run's CSV/JSON."""
    result = DeployResult(reports, None, None, {}, plan.warnings, directory, fail_on_numerics=s.fail_on_numerics)
    for f in formats:
        f.record(s, plan, result, keeper)
    keep_run(s, plan, result, keeper)
    return result
