"""Deploy's half of the format protocol: each format (TorchScript CPU/NNAPI models, ExecuTorch ``.pte`` programs)
says what every phone gets (``plan``), what it does on one phone under the project directory's lock
(``on_device``), how it records what the phones measured (``record``) and why deploy ends with exit 7
(``problem``).  deploy/orchestrate.py loops over the formats asked for (``deploy.format``) in ``DEPLOY_FORMATS``'
order.  Every format's rows are the run's rows: journaled as each is measured and stored device by device (the
Keeper); a format's ``record`` gathers what is its own, then the run's CSV/JSON hold it all (:func:`keep_run`).

Here and not on ``converter.formats.Format``: deploy owns its steps, and the imports point one way
(orchestrate -> formats -> device_run, executorch; nothing of deploy imports converter.formats).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from toolchain.hardware_records import Placement
from toolchain.numerics_records import NumericsVerdict

from . import device_run as _device
from . import executorch as _et
from .keeper import WRITE_ERRORS
from .plan import DeployPlan, DeploySettings, make_plan
from .results import export


class DeployFormat:
    """One format's part of ``invoke deploy``."""

    name = ""

    def plan(self, s: DeploySettings, plan: DeployPlan) -> None:
        """Add what every phone gets to the run's plan (before any device work)."""
        raise NotImplementedError

    def on_device(self, run: _device.DeviceRun) -> None:
        """This format's steps on one phone, under the project directory's lock."""
        raise NotImplementedError

    def record(self, s: DeploySettings, plan: DeployPlan, result: Any, keeper: Any) -> None:
        """Gather what is this format's own besides the run's rows (stored already) on ``result`` (before the run's
        document is written)."""

    def problem(self, result: Any) -> Optional[str]:
        """Why deploy ends with exit 7 (after its tables), or None."""
        return None


class TorchScriptDeploy(DeployFormat):
    """The benchmark binary, the CPU and NNAPI models and the app."""

    name = "torchscript"

    def plan(self, s: DeploySettings, plan: DeployPlan) -> None:
        ts = make_plan(s)
        plan.binary, plan.models, plan.app, plan.references = ts.binary, ts.models, ts.app, ts.references
        plan.warnings += ts.warnings

    def on_device(self, run: _device.DeviceRun) -> None:
        for step in (_device.push, _device.install, _device.bench_binary, _device.bench_app):
            run.go_on()
            step(run)

    def problem(self, result: Any) -> Optional[str]:
        failed_rows = [r for r in result.rows if r.status == "failed" and r.format == self.name]
        if result.failed:
            return (f"{len(result.failed)} of {len(result.devices)} device(s) had problems (see above; the others "
                    "were deployed)")
        if failed_rows:
            return f"{len(failed_rows)} benchmark(s) failed (reasons in the table above; the results are recorded)"
        return None


class ExecutorchDeploy(DeployFormat):
    """executor_runner and the ``.pte`` programs (deploy/executorch.py)."""

    name = "executorch"

    def plan(self, s: DeploySettings, plan: DeployPlan) -> None:
        plan.executorch = _et.plan_executorch(s)

    def on_device(self, run: _device.DeviceRun) -> None:
        _et.run_programs(run)

    def record(self, s: DeploySettings, plan: DeployPlan, result: Any, keeper: Any) -> None:
        result.executorch = _et.record_executorch(s, plan.executorch, result.devices)

    def problem(self, result: Any) -> Optional[str]:
        problems = result.executorch.problems if result.executorch is not None else []
        return f"{len(problems)} problem(s), see above" if problems else None


DEPLOY_FORMATS: Dict[str, DeployFormat] = {f.name: f for f in (TorchScriptDeploy(), ExecutorchDeploy())}


def chosen(names: Iterable[str]) -> List[DeployFormat]:
    """The formats asked for, in ``DEPLOY_FORMATS``' order."""
    return [f for name, f in DEPLOY_FORMATS.items() if name in names]


def keep_run(s: DeploySettings, plan: DeployPlan, result: Any, keeper: Any) -> None:
    """Every row (ok, failed, skipped; every format's) is stored already, device by device (``Keeper``); here the
    rest: the run's and the latest CSV/JSON (the JSON with the numerics verdicts and NNAPI placements)."""
    reports, rows, results = result.devices, result.rows, Path(s.results)
    devices = [rep.conditions.to_dict() for rep in reports if rep.conditions is not None]
    result.run_id, result.db_path = keeper.run_id, keeper.store.path
    checks = (run_numerics(reports, plan), run_hardware(reports, plan if s.hardware and s.bench else None),
              result.executorch.facts if result.executorch is not None else {})
    try:
        result.exports = export(rows, results, keeper.stem, devices, *checks)
        result.exports.update({f"latest_{k}": v for k, v in export(rows, results, "latest", devices, *checks).items()})
    except WRITE_ERRORS as e:  # a full disk: the rows into the store still, then say where they are
        keeper.exported = False
        keeper.finish()
        raise keeper.not_exported(e) from e
    keeper.finish()


def run_numerics(reports: List[Any], plan: DeployPlan) -> List[NumericsVerdict]:
    """Every phone's numerics verdicts (an empty list when none ran); a device that failed before its models ran
    gets "unknown" for each of them, with its failure."""
    verdicts = []
    for rep in reports:
        verdicts += rep.numerics
        if not rep.numerics and rep.errors and plan.references is not None:
            verdicts += [NumericsVerdict(rep.serial, m.file, m.backend, m.mode, "unknown",
                                         reason=f"the device failed: {rep.errors[0].splitlines()[0]}")
                         for m in plan.models]
    return verdicts


def run_hardware(reports: List[Any], plan: Optional[DeployPlan]) -> Optional[List[Placement]]:
    """Every phone's NNAPI placements; an NNAPI model a device did not run (the device failed, or skipped NNAPI) is
    "unknown" with the reason.  None when not asked for."""
    if plan is None or plan.binary is None:
        return None
    placements = []
    for rep in reports:
        placements += rep.hardware
        seen = {p.file for p in rep.hardware}
        for m in plan.models:
            if m.backend == "nnapi" and m.file not in seen:
                why = next((r.reason for r in rep.rows if r.model_file == m.file and r.reason), "") or (
                    rep.errors[0].splitlines()[0] if rep.errors else "the model was not run on this device")
                placements.append(Placement(rep.serial, m.file, m.mode, "unknown", reason=f"not run: {why}"))
    return placements
