"""deploy-executorch against virtual devices over the real adb server, with a host-compiled stand-in executor_runner."""

import shutil

import pytest

from deploy.executorch import parse_iterations, runner_command
from tests.executorch_support.device import (build_standin_runner, deploy_executorch, latest_executorch,
                                             write_legacy_results, write_pte_models, write_runtime_build_info)
from tests.virtual_device.harness import adb_with_devices
from toolchain.errors import RecordError
from toolchain.fsutil import sha256_file

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")
DIR = "/data/local/tmp/torchdroid"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("et-deploy")
    runner = build_standin_runner(root / "standin")
    return write_pte_models(root / "models"), write_runtime_build_info(root / "build", runner)


PROJECT = "proj"
ET_DIR = f"{DIR}/{PROJECT}/executorch"  # each project's programs in its own directory on the phone


def deploy_pte(models, info, results, port, **kw):
    kw.setdefault("project", PROJECT)
    return deploy_executorch(models, info, results, port, warmup=2, iters=5, repeat=2, device_dir=DIR, timeout=60, **kw)


def test_runner_lines_and_command_are_quoted():
    out = "I x] Iteration 1 of 2: 3.5 ms\nI x] Iteration 2 of 2: 4.25 ms\nI x] Model executed successfully 2 time(s)"
    assert parse_iterations(out) == [3.5, 4.25]
    assert "--model_path='a b.pte'" in runner_command("/data/local/tmp/x y", "a b.pte", 7, 1)


def test_push_run_and_record(inputs, tmp_path):
    """The speed-ups over the run's own TorchScript CPU rows: tests/unit/test_format_lines.py."""
    models, info = inputs
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        write_legacy_results(tmp_path / "res", devs["a"].serial)  # an earlier run's: never joined any more
        result = deploy_pte(models, info, tmp_path / "res", server.port)
        d = devs["a"].path(ET_DIR)
        assert (d / "executor_runner").stat().st_mode & 0o777 == 0o755
        for name in ("mobilenetv2-fp32-xnnpack.pte", "mobilenetv2-int8-xnnpack.pte", "mobilenetv2-fp32-portable.pte"):
            assert sha256_file(d / name) == sha256_file(models / name)
        assert not (d / "mobilenetv2-fp32-vulkan.pte").exists()  # the runner has no Vulkan delegate
        assert not [p for p in d.iterdir() if "partial" in p.name]
        log = (devs["a"].state_dir / "device.log").read_text()
    # the programs alternate round by round (the order rotating), never one program's repeats back to back
    import re

    ran = re.findall(r"--model_path=mobilenetv2-([\w-]+)\.pte", log)
    assert ran == ["fp32-xnnpack", "int8-xnnpack", "fp32-portable", "int8-xnnpack", "fp32-portable", "fp32-xnnpack"]
    rows = {r.runtime: r for r in result.rows}
    assert not result.problems
    assert rows["ExecuTorch fp32-xnnpack"].samples == 10 and rows["ExecuTorch fp32-xnnpack"].median_ms > 0
    assert set(rows) == {"ExecuTorch fp32-xnnpack", "ExecuTorch int8-xnnpack", "ExecuTorch fp32-portable"}
    assert all(r.speedup_vs_cpu is None for r in result.rows)  # no TorchScript rows in this run: no baseline
    assert "fp32-xnnpack" in (tmp_path / "res" / "run-0001.csv").read_text()  # the run's rows, the programs' too
    assert latest_executorch(tmp_path / "res").rows == result.rows  # the run's document holds what deploy showed


def test_a_tampered_program_is_never_pushed(inputs, tmp_path):
    models, info = inputs
    private = tmp_path / "models"
    shutil.copytree(models, private)
    (private / "mobilenetv2-int8-xnnpack.pte").write_bytes(b"\0\0\0\0ET12 changed")
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        with pytest.raises(RecordError, match="does not match its manifest entry"):
            deploy_pte(private, info, tmp_path / "res", server.port)
        assert not devs["a"].path(ET_DIR).exists()


def test_a_failing_runner_is_a_failed_row_with_its_output(inputs, tmp_path):
    """A program the runner refuses (not a .pte) fails its row with the runner's message; the others still run."""
    models, info = inputs
    private = tmp_path / "models"
    shutil.copytree(models, private)
    import json

    from toolchain.fsutil import sha256_file as sha
    from tests.executorch_support.section import write_section
    from toolchain.records import load_section

    bad = private / "mobilenetv2-fp32-portable.pte"
    bad.write_bytes(b"not a program at all")
    section = load_section(private)
    for e in section["files"]:
        if e["file"] == bad.name:
            e.update(sha256=sha(bad), size=bad.stat().st_size)
    write_section(private, section)
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        result = deploy_pte(private, info, tmp_path / "res", server.port)
    rows = {r.runtime: r for r in result.rows}
    assert rows["ExecuTorch fp32-portable"].status == "failed" and "ET12" in rows["ExecuTorch fp32-portable"].note
    assert rows["ExecuTorch fp32-xnnpack"].status == "ok"
    assert any("fp32-portable" in p for p in result.problems)
    assert json.loads((tmp_path / "res" / "latest.json").read_text())["executorch"]["problems"]


