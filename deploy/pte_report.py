"""The report's ExecuTorch section: deploy-executorch's rows beside the legacy run the report draws, stale ones marked.

``invoke report`` draws one legacy deploy run (SQLite).  ``invoke deploy-executorch`` wrote, at its own time,
``executorch-latest.json``: per device the ExecuTorch XNNPACK/portable programs with the legacy TorchScript CPU and
NNAPI rows of the legacy results it found (``latest.json``) and each line's speed-up over the legacy CPU model of
the same precision.  This module reads that record (a malformed or tampered one is a RecordError, exit 5) and says
when its rows do not belong to the reported run:

* it joined another legacy run than the one reported (or none);
* it was written before the reported run started (the legacy numbers are newer than the ExecuTorch ones);
* its programs came from another models directory than the reported run's models;
* a device of the record is not in the reported run.

When the reported run has in-app numbers of an ExecuTorch program's app, it also says whether the app
(org.pytorch:executorch-android at the app-info's version) and executor_runner (the build-info's ExecuTorch) are the
same runtime, different ones, or not known to be the same (docs/facts.md EA8).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import TorchdroidError, command
from toolchain.pte_results import PteDeployRecord, PteResultRow, parse_time, pte_results_path
from toolchain.records import AppInfo, BuildInfo

from .results import ResultRow

HINT = ("no ExecuTorch rows: run `invoke convert --format torchscript,executorch`, `invoke build-android --lane "
        "executorch` and `invoke deploy-executorch` (it writes {path}) for ExecuTorch XNNPACK beside TorchScript "
        "CPU and NNAPI")


@dataclass
class PteDeviceTable:
    """One device's ExecuTorch and legacy lines, as deploy-executorch measured them."""

    serial: str
    title: str
    rows: List[PteResultRow]
    stale: List[str] = field(default_factory=list)  # why these rows do not belong to the reported run
    operators: List[Dict[str, Any]] = field(default_factory=list)  # per program: the phone's ETDump table or unknown


@dataclass
class PteReportSection:
    path: Path
    present: bool
    written: str = ""
    legacy_run_id: Optional[int] = None
    stale: List[str] = field(default_factory=list)  # reasons that hold for the whole record
    devices: List[PteDeviceTable] = field(default_factory=list)
    missing_devices: List[str] = field(default_factory=list)  # devices of the run without ExecuTorch rows
    problems: List[str] = field(default_factory=list)  # what deploy-executorch itself reported
    notes: List[str] = field(default_factory=list)  # what every comparison must say (unoptimised CPU baselines...)
    hint: str = ""


def _same_dir(a: str, b: Optional[str]) -> bool:
    return b is None or Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def record_staleness(rec: PteDeployRecord, run_id: int, run_started: str, run_models: Optional[str]) -> List[str]:
    """Why the record's rows do not belong to legacy run ``run_id`` (empty: they do)."""
    out = []
    if rec.legacy_run_id is None:
        error = rec.legacy.get("error")
        why = f" ({rec.legacy.get('path', 'latest.json')} could not be read: {error})" if error else ""
        out.append(f"deploy-executorch found no legacy results to join{why} (the TorchScript/NNAPI lines and speed-ups "
                   f"are missing), while this report draws legacy run {run_id}")
    elif rec.legacy_run_id != run_id:
        out.append(f"its TorchScript CPU/NNAPI lines and speed-ups come from legacy run {rec.legacy_run_id}, "
                   f"not from run {run_id} drawn here")
    written, started = parse_time(rec.written), parse_time(run_started)
    if written and started and written < started:
        out.append(f"measured at {rec.written}, before legacy run {run_id} started ({run_started}): "
                   "the legacy results are newer")
    if not _same_dir(rec.models, run_models):
        out.append(f"its programs came from {rec.models}, legacy run {run_id} deployed the models of "
                   f"{Path(str(run_models)).expanduser().resolve()}")
    return out


def _title(serial: str, run_rows: Sequence[ResultRow]) -> str:
    r = next((r for r in run_rows if r.serial == serial and r.device_model), None)
    return f"{serial}: {r.device_model}, Android {r.release} (SDK {r.sdk})" if r else serial


def build_section(results_dir: Path, run_rows: Sequence[ResultRow], run_settings: Dict[str, Any]) -> PteReportSection:
    """The section for the run whose rows are ``run_rows`` (all of one run); absent record: only the hint."""
    path = pte_results_path(results_dir)
    if not PteDeployRecord.exists(results_dir):
        return PteReportSection(path, present=False, hint=HINT.format(path=path))
    rec = PteDeployRecord.load(results_dir)  # RecordError (exit 5) when malformed or tampered
    run_id, started = run_rows[0].run_id, run_rows[0].started
    models = run_settings.get("models")
    section = PteReportSection(path, True, rec.written, rec.legacy_run_id,
                               record_staleness(rec, run_id, started, None if models is None else str(models)),
                               problems=list(rec.problems), notes=list(rec.notes))
    in_run = {r.serial for r in run_rows}
    for serial in rec.serials():
        stale = [] if serial in in_run else [f"device {serial} is not in legacy run {run_id}"]
        section.devices.append(PteDeviceTable(serial, _title(serial, run_rows), rec.rows_of(serial), stale,
                                              rec.operators_of(serial)))
    section.missing_devices = sorted({r.serial for r in run_rows if r.source != "deploy"} - set(rec.serials()))
    section.notes.extend(runtime_notes(rec, run_rows, run_settings))
    return section


# --------------------------------------------------------------------------- the app's runtime and the runner's


def app_executorch_rows(run_rows: Sequence[ResultRow]) -> List[ResultRow]:
    """The run's in-app rows of an ExecuTorch program's app (``fp32-xnnpack``...; a TorchScript app's are quant_*)."""
    return [r for r in run_rows if r.source == "app" and r.status == "ok" and r.variant
            and not r.variant.startswith("quant_") and r.variant != "unknown"]


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


def runtime_notes(rec: PteDeployRecord, run_rows: Sequence[ResultRow], run_settings: Dict[str, Any]) -> List[str]:
    """When the reported run has in-app ExecuTorch numbers: say whether the app and the runner are one runtime."""
    rows = app_executorch_rows(run_rows)
    if not rows:
        return []
    runner, runner_why = runner_runtime(rec.build_info)
    out = []
    for package in dict.fromkeys(r.model_file.replace(" (app)", "") for r in rows):
        app, app_why = app_runtime(run_settings, package)
        out.append(compare_runtimes(package, app, app_why, runner, runner_why))
    return out


def row_stale(section: PteReportSection, table: PteDeviceTable) -> str:
    """``stale`` for every line of a table whose record or device does not belong to the reported run."""
    return "stale" if section.stale or table.stale else ""


def summary_lines(section: PteReportSection) -> List[str]:
    """The notes printed (and shown on the page) with the ExecuTorch tables."""
    if not section.present:
        return [section.hint]
    out = [f"STALE: {reason} (run `invoke deploy --format torchscript,executorch`: both formats in one run)"
           for reason in section.stale]
    for t in section.devices:
        out.extend(f"STALE: {reason}" for reason in t.stale)
    out.extend(f"no ExecuTorch rows for device {s}: run `{command('invoke', 'deploy-executorch', '--serial', s)}`"
               for s in section.missing_devices)
    out.extend(f"deploy-executorch problem: {p}" for p in section.problems)
    out.extend(section.notes)
    return out
