"""Where the time went on the phone (issue 23 item 3): a runner built with ExecuTorch's event tracer writes an
ETDump on a virtual device, deploy-executorch pulls it and ExecuTorch's Inspector makes the per-operator table
with the ETRecord convert wrote; a runner built without it says "unknown" and why.

The stand-in runner compiled as EXECUTORCH_ENABLE_EVENT_TRACER=ON would build it (ET_EVENT_TRACER_ENABLED,
docs/facts.md EB1-EB4) runs the real tiny .pte programs with the installed ExecuTorch runtime for its ETDump.
"""

import shutil
import subprocess

import pytest

from deploy.executorch import runner_command
from tests.executorch_support.device import build_standin_runner, deploy_executorch, write_runtime_build_info
from tests.executorch_support.lane import copy_models
from tests.virtual_device.harness import adb_with_devices
from tests.executorch_support.device import latest_executorch

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")
DIR = "/data/local/tmp/torchdroid"


@pytest.fixture(scope="module")
def runners(tmp_path_factory):
    root = tmp_path_factory.mktemp("et-runners")
    return {"tracer": build_standin_runner(root / "tracer", event_tracer=True),
            "plain": build_standin_runner(root / "plain")}


def deploy_pte(models, info, results, port):
    return deploy_executorch(models, info, results, port, warmup=1, iters=2, repeat=1, device_dir=DIR, project="proj", timeout=120)


@pytest.mark.slow
def test_a_phone_with_an_event_tracer_runner_gives_per_operator_times(tiny_lane, runners, tmp_path):
    models = copy_models(tiny_lane[0], tmp_path / "models")
    info = write_runtime_build_info(tmp_path / "build", runners["tracer"], event_tracer=True)
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        result = deploy_pte(models, info, tmp_path / "res", server.port)
        serial = devs["a"].serial
        left = [p.name for p in devs["a"].path(DIR + "/proj/executorch").iterdir() if p.name.endswith(".etdump")]
    assert not result.problems, result.problems
    ops = {o["file"]: o for o in latest_executorch(tmp_path / "res").operators_of(serial)}
    assert set(ops) == {"tiny-fp32-xnnpack.pte", "tiny-int8-xnnpack.pte", "tiny-fp32-portable.pte"}
    assert all(o["status"] == "ok" for o in ops.values()), ops
    portable = ops["tiny-fp32-portable.pte"]
    assert portable["rows"][0]["name"] == "native_call_convolution.out"  # the conv dominates the tiny model
    assert portable["rows"][0]["aot_ops"] == ["aten.convolution.default"] and portable["etrecord"] is True
    assert portable["runs"] == 2 and portable["skipped_runs"] == 1  # 1 warm-up + 2 timed executions, warm-up dropped
    assert 0 < portable["rows"][0]["median_ms"] <= portable["total_ms"] and not portable["delegates"]
    xnn = ops["tiny-fp32-xnnpack.pte"]
    assert [d["backend"] for d in xnn["delegates"]] == ["XnnpackBackend"]
    assert "aten.convolution.default" in xnn["delegates"][0]["aot_ops"]
    assert any(r["kind"] == "in delegate" for r in xnn["rows"])  # XNNPACK profiles its own operators
    assert (tmp_path / "res" / "etdump" / serial / "tiny-fp32-portable.etdump").read_bytes()  # kept beside the results
    assert not left  # read back and removed from the phone
    # the report page's section: the same table, from the record
    from deploy.report_html import operator_section

    html = operator_section(serial, latest_executorch(tmp_path / "res").operators_of(serial))
    assert f"id='operators-{serial}'" in html and "native_call_convolution.out" in html and "XnnpackBackend" in html


def test_a_runner_built_without_the_tracer_says_unknown_and_why(tiny_lane, runners, tmp_path):
    models = copy_models(tiny_lane[0], tmp_path / "models")
    info = write_runtime_build_info(tmp_path / "build", runners["plain"], event_tracer=False)
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        result = deploy_pte(models, info, tmp_path / "res", server.port)
    assert not result.problems and all(r.status == "ok" for r in result.rows)
    ops = result.facts["operators"]
    assert ops and all(o["status"] == "unknown" and "without ExecuTorch's event tracer" in o["reason"] for o in ops)