def test_a_device_of_another_abi_is_reported_not_run(inputs, tmp_path):
    models, info = inputs
    props = {"ro.product.cpu.abi": "x86_64", "ro.product.cpu.abilist": "x86_64"}
    with adb_with_devices(tmp_path / "adb", {"x": {"props": props}}) as (server, devs):
        result = deploy_pte(models, info, tmp_path / "res", server.port)
        assert not devs["x"].path(ET_DIR).exists()
    assert result.rows == [] and "cannot run a arm64-v8a binary" in result.problems[0]


def test_cli_deploy_executorch_from_a_users_directory(inputs, tmp_path):
    import os
    from pathlib import Path

    from tests.cli import invoke

    models, info = inputs
    root = Path(__file__).resolve().parents[2]
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
        env.update(CI="1", ANDROID_ADB_SERVER_PORT=str(server.port))
        r = invoke(tmp_path, "--search-root", str(root), "deploy-executorch", "--models", str(models), "--build-info",
                   str(info), "--iter", "3", "--warmup", "1", "--repeat", "1", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ExecuTorch fp32-xnnpack" in r.stdout and (tmp_path / "build" / "results" / "latest.json").is_file()


def test_a_runner_that_no_longer_matches_its_build_info_never_runs(inputs, tmp_path):
    """Before: the replaced runner was pushed and run (exit 0); the legacy deploy refuses such a binary."""
    models, info = inputs
    build = tmp_path / "build"
    shutil.copytree(info.parent, build)
    runner = build / "executor_runner"
    runner.write_bytes(runner.read_bytes() + b"\0patched")
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        with pytest.raises(RecordError, match="no longer matches its build-info"):
            deploy_pte(models, build / "build-info.json", tmp_path / "res", server.port)
        assert not devs["a"].path(ET_DIR).exists()
        log = devs["a"].state_dir / "device.log"
        assert not log.exists() or "executor_runner" not in log.read_text()


def test_each_project_has_its_own_directory_on_the_phone(inputs, tmp_path):
    """Before: every project's programs went to <device_dir>/executorch, so two projects' programs of one name
    replaced each other and each measured the other's."""
    models, info = inputs
    other = tmp_path / "other-models"
    shutil.copytree(models, other)
    from toolchain.fsutil import sha256_file as sha
    from tests.executorch_support.section import write_section
    from toolchain.records import load_section

    changed = other / "mobilenetv2-fp32-xnnpack.pte"
    changed.write_bytes(changed.read_bytes()[:-16] + b"other project!!!")
    section = load_section(other)
    for e in section["files"]:
        if e["file"] == changed.name:
            e.update(sha256=sha(changed), size=changed.stat().st_size)
    write_section(other, section)
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        deploy_pte(models, info, tmp_path / "res1", server.port, project="one")
        deploy_pte(other, info, tmp_path / "res2", server.port, project="two")
        one, two = devs["a"].path(f"{DIR}/one/executorch"), devs["a"].path(f"{DIR}/two/executorch")
        assert sha256_file(one / changed.name) == sha256_file(models / changed.name)
        assert sha256_file(two / changed.name) == sha256_file(changed)


def test_a_project_directory_another_run_holds_is_refused(inputs, tmp_path):
    """The project's directory is locked (deploy/lock.py, the legacy deploy's lock): a run holding it is waited
    for by nobody and overwritten by nobody."""
    import time

    from deploy.lock import lock_path

    models, info = inputs
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        held = devs["a"].path(lock_path(f"{DIR}/{PROJECT}"))
        held.mkdir(parents=True)
        (held / "owner").write_text(f"4242 another-host {time.time():.0f} abcd\n")
        refused = deploy_pte(models, info, tmp_path / "res", server.port)
        assert refused.rows == [] and "busy: another torchdroid run" in refused.problems[0]
        assert not devs["a"].path(ET_DIR).exists() and held.is_dir()
        held.joinpath("owner").unlink()
        held.rmdir()
        deploy_pte(models, info, tmp_path / "res", server.port)
        assert (devs["a"].path(ET_DIR) / "executor_runner").is_file()
        assert not held.exists()  # released after the run


def test_results_of_every_device_and_run_are_kept(inputs, tmp_path):
    """Before: executorch-latest.json was the only record, so phone A's results were gone after deploying to B; now
    each run's rows are a run of the results store with its own document."""
    from deploy.results import DB_NAME, ResultStore

    models, info = inputs
    res = tmp_path / "res"
    with adb_with_devices(tmp_path / "adb", {"a": {}, "b": {}}) as (server, devs):
        a, b = devs["a"].serial, devs["b"].serial
        first = deploy_pte(models, info, res, server.port, serials=(a,))
        second = deploy_pte(models, info, res, server.port, serials=(b,))
    runs = [latest_executorch(res, run=n) for n in (1, 2)]
    assert [{r.serial for r in run.rows} for run in runs] == [{a}, {b}]
    assert [r.median_ms for r in runs[0].rows] == [r.median_ms for r in first.rows]
    assert [r.median_ms for r in runs[1].rows] == [r.median_ms for r in second.rows]
    assert (res / "run-0001.csv").read_text().count(a) == len(first.rows)
    assert {r.serial for r in ResultStore(res / DB_NAME).rows(0)} == {a, b}
    assert {r.serial for r in latest_executorch(res).rows} == {b}  # the newest run is where the report reads it
