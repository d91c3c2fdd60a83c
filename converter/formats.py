"""The formats torchdroid makes and runs, behind one interface: TorchScript (CPU and NNAPI models) and ExecuTorch
(``.pte`` programs).  A stage loops over the formats asked for (``<stage>.format``) and calls each one's part here,
with the settings ``workflow/stage_settings.per_format`` resolved for it (deploy: one plan, one run per device and
one result for every format); no stage branches on a format's name.

Nothing here imports torch: each part imports its module when it is called.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional


class Format:
    """One format: how to make it from a model, and how to check and time it on the host."""

    name = ""

    def convert(self, settings: Any) -> Any:
        """Make the format's files from the model (``invoke convert``); the result has a ``manifest_path``."""
        raise NotImplementedError

    def bench(self, settings: Any) -> Any:
        """Check and time the format's files on this machine (``invoke bench``)."""
        raise NotImplementedError

    def raise_for_failures(self, bench_result: Any) -> None:
        """After the tables are shown: a typed error when a file does not compute what its reference does."""

    def deploy_plan(self, s: Any, plan: Any) -> None:
        """Add what every phone gets to deploy's plan (deploy/plan.make_plan made the TorchScript format's part)."""

    def on_device(self, run: Any) -> None:
        """This format's steps of one device's deploy (a deploy/device_run.DeviceRun), under the directory's lock."""
        raise NotImplementedError

    def deploy_record(self, s: Any, plan: Any, result: Any, keeper: Any) -> None:
        """Record what every phone measured (``result.devices``) and put where it went on deploy's ``result``."""
        raise NotImplementedError

    def deploy_problem(self, result: Any) -> Optional[str]:
        """Why deploy ends with exit 7 (after its tables), or None."""
        return None


class TorchScript(Format):
    name = "torchscript"

    def convert(self, settings: Any) -> Any:
        from .pipeline import convert

        return convert(settings)

    def bench(self, settings: Any) -> Any:
        from .host_bench import run_host_bench

        return run_host_bench(settings)

    def on_device(self, run: Any) -> None:
        from deploy import device_run as d

        for step in (d.push, d.install, d.bench_binary, d.bench_app):  # the binary and models, the app
            run.go_on()
            step(run)

    def deploy_record(self, s: Any, plan: Any, result: Any, keeper: Any) -> None:
        from deploy.orchestrate import record_torchscript

        record_torchscript(s, plan, result, keeper)

    def deploy_problem(self, result: Any) -> Optional[str]:
        failed_rows = [r for r in result.rows if r.status == "failed"]
        if result.failed:
            return (f"{len(result.failed)} of {len(result.devices)} device(s) had problems (see above; the others "
                    "were deployed)")
        if failed_rows:
            return f"{len(failed_rows)} benchmark(s) failed (reasons in the table above; the results are recorded)"
        return None


class ExecuTorch(Format):
    name = "executorch"

    def convert(self, settings: Any) -> Any:
        from .executorch_lane import convert_executorch

        return convert_executorch(settings)

    def bench(self, settings: Any) -> Any:
        from .pte_host import run_pte_bench

        return run_pte_bench(settings)

    def raise_for_failures(self, bench_result: Any) -> None:
        bench_result.raise_for_failures()  # exit 8 naming the programs that differ from their reference

    def deploy_plan(self, s: Any, plan: Any) -> None:
        from deploy.executorch_bench import plan_executorch

        plan.executorch = plan_executorch(s)

    def on_device(self, run: Any) -> None:
        from deploy.executorch_bench import run_programs

        run_programs(run)

    def deploy_record(self, s: Any, plan: Any, result: Any, keeper: Any) -> None:
        from deploy.executorch_bench import record_executorch

        result.executorch = record_executorch(s, plan.executorch, result.devices)

    def deploy_problem(self, result: Any) -> Optional[str]:
        problems = result.executorch.problems
        return f"{len(problems)} problem(s), see above" if problems else None


FORMATS: Dict[str, Format] = {f.name: f for f in (TorchScript(), ExecuTorch())}


def chosen(names: Iterable[str]) -> List[Format]:
    """The formats asked for, in ``FORMATS``' order: TorchScript's deploy record first (ExecuTorch's joins it)."""
    return [f for name, f in FORMATS.items() if name in names]
