"""``invoke deploy``: plan on the host → one worker per device on every adb server → record every device's rows,
failed ones too."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import DeviceError, RecordError, TorchdroidError
from toolchain.fsutil import ensure_writable_dir
from toolchain.hardware_records import Placement
from toolchain.numerics_records import NumericsVerdict
from toolchain.pte_results import PteDeployRecord
from toolchain.records import ResultRow, deploy_results_path, now_iso

from .adb import Adb
from .device_run import Cancelled, DeviceReport, record_failure, run_device, stop_benchmarks
from .formats import DeployFormat, chosen
from .hashes import HASH_CACHE_NAME
from .plan import DeployPlan, DeploySettings, check_values, project_name
from .push import check_dir
from .results import DB_NAME, ResultStore, export
from .servers import Target, Unreachable, list_servers, select
from .status import device_lines

log = logging.getLogger(__name__)


@dataclass
class DeployResult:
    devices: List[DeviceReport]
    run_id: Optional[int]  # None (and no db_path, no exports): a run without the TorchScript format
    db_path: Optional[Path]
    exports: Dict[str, Path]
    warnings: List[str]
    directory: str
    executorch: Optional[PteDeployRecord] = None  # the ExecuTorch format's record (executorch-run-NNNN.json)

    @property
    def rows(self) -> List[ResultRow]:
        return [r for d in self.devices for r in d.rows]

    @property
    def numerics(self) -> List[NumericsVerdict]:
        return [v for d in self.devices for v in d.numerics]

    @property
    def pte_numerics(self) -> List[NumericsVerdict]:
        return [v for d in self.devices for v in d.pte_numerics]

    @property
    def hardware(self) -> List[Placement]:
        return [p for d in self.devices for p in d.hardware]

    @property
    def failed(self) -> List[DeviceReport]:
        return [d for d in self.devices if d.errors]


def wanted_serials(serials: Sequence[str]) -> List[str]:
    """The serials asked for; with none, ``ANDROID_SERIAL`` (adb's convention), else every device."""
    asked = [s for s in serials if s]
    if not asked and os.environ.get("ANDROID_SERIAL", "").strip():
        asked = [os.environ["ANDROID_SERIAL"].strip()]
    return list(dict.fromkeys(asked))


def pick_targets(s: DeploySettings) -> Tuple[List[Target], List[Unreachable]]:
    """The devices of the run on every adb server (``--serial``, else ``ANDROID_SERIAL``, else all)."""
    adb = Adb.locate(s.servers, s.adb_host, s.adb_port, timeout=s.timeout, source=s.servers_from)
    asked = wanted_serials(s.serials)
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
    then ends the run (KeyboardInterrupt)."""
    check_values(s)
    formats = chosen(s.formats)
    plan = DeployPlan(None, [], None)
    for f in formats:
        f.plan(s, plan)
    plan.hashes.load(Path(s.results) / HASH_CACHE_NAME)  # local files' digests: not read again when unchanged
    for w in plan.warnings:
        log.warning("%s", w)
    directory = check_dir(f"{s.device_dir.rstrip('/')}/{project_name(s.project)}")
    targets, unreachable = pick_targets(s)
    reports = [DeviceReport(t.label, str(t.address)) for t in targets]
    started = now_iso()
    ensure_writable_dir(s.results, "results directory (deploy.results)")
    # before any device work: a store that cannot take the rows stops here
    keeper = Keeper.open(s, plan, started) if any(f.keeps_rows for f in formats) else None
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
        if keeper is not None:
            keeper.device_done(rep)
    if interrupted is not None:
        interrupted.detail = keep_completed(s, plan, reports, keeper, directory)  # the run's one closing line says it
        raise interrupted
    return record(s, plan, reports, keeper, directory, formats)


def keep_completed(s: DeploySettings, plan: DeployPlan, reports: List[DeviceReport], keeper: Optional[Keeper],
                   directory: str) -> str:
    """Ctrl-C: the rows the store keeps (TorchScript's) that completed are recorded (a run without one is forgotten:
    no empty run, no empty ``latest``); the ExecuTorch format's record is not written (a device's lines exist only
    once all its programs ran).  Returns what was kept, for the one line the task prints."""
    kept = []
    if keeper is not None:
        rows = [r for rep in reports for r in rep.rows]
        if rows:
            result = record(s, plan, reports, keeper, directory, [f for f in chosen(s.formats) if f.keeps_rows])
            kept.append(f"{len(rows)} completed row(s) kept in {result.exports['csv']}")
        else:
            keeper.discard()
    if plan.executorch is not None:
        kept.append("the ExecuTorch lines were not recorded")
    return "the benchmarks on the phones were stopped; " + ("; ".join(kept) or "nothing was recorded")


class Keeper:
    """Keeps every device's rows as soon as they exist: the run reserved in the store before any device work,
    each device's rows added to it and the run's CSV/JSON rewritten when that device is done.  A store that
    fails later (busy, a full disk) loses nothing: the rows stay in the CSV/JSON and are stored at the end."""

    def __init__(self, s: DeploySettings, store: ResultStore, run_id: int, started: str):
        self.s, self.store, self.run_id, self.started = s, store, run_id, started
        self.results = Path(s.results)
        self.rows: List[ResultRow] = []
        self.devices: List[dict] = []
        self.unstored: List[Tuple[List[ResultRow], List[dict]]] = []
        self._guard = threading.Lock()

    @classmethod
    def open(cls, s: DeploySettings, plan: DeployPlan, started: str) -> "Keeper":
        store = ResultStore(Path(s.results) / DB_NAME)
        # absolute paths: report compares the run's models directory with deploy-executorch's, from any directory
        settings = {k: (str(v.resolve()) if isinstance(v, Path) else v) for k, v in asdict(s).items()}
        return cls(s, store, store.begin_run(started, project_name(s.project), plan.commit, settings), started)

    @property
    def stem(self) -> str:
        return f"run-{self.run_id:04d}"

    def device_done(self, rep: DeviceReport) -> None:
        for r in rep.rows:
            r.server = rep.server
            r.run_id, r.started = self.run_id, self.started
        devices = [rep.conditions.to_dict()] if rep.conditions is not None else []
        with self._guard:
            self.rows += rep.rows
            self.devices += devices
            try:  # the CSV/JSON first: they never wait on SQLite
                export(self.rows, self.results, self.stem, self.devices)
            except TorchdroidError as e:  # a full disk: the store may still take them, and the end says so
                log.warning("could not write %s.csv/.json after %s: %s", self.results / self.stem, rep.serial, e.what)
            try:
                for rows, devs in self.unstored:
                    self.store.add_rows(self.run_id, self.started, rows, devs)
                self.unstored = []
                self.store.add_rows(self.run_id, self.started, rep.rows, devices)
            except TorchdroidError as e:
                self._unstored(rep.rows, devices, e.what)
            except sqlite3.Error as e:
                self._unstored(rep.rows, devices, f"{type(e).__name__}: {e}")

    def _unstored(self, rows: List[ResultRow], devices: List[dict], why: str) -> None:
        self.unstored.append((list(rows), devices))
        log.warning("the results database %s did not take %d row(s) now (%s); they are kept in %s.csv/.json and "
                    "stored at the end of the run", self.store.path, len(rows), why, self.results / self.stem)

    def discard(self) -> None:
        """The run ended before any row: forget its reserved id and the CSV/JSON written for it."""
        for path in (self.results / f"{self.stem}.csv", deploy_results_path(self.results, self.stem)):
            path.unlink(missing_ok=True)
        try:
            self.store.drop_run(self.run_id)
        except (TorchdroidError, sqlite3.Error) as e:  # the run stays empty in the history: say so in the log
            log.warning("could not remove the empty run %d from %s: %s", self.run_id, self.store.path,
                        getattr(e, "what", e))

    def finish(self) -> None:
        """The rows the store did not take during the run; raises when it still does not (the CSV/JSON keep them)."""
        with self._guard:
            if not self.unstored:
                return
            try:
                for rows, devs in self.unstored:
                    self.store.add_rows(self.run_id, self.started, rows, devs)
                self.unstored = []
            except (TorchdroidError, sqlite3.Error) as e:
                raise RecordError(f"the results database {self.store.path} did not take run {self.run_id}'s rows",
                                  cause=getattr(e, "what", str(e)),
                                  remedy=f"every row is kept in {self.results / self.stem}.csv and .json; free the "
                                         "database (another deploy or report?) and deploy again to have the history "
                                         "hold them") from e


def run_workers(reports: List[DeviceReport], targets: List[Target], s: DeploySettings, plan: DeployPlan,
                directory: str, status: Callable[[str, str], None], keeper: Optional[Keeper],
                formats: Sequence[DeployFormat]) -> None:
    """One worker thread per device (whichever adb server it is on); whatever one device does, the others go on.

    Ctrl-C: the benchmarks running on the phones are stopped (each phone is told, a status line says so), each
    worker ends after its current step, the completed rows are kept, then KeyboardInterrupt is raised again."""
    cancel = threading.Event()

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
            if keeper is not None:
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


def record(s: DeploySettings, plan: DeployPlan, reports: List[DeviceReport], keeper: Optional[Keeper],
           directory: str, formats: Sequence[DeployFormat]) -> DeployResult:
    """Each format's records (``formats``, in deploy/formats.py's order): TorchScript's rows are stored already,
    device by device (``Keeper``); ExecuTorch's join the latest TorchScript results, this run's when it had both."""
    result = DeployResult(reports, None, None, {}, plan.warnings, directory)
    for f in formats:
        f.record(s, plan, result, keeper)
    return result
