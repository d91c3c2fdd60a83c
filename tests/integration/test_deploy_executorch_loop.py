"""`invoke deploy-executorch` is one more format in deploy's one loop (issue 22 item 2): the same device selection
(comma-separated --serial, ANDROID_SERIAL, deploy.servers, every adb server), the same device lock, the same
statistics and defaults as `invoke deploy`.  Against virtual devices on real adb servers, through the CLI users run."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli import invoke
from tests.executorch_support.device import (build_standin_runner, latest_executorch, write_pte_models,
                                             write_runtime_build_info)
from tests.virtual_device.harness import adb_servers_with_devices, adb_with_devices
from tests.virtual_device.harness import held_dead_port

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")
ROOT = Path(__file__).resolve().parents[2]
DIR = "/data/local/tmp/torchdroid"
PROJECT = "proj"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("et-loop")
    runner = build_standin_runner(root / "standin")
    models = write_pte_models(root / "models", variants=(("fp32", "xnnpack", 6000), ("fp32", "portable", 6000)))
    return models, write_runtime_build_info(root / "build", runner)


def deploy_executorch(cwd: Path, inputs, *args: str, port: int, env=None) -> subprocess.CompletedProcess:
    models, info = inputs
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
    clean.update(CI="1", ANDROID_ADB_SERVER_PORT=str(port), INVOKE_DEPLOY_NUMERICS="false", **(env or {}))
    return invoke(cwd, "--search-root", str(ROOT), "deploy-executorch", "--models", str(models), "--build-info",
                  str(info), "--iter", "3", "--warmup", "1", "--repeat", "1", "--project", PROJECT, *args, env=clean)


def executorch_serials(cwd: Path) -> set:
    return {r.serial for r in latest_executorch(cwd / "build" / "results").rows if r.status == "ok"}


def test_serials_separated_by_commas_are_each_deployed(inputs, tmp_path):
    """Before: `--serial A,B` was one serial "A,B" that no adb server knows."""
    with adb_with_devices(tmp_path / "adb", {"a": {}, "b": {}, "c": {}}) as (server, devs):
        a, b = devs["a"].serial, devs["b"].serial
        r = deploy_executorch(tmp_path, inputs, "--serial", f"{a},{b}", port=server.port)
        assert not devs["c"].path(f"{DIR}/{PROJECT}").exists()
    assert r.returncode == 0, r.stdout + r.stderr
    assert executorch_serials(tmp_path) == {a, b}


def test_android_serial_picks_the_device(inputs, tmp_path):
    """Before: ANDROID_SERIAL was ignored and every connected device was deployed."""
    with adb_with_devices(tmp_path / "adb", {"a": {}, "b": {}}) as (server, devs):
        b = devs["b"].serial
        r = deploy_executorch(tmp_path, inputs, port=server.port, env={"ANDROID_SERIAL": b})
        assert not devs["a"].path(f"{DIR}/{PROJECT}").exists()
    assert r.returncode == 0, r.stdout + r.stderr
    assert executorch_serials(tmp_path) == {b}


def test_every_adb_server_of_deploy_servers_is_deployed(inputs, tmp_path):
    """Before: only the first adb server was asked for devices; deploy.servers was ignored."""
    layout = {"left": {"l1": {}}, "right": {"r1": {}}}
    with adb_servers_with_devices(tmp_path / "adb", layout) as (servers, devs, _down):
        (tmp_path / "lab.yaml").write_text("deploy:\n  servers: ['127.0.0.1:%d', '127.0.0.1:%d']\n"
                                           % (servers["left"].port, servers["right"].port))
        models, info = inputs
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
        clean.update(CI="1", ANDROID_ADB_SERVER_PORT=str(held_dead_port()), INVOKE_DEPLOY_NUMERICS="false")  # the servers given win
        r = invoke(tmp_path, "--search-root", str(ROOT), "-f", "lab.yaml", "deploy-executorch", "--models",
                   str(models), "--build-info", str(info), "--iter", "2", "--warmup", "0", "--repeat", "1", env=clean)
        want = {devs["l1"].serial, devs["r1"].serial}
    assert r.returncode == 0, r.stdout + r.stderr
    assert executorch_serials(tmp_path) == want


def test_a_device_another_run_holds_fails_alone_like_invoke_deploy(inputs, tmp_path):
    """Before: a held device stopped the whole run (DeviceBusy) and the free device was not deployed; `invoke
    deploy` records the busy device as failed with the reason, deploys the others and exits 7."""
    from deploy.lock import lock_path

    holder = subprocess.Popen(["sleep", "120"])
    try:
        with adb_with_devices(tmp_path / "adb", {"busy": {}, "free": {}}) as (server, devs):
            held = devs["busy"].path(lock_path(f"{DIR}/{PROJECT}"))
            held.mkdir(parents=True)
            (held / "owner").write_text(f"{holder.pid} {os.uname().nodename.split('.')[0]} {time.time():.0f} x\n")
            r = deploy_executorch(tmp_path, inputs, port=server.port)
            assert held.is_dir() and not devs["busy"].path(f"{DIR}/{PROJECT}/executorch").exists()
            busy, free = devs["busy"].serial, devs["free"].serial
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 7, r.stdout + r.stderr
    assert "busy: another torchdroid run" in r.stdout + r.stderr
    rec = latest_executorch(tmp_path / "build" / "results")
    assert {row.serial for row in rec.rows if row.status == "ok"} == {free}
    assert any(p.startswith(busy) and "busy" in p for p in rec.problems), rec.problems


def test_a_run_that_names_no_counts_runs_the_schemas(inputs, tmp_path):
    """Before: the ExecuTorch settings restated the defaults (50 iterations where the schema says 200)."""
    from deploy import DeploySettings, deploy
    from toolchain.settings import default

    models, info = inputs
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        result = deploy(DeploySettings(models=models, results=tmp_path / "res", formats=("executorch",),
                                       runner_build_info=info, adb_port=server.port, project=PROJECT,
                                       numerics=False), on_status=lambda *_: None)
        log = (devs["a"].state_dir / "device.log").read_text()
    want = default("deploy.warmup") + default("deploy.iter")
    assert log.count(f"--num_executions={want} ") == default("deploy.repeat") * 2
    rec = result.executorch
    assert (rec.facts["warmup"], rec.facts["iters"], rec.facts["repeat"]) == (default("deploy.warmup"), default("deploy.iter"),
                                                   default("deploy.repeat"))
    row = next(r for r in rec.rows if r.runtime == "ExecuTorch fp32-xnnpack")
    assert row.samples == default("deploy.iter") * default("deploy.repeat")
    assert row.p90_ms >= row.median_ms >= row.min_ms > 0
