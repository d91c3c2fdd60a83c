"""The report's ExecuTorch section: the reported run's ExecuTorch rows beside its TorchScript CPU and NNAPI rows.

A deploy run with the ExecuTorch format keeps each program's row in the run (the results store, ``format =
executorch``) like every TorchScript row.  Per device the section lines up the run's TorchScript CPU and NNAPI rows
(quant_none, quant_full) and its programs, each with its speed-up over the CPU model of the same precision of the same
run; the run's document (``DeployResults.executorch``) adds what is not a row: the per-operator tables, the
problems and notes of the run, the runner's build-info.

When the reported run has in-app numbers of an ExecuTorch program's app, it also says whether the app
(org.pytorch:executorch-android at the app-info's version) and executor_runner (the build-info's ExecuTorch) are the
same runtime, different ones, or not known to be the same (docs/facts.md EA8).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import TorchdroidError, command
from toolchain.pte_results import PteResultRow, add_speedups
from toolchain.records import AppInfo, BuildInfo

from .executorch_bench import device_lines
from .results import ResultRow

HINT = ("no ExecuTorch rows in run {run}: run `invoke convert --format torchscript,executorch`, `invoke build-android "
        "--lane executorch` and `invoke deploy --format torchscript,executorch` (`invoke deploy-executorch`: the "
        "programs alone) for ExecuTorch XNNPACK beside TorchScript CPU and NNAPI in one run")
EARLIER_RECORD = "executorch-latest.json"  # what an earlier torchdroid's deploy-executorch wrote
EARLIER = ("{path} holds ExecuTorch lines an earlier torchdroid joined to another run: not drawn (each run now holds "
           "its own); run `invoke deploy --format torchscript,executorch` for both formats in one run")


@dataclass
class PteDeviceTable:
    """One device's TorchScript and ExecuTorch lines of the run."""

    serial: str
    title: str
    rows: List[PteResultRow]
    operators: List[Dict[str, Any]] = field(default_factory=list)  # per program: the phone's ETDump table or unknown


@dataclass
class PteReportSection:
    run_id: int
    present: bool  # the run has ExecuTorch rows
    path: Optional[Path] = None  # the run's document (None: it cannot be read; the rows are still drawn)
    devices: List[PteDeviceTable] = field(default_factory=list)
    missing_devices: List[str] = field(default_factory=list)  # devices of the run without ExecuTorch rows
    problems: List[str] = field(default_factory=list)  # what the run's ExecuTorch format reported
    notes: List[str] = field(default_factory=list)  # what every comparison must say (unoptimised CPU baselines...)
    hint: str = ""


def _title(serial: str, run_rows: Sequence[ResultRow]) -> str:
    r = next((r for r in run_rows if r.serial == serial and r.device_model), None)
    return f"{serial}: {r.device_model}, Android {r.release} (SDK {r.sdk})" if r else serial


def _hint(results_dir: Path, run_id: int) -> str:
    earlier = Path(results_dir) / EARLIER_RECORD
    return HINT.format(run=run_id) + ("; " + EARLIER.format(path=earlier) if earlier.is_file() else "")


def build_section(results_dir: Path, run_rows: Sequence[ResultRow], run_settings: Dict[str, Any],
                  facts: Dict[str, Any], path: Optional[Path] = None) -> PteReportSection:
    """The section of the run whose rows (every format's) are ``run_rows``, ``facts`` from its document at ``path``
    ({}: none); a run without ExecuTorch rows: the hint."""
    run_id = run_rows[0].run_id
    programs = [r for r in run_rows if r.format == "executorch"]
    if not programs:
        return PteReportSection(run_id, False, hint=_hint(results_dir, run_id))
    section = PteReportSection(run_id, True, path if facts else None, _devices(run_rows, programs, facts),
                               problems=list(facts.get("problems") or []), notes=list(facts.get("notes") or []))
    section.missing_devices = sorted({r.serial for r in run_rows if r.source != "deploy"} - {r.serial for r in programs})
    if facts.get("build_info"):
        section.notes.extend(runtime_notes(str(facts["build_info"]), run_rows, run_settings))
    return section


def _devices(run_rows: Sequence[ResultRow], programs: Sequence[ResultRow], facts: Dict[str, Any]
             ) -> List[PteDeviceTable]:
    """Per device with programs: its lines with their speed-ups, and its per-operator tables when the run has them."""
    stems = sorted({r.stem for r in programs})
    operators = list(facts.get("operators") or [])
    out = []
    for serial in dict.fromkeys(r.serial for r in programs):
        lines = device_lines([r for r in run_rows if r.serial == serial], stems)
        add_speedups(lines)
        out.append(PteDeviceTable(serial, _title(serial, run_rows), lines,
                                  [o for o in operators if o.get("serial") == serial]))
    return out


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


def runtime_notes(build_info: str, run_rows: Sequence[ResultRow], run_settings: Dict[str, Any]) -> List[str]:
    """When the reported run has in-app ExecuTorch numbers: say whether the app and the runner are one runtime."""
    rows = app_executorch_rows(run_rows)
    if not rows:
        return []
    runner, runner_why = runner_runtime(build_info)
    out = []
    for package in dict.fromkeys(r.model_file.replace(" (app)", "") for r in rows):
        app, app_why = app_runtime(run_settings, package)
        out.append(compare_runtimes(package, app, app_why, runner, runner_why))
    return out


def summary_lines(section: PteReportSection) -> List[str]:
    """The notes printed (and shown on the page) with the ExecuTorch tables."""
    if not section.present:
        return [section.hint]
    out = [f"no ExecuTorch rows for device {s} in run {section.run_id}: run "
           f"`{command('invoke', 'deploy', '--format', 'torchscript,executorch', '--serial', s)}`"
           for s in section.missing_devices]
    out.extend(f"ExecuTorch problem: {p}" for p in section.problems)
    out.extend(section.notes)
    return out
