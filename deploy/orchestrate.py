"""``invoke deploy``: plan on the host → one worker per device on every adb server → record every device's rows,
failed ones too."""

from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import DeviceError, TorchdroidError
from toolchain.hardware_records import HardwareRecord, Placement, hardware_path
from toolchain.numerics_records import NumericsRecord, NumericsVerdict, numerics_path
from toolchain.records import ResultRow, now_iso

from .adb import Adb
from .device_run import DeviceReport, record_failure, run_device
from .hashes import HASH_CACHE_NAME
from .plan import DeployPlan, DeploySettings, check_values, make_plan, project_name
from .push import check_dir
from .results import DB_NAME, ResultStore, export
from .servers import Target, Unreachable, list_servers, select
from .status import device_lines

log = logging.getLogger(__name__)


@dataclass
class DeployResult:
    devices: List[DeviceReport]
    run_id: Optional[int]
    db_path: Path
    exports: Dict[str, Path]
    warnings: List[str]
    directory: str

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
        return select(list_servers(adb), asked)
    except DeviceError as e:
        if asked and not [x for x in s.serials if x]:  # the serial came from the environment: say so
            raise DeviceError(e.what, cause=e.cause, remedy="the serial came from ANDROID_SERIAL: check it against "
                              "`adb devices -l`, or unset it to deploy to every device") from e
        raise


def deploy(s: DeploySettings, on_status: Optional[Callable[[str, str], None]] = None) -> DeployResult:
    """Deploy to every selected device in parallel; a failing device never stops the others."""
    check_values(s)
    plan = make_plan(s)
    plan.hashes.load(Path(s.results) / HASH_CACHE_NAME)  # local files' digests: not read again when unchanged
    for w in plan.warnings:
        log.warning("%s", w)
    directory = check_dir(f"{s.device_dir.rstrip('/')}/{project_name(s.project)}")
    targets, unreachable = pick_targets(s)
    reports = [DeviceReport(t.label, str(t.address)) for t in targets]
    started = now_iso()
    try:
        with contextlib.ExitStack() as stack:
            status = on_status or stack.enter_context(device_lines())
            run_workers(reports, targets, s, plan, directory, status)
    finally:
        plan.hashes.close()
    for u in unreachable:  # a server that is down, and the named devices it may hold: rows with the reason
        rep = DeviceReport(u.serial or f"(adb server {u.address})", str(u.address))
        record_failure(rep, str(u.error))
        reports.append(rep)
    for rep in reports:
        for r in rep.rows:
            r.server = rep.server
    return record(s, plan, reports, started, directory)


def run_workers(reports: List[DeviceReport], targets: List[Target], s: DeploySettings, plan: DeployPlan,
                directory: str, status: Callable[[str, str], None]) -> None:
    """One worker thread per device (whichever adb server it is on); whatever one device does, the others go on."""

    def work(rep: DeviceReport, target: Target) -> None:
        try:
            run_device(target, rep, s, plan, directory, lambda t: status(rep.serial, t))
        except TorchdroidError as e:
            record_failure(rep, str(e))
            status(rep.serial, f"failed: {e.what}")
        except Exception as e:  # a bug or an unexpected adb failure: this device only
            log.debug("[%s] unexpected failure", rep.serial, exc_info=True)
            record_failure(rep, f"{type(e).__name__}: {e}")
            status(rep.serial, f"failed: {type(e).__name__}: {e}")

    with ThreadPoolExecutor(max_workers=max(1, len(reports)), thread_name_prefix="deploy") as pool:
        list(pool.map(work, reports, targets))


def record(s: DeploySettings, plan: DeployPlan, reports: List[DeviceReport], started: str,
           directory: str) -> DeployResult:
    """Store every row (ok, failed, skipped) and each device's conditions; export CSV/JSON for this run and latest."""
    rows = [r for rep in reports for r in rep.rows]
    devices = [rep.conditions.to_dict() for rep in reports if rep.conditions is not None]
    store = ResultStore(Path(s.results) / DB_NAME)
    run_id, exports = None, {}
    if rows:
        # absolute paths: report compares the run's models directory with deploy-executorch's, from any directory
        settings = {k: (str(v.resolve()) if isinstance(v, Path) else v) for k, v in asdict(s).items()}
        run_id = store.add_run(started, project_name(s.project), plan.commit, settings, rows, devices)
        exports = export(rows, Path(s.results), f"run-{run_id:04d}", devices)
        exports.update({f"latest_{k}": v for k, v in export(rows, Path(s.results), "latest", devices).items()})
        exports.update(record_numerics(reports, Path(s.results), run_id, plan))
        exports.update(record_hardware(reports, Path(s.results), run_id, plan if s.hardware and s.bench else None))
    return DeployResult(reports, run_id, store.path, exports, plan.warnings, directory)


def record_numerics(reports: List[DeviceReport], results: Path, run_id: int, plan: DeployPlan) -> Dict[str, Path]:
    """Every phone's numerics verdicts (report reads ``latest-numerics.json``; an empty list when none ran); a
    device that failed before its models ran gets "unknown" for each of them, with its failure."""
    verdicts = []
    for rep in reports:
        verdicts += rep.numerics
        if not rep.numerics and rep.errors and plan.references is not None:
            verdicts += [NumericsVerdict(rep.serial, m.file, m.backend, m.mode, "unknown",
                                         reason=f"the device failed: {rep.errors[0].splitlines()[0]}")
                         for m in plan.models]
    rec = NumericsRecord(run_id, verdicts)
    return {"numerics": rec.write(numerics_path(results, f"run-{run_id:04d}")),
            "latest_numerics": rec.write(numerics_path(results, "latest"))}


def record_hardware(reports: List[DeviceReport], results: Path, run_id: int,
                    plan: Optional[DeployPlan]) -> Dict[str, Path]:
    """Every phone's NNAPI placements (report reads ``run-NNNN-hardware.json``); an NNAPI model a device did not
    run (the device failed, or skipped NNAPI) is "unknown" with the reason.  Nothing is written when not asked for."""
    if plan is None or plan.binary is None:
        return {}
    placements = []
    for rep in reports:
        placements += rep.hardware
        seen = {p.file for p in rep.hardware}
        for m in plan.models:
            if m.backend == "nnapi" and m.file not in seen:
                why = next((r.reason for r in rep.rows if r.model_file == m.file and r.reason), "") or (
                    rep.errors[0].splitlines()[0] if rep.errors else "the model was not run on this device")
                placements.append(Placement(rep.serial, m.file, m.mode, "unknown", reason=f"not run: {why}"))
    rec = HardwareRecord(run_id, placements)
    return {"hardware": rec.write(hardware_path(results, f"run-{run_id:04d}")),
            "latest_hardware": rec.write(hardware_path(results, "latest"))}
