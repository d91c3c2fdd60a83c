"""Real deploys onto virtual devices, from a user's directory with the defaults: TorchScript alone, then both formats
in one run, then TorchScript alone again, kept after each so report tests can read each (`invoke report` writes
into the results directory it reads)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.deploy_support.fixtures import invoke_cli, make_inputs
from tests.executorch_support.device import build_standin_runner, write_pte_models, write_runtime_build_info
from tests.virtual_device.harness import adb_with_devices

DEVICES = {
    "pixel": {"props": {"ro.product.model": "Pixel 3a"}, "env": {"SBT_CPU_US": "30000", "SBT_NNAPI_US": "12000"}},
    "galaxy": {"props": {"ro.product.model": "Galaxy S10", "ro.build.version.sdk": "29",
                         "ro.build.version.release": "10"}},
}


@dataclass
class ReportChain:
    work: Path  # the user's directory: build/models, build/results, build/android/... relative to it
    legacy_only: Path  # results after deploy (run 1) alone: no ExecuTorch rows
    fresh: Path  # ... then deploy --format torchscript,executorch (run 2): both formats' rows in one run
    older: Path  # ... then another deploy (run 3): the latest run has no ExecuTorch rows, run 2 still has
    serials: dict  # name -> serial


def _ok(r) -> None:
    assert r.returncode == 0, r.stdout + r.stderr


def run_chain(root: Path, standin: Path) -> ReportChain:
    work = root / "work"
    inp = make_inputs(work / "build", standin=standin)  # models in work/build/models: convert.out's default
    write_pte_models(inp.models)  # the .pte programs in the same manifest, as `convert --format torchscript,executorch`
    write_runtime_build_info(work / "build", build_standin_runner(root / "runner"))  # the default executorch build-info
    results = work / "build" / "results"
    legacy = ("deploy", "--build-info", str(inp.build_info), "--no-install", "--iter", "6", "--warmup", "1",
              "--repeat", "1")
    with adb_with_devices(root / "adb", DEVICES) as (server, devs):
        _ok(invoke_cli(work, *legacy, port=server.port))
        legacy_only = shutil.copytree(results, root / "legacy-only")
        _ok(invoke_cli(work, *legacy, "--format", "torchscript,executorch", port=server.port))
        fresh = shutil.copytree(results, root / "fresh")
        _ok(invoke_cli(work, *legacy, port=server.port))
        older = shutil.copytree(results, root / "older")
        serials = {name: d.serial for name, d in devs.items()}
    return ReportChain(work, legacy_only, fresh, older, serials)
