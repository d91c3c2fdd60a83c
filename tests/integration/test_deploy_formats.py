"""`invoke deploy --format torchscript,executorch`: both formats in one command through deploy's one loop (issue 22
item 2), each format's record written, the ExecuTorch lines beside this run's TorchScript ones; a bad --format is a
usage error before any work.  Against virtual devices on a real adb server, through the CLI users run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import invoke
from tests.deploy_support.fixtures import make_inputs
from tests.deploy_support.fixtures import running_in as _running_in
from toolchain.fsutil import OWNER_MARKER
from tests.deploy_support.fixtures import wait_running
from tests.executorch_support.device import (build_standin_runner, latest_executorch, write_pte_models,
                                             write_runtime_build_info)
from tests.virtual_device.harness import adb_with_devices
from deploy.results import DB_NAME, ResultStore
from toolchain.records import DeployResults, deploy_results_path

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")
ROOT = Path(__file__).resolve().parents[2]
DIR = "/data/local/tmp/torchdroid"
PROJECT = "fmt"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, standin):
    """Legacy models and the stand-in speed_benchmark_torch, .pte programs beside them, the stand-in runner."""
    root = tmp_path_factory.mktemp("formats")
    inp = make_inputs(root / "ts", modes=("none",), standin=standin, model_size=20_000)
    write_pte_models(inp.models, variants=(("fp32", "xnnpack", 1 << 16),))  # the stand-in's slowest: ~1 ms a run
    runner = build_standin_runner(root / "standin")
    return inp, write_runtime_build_info(root / "et", runner)


def deploy(cwd: Path, inputs, *args: str, port: int) -> subprocess.CompletedProcess:
    inp, runner_info = inputs
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
    env.update(CI="1", ANDROID_ADB_SERVER_PORT=str(port), INVOKE_DEPLOY_NUMERICS="false",
               INVOKE_DEPLOY_HARDWARE="false")
    return invoke(cwd, "--search-root", str(ROOT), "deploy", "--models", str(inp.models), "--build-info",
                  str(inp.build_info), "--runner-build-info", str(runner_info), "--no-install", "--iter", "3",
                  "--warmup", "1", "--repeat", "1", "--project", PROJECT, *args, env=env)


def device_log(dev) -> str:
    """The shell commands the virtual device ran (none: no log)."""
    path = dev.state_dir / "device.log"
    return path.read_text() if path.is_file() else ""


def test_both_formats_run_in_one_command_on_each_device(inputs, tmp_path):
    """Before: `invoke deploy` had no --format; the ExecuTorch lines needed a second command."""
    with adb_with_devices(tmp_path / "adb", {"a": {}, "b": {}}) as (server, devs):
        r = deploy(tmp_path, inputs, "--format", "torchscript,executorch", port=server.port)
        logs = {name: device_log(d) for name, d in devs.items()}
        serials = {d.serial for d in devs.values()}
    assert r.returncode == 0, r.stdout + r.stderr
    results = tmp_path / "build" / "results"
    legacy = DeployResults.load(deploy_results_path(results, "latest"))
    assert {row.serial for row in legacy.rows if row.status == "ok"} == serials
    stored = ResultStore(results / DB_NAME).rows(legacy.run_id)  # one store, one run: both formats' rows
    assert {(row.format, row.serial) for row in stored if row.status == "ok"} == {
        (f, s) for f in ("torchscript", "executorch") for s in serials}
    assert sorted(map(str, stored)) == sorted(map(str, legacy.rows))
    et = latest_executorch(results)
    assert {row.serial for row in et.rows if row.runtime == "ExecuTorch fp32-xnnpack" and row.status == "ok"} == serials
    assert et.run_id == legacy.run_id  # the ExecuTorch lines beside this run's TorchScript ones
    assert any(row.runtime.startswith("TorchScript CPU") for row in et.rows), et.rows
    for name, text in logs.items():  # one loop: one probe (and lock) per device for both formats
        assert text.count("shell: getprop;") == 1, (name, text)  # one probe, which takes the lock
        assert text.count(f"shell: rm -rf {DIR}/.{PROJECT}.torchdroid-lock") == 1, (name, text)  # released once
        assert "./speed_benchmark_torch " in text and "./executor_runner " in text, name
    assert "per device: legacy and ExecuTorch" in r.stdout.replace("\n", " ")


def test_format_executorch_alone_keeps_its_rows_as_a_run_of_the_store(inputs, tmp_path):
    """Before: an ExecuTorch-only run wrote only executorch-run-NNNN.json, never the results store: its rows were
    not journaled, and a crash after a program was measured lost it (issue 34 item 3)."""
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        r = deploy(tmp_path, inputs, "--format", "executorch", port=server.port)
        log = device_log(devs["a"])
    assert r.returncode == 0, r.stdout + r.stderr
    results = tmp_path / "build" / "results"
    assert "./speed_benchmark_torch " not in log and "./executor_runner " in log
    assert [row.status for row in latest_executorch(results).rows] == ["ok"]
    assert not list(results.glob("executorch-*"))  # no second record: the run's document holds it all
    doc = DeployResults.load(deploy_results_path(results, "latest"))
    assert [(row.format, row.variant, row.backend, row.status) for row in doc.rows] == [
        ("executorch", "fp32-xnnpack", "xnnpack", "ok")]
    stored = ResultStore(results / DB_NAME).rows(doc.run_id)
    assert [(row.format, row.model_file) for row in stored] == [("executorch", doc.rows[0].model_file)]
    assert not list(results.glob("journal-run-*"))  # every row stored: the journal is gone


def test_the_default_is_torchscript_only(inputs, tmp_path):
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        r = deploy(tmp_path, inputs, port=server.port)
        log = device_log(devs["a"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "./executor_runner " not in log and "./speed_benchmark_torch " in log
    assert deploy_results_path(tmp_path / "build" / "results", "latest").is_file()
    assert not list((tmp_path / "build" / "results").glob("executorch-*"))


@pytest.mark.parametrize("value", ["onnx", "torchscript,tflite"])
def test_a_bad_format_is_a_usage_error_before_any_work(inputs, tmp_path, value):
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        r = deploy(tmp_path, inputs, "--format", value, port=server.port)
        touched = devs["a"].path(f"{DIR}/{PROJECT}").exists()
        log = device_log(devs["a"])
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert "--format" in out and "torchscript" in out and "executorch" in out, out
    assert not touched and "shell:" not in log, log
    assert not (tmp_path / "build" / "results").exists()


@pytest.mark.parametrize("task, program, where", [
    (("deploy-executorch",), b"executor_runner", f"{DIR}/{PROJECT}/executorch"),
    (("deploy", "--format", "executorch"), b"executor_runner", f"{DIR}/{PROJECT}/executorch"),
    (("deploy",), b"speed_benchmark_torch", f"{DIR}/{PROJECT}"),
])
def test_ctrl_c_while_a_benchmark_runs_stops_it_and_leaves_no_record(inputs, tmp_path, task, program, where):
    """Before: Ctrl-C left executor_runner running on the phone (deploy waited for it to end), then wrote an
    ExecuTorch record without the interrupted device's lines and printed more than the one line."""
    import signal
    import time

    inp, runner_info = inputs
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
    with adb_with_devices(tmp_path / "adb", {"a": {"env": {"SBT_HOLD_MS": "100000"}}}) as (server, devs):
        env.update(CI="1", ANDROID_ADB_SERVER_PORT=str(server.port), INVOKE_DEPLOY_NUMERICS="false",
                   INVOKE_DEPLOY_HARDWARE="false", INVOKE_DEPLOY_RUNNER_BUILD_INFO=str(runner_info),
                   INVOKE_DEPLOY_BUILD_INFO=str(inp.build_info), INVOKE_DEPLOY_INSTALL="false")
        argv = [sys.executable, "-m", "invoke", "--search-root", str(ROOT), *task, "--models", str(inp.models),
                "--iter", "1000000", "--warmup", "0", "--repeat", "1", "--project", PROJECT]
        # a real process of its own: the test sends it SIGINT while it runs (tests/cli.py cannot)
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sandbox = devs["a"].path(where)
        try:
            wait_running(proc, devs["a"], where, program)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
            time.sleep(0.3)
            left = _running_in(sandbox, program)
        finally:  # whatever failed: nothing of this test keeps running on the shared machine
            if proc.poll() is None:
                proc.kill()
                print(proc.communicate())
            for pid in _running_in(sandbox, program):
                os.kill(pid, signal.SIGKILL)
    assert not left, f"{program.decode()} still running on the phone after Ctrl-C: {left}"
    assert proc.returncode == 130, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    after = lines[next(i for i, line in enumerate(lines) if "interrupted: stopping" in line):]
    said = [line for line in after if not line.startswith("[")]  # besides each device's own status line: one line
    assert len(said) == 1 and said[0].startswith(f"torchdroid {task[0]}: interrupted"), err
    results = tmp_path / "build" / "results"
    kept = sorted(p.name for p in results.iterdir()) if results.is_dir() else []
    assert not [k for k in kept if k.startswith(("executorch-", "run-", "latest"))], kept
    hidden = [p for p in results.rglob(".*") if p.name != OWNER_MARKER]  # the ownership marker is torchdroid's own
    assert not list(results.rglob("*.etdump")) and not list(results.rglob("*.tmp*")) and not hidden
    if (results / "results.sqlite").exists():  # no empty run in the history (`invoke report` reads the latest)
        import sqlite3

        con = sqlite3.connect(results / "results.sqlite")
        assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
        con.close()
    print(err)


