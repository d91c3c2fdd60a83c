"""``invoke deploy``: plan on the host → one worker per device → record every device's rows, failed ones too."""

from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from toolchain.errors import DeviceError, TorchdroidError
from toolchain.records import ResultRow, now_iso

from .adb import AdbServer
from .device_run import DeviceReport, record_failure, run_device
from .plan import DeployPlan, DeploySettings, make_plan, project_name
from .push import check_dir
from .results import DB_NAME, ResultStore, export
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
    def failed(self) -> List[DeviceReport]:
        return [d for d in self.devices if d.errors]


def wanted_serials(serials: Sequence[str]) -> List[str]:
    """The serials asked for; with none, ``ANDROID_SERIAL`` (adb's convention), else every device."""
    asked = [s for s in serials if s]
    if not asked and os.environ.get("ANDROID_SERIAL", "").strip():
        asked = [os.environ["ANDROID_SERIAL"].strip()]
    return list(dict.fromkeys(asked))


def select_devices(server: AdbServer, serials: Sequence[str]) -> Dict[str, str]:
    known = server.devices()
    asked = wanted_serials(serials)
    if asked:
        missing = [s for s in asked if s not in known]
        if missing:
            origin = "ANDROID_SERIAL" if not [s for s in serials if s] else "--serial"
            raise DeviceError(f"no device {', '.join(missing)} on the adb server {server.host}:{server.port}",
                              cause=f"it knows: {', '.join(known) or 'no devices'}",
                              remedy=f"check `adb devices -l` and the {origin} value")
        return {s: known[s] for s in asked}
    if not known:
        raise DeviceError(f"no devices on the adb server {server.host}:{server.port}",
                          remedy="connect a phone with USB debugging enabled (or `adb connect HOST:PORT`) "
                                 "and check `adb devices`")
    return known


def deploy(s: DeploySettings, on_status: Optional[Callable[[str, str], None]] = None) -> DeployResult:
    """Deploy to every selected device in parallel; a failing device never stops the others."""
    plan = make_plan(s)
    for w in plan.warnings:
        log.warning("%s", w)
    directory = check_dir(f"{s.device_dir.rstrip('/')}/{project_name(s.project)}")
    server = AdbServer.locate(s.adb_host, s.adb_port, s.timeout)
    selected = select_devices(server, s.serials)
    reports = [DeviceReport(serial) for serial in selected]
    started = now_iso()
    with contextlib.ExitStack() as stack:
        status = on_status or stack.enter_context(device_lines())
        run_workers(server, reports, selected, s, plan, directory, status)
    return record(s, plan, reports, started, directory)


def run_workers(server: AdbServer, reports: List[DeviceReport], selected: Dict[str, str], s: DeploySettings,
                plan: DeployPlan, directory: str, status: Callable[[str, str], None]) -> None:
    """One worker thread per device; whatever one device does, the others go on."""

    def work(rep: DeviceReport) -> None:
        try:
            run_device(server, rep, selected[rep.serial], s, plan, directory, lambda t: status(rep.serial, t))
        except TorchdroidError as e:
            record_failure(rep, str(e))
            status(rep.serial, f"failed: {e.what}")
        except Exception as e:  # a bug or an unexpected adb failure: this device only
            log.debug("[%s] unexpected failure", rep.serial, exc_info=True)
            record_failure(rep, f"{type(e).__name__}: {e}")
            status(rep.serial, f"failed: {type(e).__name__}: {e}")

    with ThreadPoolExecutor(max_workers=max(1, len(reports)), thread_name_prefix="deploy") as pool:
        list(pool.map(work, reports))


def record(s: DeploySettings, plan: DeployPlan, reports: List[DeviceReport], started: str,
           directory: str) -> DeployResult:
    """Store every row (ok, failed, skipped) and each device's conditions; export CSV/JSON for this run and latest."""
    rows = [r for rep in reports for r in rep.rows]
    devices = [rep.conditions.to_dict() for rep in reports if rep.conditions is not None]
    store = ResultStore(Path(s.results) / DB_NAME)
    run_id, exports = None, {}
    if rows:
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(s).items()}
        run_id = store.add_run(started, project_name(s.project), plan.commit, settings, rows, devices)
        exports = export(rows, Path(s.results), f"run-{run_id:04d}", devices)
        exports.update({f"latest_{k}": v for k, v in export(rows, Path(s.results), "latest", devices).items()})
    return DeployResult(reports, run_id, store.path, exports, plan.warnings, directory)