def test_the_fixture_runner_refuses_etdump_path_unless_built_with_the_tracer(tiny_lane, runners, tmp_path):
    """EB4: --etdump_path exists only under ET_EVENT_TRACER_ENABLED; gflags refuses an unknown flag."""
    program = tiny_lane[0] / "tiny-fp32-portable.pte"
    cmd = runner_command(str(tmp_path), str(program), 1, 1, etdump="x.etdump").replace("./executor_runner", "{}")
    plain = subprocess.run(["/bin/sh", "-c", cmd.format(runners["plain"])], capture_output=True, text=True)
    assert plain.returncode == 1 and "unknown command line flag" in plain.stdout
    assert not (tmp_path / "x.etdump").exists()
    from tests.warm_python import python_env

    traced = subprocess.run(["/bin/sh", "-c", cmd.format(runners["tracer"])], capture_output=True, text=True,
                            env={**python_env(), "PATH": "/usr/bin:/bin"})
    assert traced.returncode == 0, traced.stdout
    from executorch.devtools import Inspector

    assert [b.name for b in Inspector(etdump_path=str(tmp_path / "x.etdump")).event_blocks][-1].startswith("Execute")


def _runner_runs(log: str) -> list:
    """(runner, command) of every executor_runner run the virtual device's shell ran."""
    import re

    return [(m.group(1), line) for line in log.splitlines() for m in [re.search(r"\./(executor_runner\w*) ", line)]
            if m]


def _etdumps(dev) -> list:
    return sorted(str(p.relative_to(dev.root)) for p in dev.root.rglob("*.etdump"))


@pytest.mark.slow
def test_the_timing_rounds_run_the_untraced_runner_and_leave_no_model_etdump(tiny_lane, runners, tmp_path):
    """Issue 32 item 2: build-android records an untraced executor_runner and executor_runner_traced; the timing
    rounds and output checks run the untraced one, the per-operator table one more run of the traced one, whose
    ETDump is pulled (adb's sync pull) and removed: no model.etdump is left on the phone."""
    models = copy_models(tiny_lane[0], tmp_path / "models")
    info = write_runtime_build_info(tmp_path / "build", runners["plain"], traced=runners["tracer"])
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        result = deploy_pte(models, info, tmp_path / "res", server.port)
        runs = _runner_runs((devs["a"].state_dir / "device.log").read_text())
        left = _etdumps(devs["a"])
    assert not result.problems, result.problems
    timing = [cmd for runner, cmd in runs if "--print_output" not in cmd and runner == "executor_runner"]
    traced = [cmd for runner, cmd in runs if runner == "executor_runner_traced"]
    assert len(timing) == 3 and not any("--etdump_path" in c for c in timing)  # 3 programs x 1 round, untraced
    assert len(traced) == 3 and all("--etdump_path=tiny-" in c for c in traced)  # one traced run per program
    assert left == []  # neither model.etdump nor a program's ETDump stays on the phone
    assert all(r.runtime.startswith("ExecuTorch ") and "traced" not in r.runtime for r in result.rows)
    assert all(o["status"] == "ok" for o in result.facts["operators"]), result.facts["operators"]
    assert (tmp_path / "res" / "etdump" / devs["a"].serial / "tiny-fp32-portable.etdump").read_bytes()


@pytest.mark.slow
def test_a_build_with_only_a_traced_runner_has_its_latencies_labelled_traced(tiny_lane, runners, tmp_path):
    """An earlier build-info (one executor_runner, top-level event_tracer true): its latencies carry the tracer's
    overhead, and every table and the record say "traced"; its ETDumps are removed all the same."""
    from deploy.executorch import TRACED_NOTE

    models = copy_models(tiny_lane[0], tmp_path / "models")
    info = write_runtime_build_info(tmp_path / "build", runners["tracer"], event_tracer=True)
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        result = deploy_pte(models, info, tmp_path / "res", server.port)
        left = _etdumps(devs["a"])
    assert left == []
    rec = latest_executorch(tmp_path / "res")
    assert {r.runtime for r in rec.rows} == {"ExecuTorch fp32-xnnpack (traced)", "ExecuTorch int8-xnnpack (traced)",
                                             "ExecuTorch fp32-portable (traced)"}
    assert TRACED_NOTE in rec.notes and result.problems == []
    assert all(o["status"] == "ok" for o in rec.operators), rec.operators