def _next_lines(text: str) -> list:
    return [line for line in text.splitlines() if line.startswith("next:")]


@pytest.mark.parametrize("task", [("deploy-executorch",), ("deploy", "--format", "executorch")])
def test_what_to_run_next_after_the_executorch_format_names_a_command_that_does_it(inputs, tmp_path, task):
    """Before: "next: invoke report" after a run without a legacy run (report then refuses: no results database),
    and "deploy again with `invoke deploy --serial S`" for a device on a server that was down (that command deploys
    the TorchScript format, not the programs)."""
    from tests.virtual_device.harness import adb_servers_with_devices

    inp, runner_info = inputs
    with adb_servers_with_devices(tmp_path / "adb", {"up": {"a": {}}}, down=["gone"]) as (servers, devs, down):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
        env.update(CI="1", INVOKE_DEPLOY_NUMERICS="false")
        base = ["--search-root", str(ROOT), *task, "--models", str(inp.models), "--iter", "2", "--warmup", "0",
                "--repeat", "1", "--project", PROJECT, "--adb-server", f"127.0.0.1:{servers['up'].port}"]
        base += ["--build-info" if task[0] == "deploy-executorch" else "--runner-build-info", str(runner_info)]
        first = invoke(tmp_path, *base, env=env)
        gone = invoke(tmp_path, *base, "--adb-server", f"127.0.0.1:{down['gone']}", "--serial",
                      f"{devs['a'].serial},elsewhere-1", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    said = _next_lines(first.stdout)
    assert len(said) == 1 and "invoke deploy --format torchscript,executorch" in said[0], first.stdout
    report = invoke(tmp_path, "--search-root", str(ROOT), "report", "--run", "1", env=env)
    out = " ".join(report.stdout.split())
    # the run's own rows, without a baseline: "next" named the command that measures both in one run
    assert report.returncode == 0 and "ExecuTorch fp32-xnnpack" in out, report.stdout + report.stderr
    assert gone.returncode == 7, gone.stdout + gone.stderr
    want = "invoke " + " ".join(task)
    hint = [line for line in (gone.stdout + gone.stderr).splitlines() if "deploy again with" in line]
    assert hint and all(f"`{want} --serial elsewhere-1`" in line for line in hint), gone.stdout + gone.stderr


def test_both_formats_print_one_next_line(inputs, tmp_path):
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        r = deploy(tmp_path, inputs, "--format", "torchscript,executorch", port=server.port)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _next_lines(r.stdout) == ["next: invoke report  (the chart and an HTML page of this run, with the "
                                     "ExecuTorch lines beside it)"], r.stdout
