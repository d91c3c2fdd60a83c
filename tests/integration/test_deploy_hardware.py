"""Which hardware NNAPI chose (issue 23 items 1, 4 and 5), in the virtual lab: `invoke deploy` on phones whose NNAPI
runtime logs its placement decisions as AOSP's does (tests/deploy_support/nnapi_runtime_log.py, the real operations
of the pushed models), `invoke report` shows them; debug.nn.vlog is put back after success, failure and Ctrl-C."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.deploy_support.fixtures import invoke_cli as invoke
from tests.deploy_support.fixtures import write_build_info
from deploy.nnapi_log import VLOG_VALUE
from tests.virtual_device.harness import adb_with_devices
from toolchain.records import DeployResults, deploy_results_path

pytestmark = [pytest.mark.slow,  # virtual phones run every model several times (~100 s in all)
              pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")]

ROOT = Path(__file__).resolve().parents[2]
# "$VDEV_PYTHON": the phone's python (the test run's warm one, tests/warm_python.py)
RUNTIME_LOG = f"env PYTHONPATH={ROOT} \"$VDEV_PYTHON\" {ROOT / 'tests' / 'deploy_support' / 'nnapi_runtime_log.py'}"
FLOAT_NNAPI, INT8_NNAPI = "mobilenetv2-quant_none-nnapi.pt", "mobilenetv2-quant_full-nnapi.pt"


RELEASES = {29: "10", 30: "11", 31: "12", 34: "14"}
LAB = {}  # the session's stand-in libneuralnetworks.so directory (set by lab_models)


def _phone(model: str, sdk: int, nnapi: str = "", vlog: str = "", devices: str = "", **extra) -> dict:
    """A virtual phone; ``devices``: its NNAPI drivers for the NDK device API (name:type:feature level, the
    stand-in library on LD_LIBRARY_PATH; without it the library does not load there)."""
    listed = {"SBT_NNAPI_DEVICES": devices, "SBT_NNAPI_LEVEL": str(sdk), "LD_LIBRARY_PATH": str(LAB["lib_dir"])} \
        if devices else {}
    env = {"SBT_NNAPI_LOG_CMD": RUNTIME_LOG, **({"SBT_NNAPI": nnapi} if nnapi else {}), **listed,
           **extra.pop("env", {})}
    props = {"ro.product.model": model, "ro.build.version.sdk": str(sdk), "ro.build.version.release": RELEASES[sdk],
             **({"debug.nn.vlog": vlog} if vlog else {})}
    return {"props": props, "env": env, **extra}


def _deploy_args(models: Path, build_info: Path, results: Path, *more: str) -> list:
    return ["deploy", "--models", str(models), "--build-info", str(build_info), "--variant", "quant_none",
            "--variant", "quant_full", "--iter", "1", "--repeat", "1", "--warmup", "0", "--allow-mismatch",
            "--no-numerics", "--project", "hardware", "--results", str(results), *more]


def _vlog(dev) -> str:
    text = (dev.state_dir / "props.txt").read_text()
    return next((line.split("]: [", 1)[1].rstrip("]") for line in text.splitlines()
                 if line.startswith("[debug.nn.vlog]: [")), "<unset>")


@pytest.fixture
def lab_models(tmp_path, mobilenet_models, standin, nnapi_lab):
    models = tmp_path / "models"
    shutil.copytree(mobilenet_models[0], models)
    LAB["lib_dir"] = nnapi_lab.lib_dir
    return models, write_build_info(tmp_path / "android", standin, lister=nnapi_lab.lister)


def test_four_phones_say_which_hardware_ran_each_model(tmp_path, lab_models):
    models, build_info = lab_models
    devices = {
        # the blog's kind of phone: float on the GPU, int8 on the DSP (Android 11's log format, chatty on)
        "snapdragon": _phone("DSP Phone", 30, "qti-dsp=quant,qti-gpu=float", devices="qti-dsp:4:30:1.2,qti-gpu:3:30"),
        # an NPU without AVERAGE_POOL_2D and RESHAPE: those two run on NNAPI's CPU fallback (Android 12's format); the user's own
        # debug.nn.vlog value must come back
        "npu": _phone("NPU Phone", 31, "vendor-npu=all-AVERAGE_POOL_2D-RESHAPE", vlog="model",
                      devices="vendor-npu:4:31:2.0"),
        "silent": _phone("Silent Phone", 30),  # its runtime logs nothing, its library does not load for the lister
        "future": _phone("Future Phone", 34, "gpu=all", devices="gpu:3:1000007",
                         env={"SBT_NNAPI_FORMAT": "changed", "SBT_NNAPI_FAIL": "1"}),
    }
    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        r = invoke(work, *_deploy_args(models, build_info, results), port=server.port)
        assert r.returncode == 0, r.stdout + r.stderr
        serial = {name: d.serial for name, d in devs.items()}
        assert {name: _vlog(d) for name, d in devs.items()} == {
            "snapdragon": "", "npu": "model", "silent": "", "future": ""}  # every phone's property put back
        report = invoke(work, "report", "--results", str(results), "--json", port=server.port)
        page = invoke(work, "report", "--results", str(results), port=server.port)

    found = {(p.serial, p.file): p for p in DeployResults.load(deploy_results_path(results, "latest")).hardware}
    assert len(found) == 8
    dsp_float, dsp_int8 = found[(serial["snapdragon"], FLOAT_NNAPI)], found[(serial["snapdragon"], INT8_NNAPI)]
    assert dsp_float.status == "accelerated" and set(dsp_float.per_device()) == {"qti-gpu"}, dsp_float
    assert dsp_float.single_device == "qti-gpu" and len(dsp_float.operations) > 30  # chatty lines expanded
    assert dsp_int8.status == "accelerated" and dsp_int8.single_device == "qti-dsp", dsp_int8
    assert dsp_int8.drivers == ["qti-dsp", "qti-gpu"], dsp_int8  # the runtime's "Found interface" lines
    # the NDK device API, through the lister: type and feature level, nnapi-reference last (as Manager.cpp does)
    assert dsp_int8.devices == [["qti-dsp", "accelerator", "feature level 4 (API 30)", "1.2"],
                                ["qti-gpu", "GPU", "feature level 4 (API 30)", "1.0"],
                                ["nnapi-reference", "CPU", "feature level 4 (API 30)", "1.0"]], dsp_int8
    assert not dsp_int8.driver_details
    for file in (FLOAT_NNAPI, INT8_NNAPI):
        npu = found[(serial["npu"], file)]
        assert npu.status == "partly-cpu" and npu.fallback_operations() == {"AVERAGE_POOL_2D": 1, "RESHAPE": 1}, npu
        assert not npu.single_device
        assert npu.devices[0] == ["vendor-npu", "accelerator", "feature level 5 (API 31)", "2.0"], npu
        silent = found[(serial["silent"], file)]
        assert silent.status == "unknown" and "logged no ExecutionPlan line" in silent.reason
        assert not silent.devices and "libneuralnetworks.so does not load" in silent.driver_details, silent
        future = found[(serial["future"], file)]
        assert future.status == "unknown" and "format torchdroid does not know" in future.reason, future
        assert not future.devices and "getDeviceCount returned 5" in future.driver_details, future
    # the NNAPI row of the partly-CPU phone is flagged, in the results and on the console
    rows = json.loads((results / "latest.json").read_text())
    rows = rows["results"]
    npu_rows = [x for x in rows if x["serial"] == serial["npu"] and x["backend"] == "nnapi"]
    assert npu_rows and all("nnapi-partly-cpu" in x["flags"] for x in npu_rows), npu_rows
    assert "which hardware NNAPI chose" in r.stdout and "CPU fallback" in r.stdout, r.stdout

    assert report.returncode == 0, report.stdout + report.stderr
    doc = json.loads(report.stdout)
    assert {(p["serial"], p["file"]): p["status"] for p in doc["hardware"]} == {k: v.status for k, v in found.items()}
    assert page.returncode == 0, page.stdout + page.stderr
    assert "which hardware NNAPI chose" in page.stdout and "unknown" in page.stdout
    html = next(results.glob("report-run-*.html")).read_text()
    assert "id='hardware'" in html and "qti-dsp" in html and "vendor-npu" in html and "RESHAPE x1" in html
    assert "qti-dsp (accelerator, feature level 4 (API 30))" in html and "NNAPI devices" in html


def test_the_runtimes_cpu_fallbacks_overrule_the_plan(tmp_path, lab_models):
    """Issue 32's must-show: a GPU driver whose prepareModel fails (the runtime throws the plan away: `cpu`, with
    its log line), an NPU whose execution fails (`cpu`: it had the whole model), and a control (`accelerated`)."""
    models, build_info = lab_models
    devices = {
        "compile": _phone("Compile Fails", 31, "qti-gpu=float-AVERAGE_POOL_2D,qti-dsp=quant", vlog="model",
                          env={"SBT_NNAPI_PREPARE_FAILS": "qti-gpu"}),
        "execute": _phone("Execution Fails", 31, "vendor-npu=all", env={"SBT_NNAPI_EXECUTE_FAILS": "vendor-npu"}),
        "control": _phone("Control Phone", 30, "qti-dsp=quant,qti-gpu=float"),
    }
    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        r = invoke(work, *_deploy_args(models, build_info, results), port=server.port)
        assert r.returncode == 0, r.stdout + r.stderr
        serial = {name: d.serial for name, d in devs.items()}
        assert {name: _vlog(d) for name, d in devs.items()} == {"compile": "model", "execute": "", "control": ""}
    found = {(p.serial, p.file): p for p in DeployResults.load(deploy_results_path(results, "latest")).hardware}
    compiled = found[(serial["compile"], FLOAT_NNAPI)]
    assert compiled.status == "cpu" and compiled.per_device() == {"nnapi-reference": len(compiled.operations)}, compiled
    assert {d for _, d in compiled.planned} == {"qti-gpu", "nnapi-reference"}, compiled  # the plan it threw away
    assert compiled.fallback == ["CompilationBuilder: CompilationBuilder::finish with CPU fallback"], compiled
    assert compiled.why_on_cpu()["AVERAGE_POOL_2D"] == ["qti-gpu", "qti-dsp"], compiled
    assert found[(serial["compile"], INT8_NNAPI)].status == "accelerated"  # the DSP's plan needs no GPU
    for file in (FLOAT_NNAPI, INT8_NNAPI):
        executed = found[(serial["execute"], file)]
        assert executed.status == "cpu" and executed.fallback == ["ExecutionBuilder: cpuFallbackFull"], executed
        assert executed.single_device == "vendor-npu" and "execution failed" in executed.reason, executed
        control = found[(serial["control"], file)]
        assert control.status == "accelerated" and not control.fallback and "nnapi-reference" not in \
            control.per_device(), control
    # the NNAPI rows are flagged, and the console shows the runtime's line and the per-operation reason
    rows = json.loads((results / "latest.json").read_text())["results"]
    flagged = {x["serial"] for x in rows if x["backend"] == "nnapi" and "nnapi-cpu-fallback" in x["flags"]}
    assert flagged == {serial["compile"], serial["execute"]}, rows
    assert "CompilationBuilder::finish with CPU fallback" in r.stdout and "cpuFallbackFull" in r.stdout, r.stdout
    assert "qti-gpu, qti-dsp can't do AVERAGE_POOL_2D" in r.stdout, r.stdout


def test_the_property_is_put_back_after_a_crash_and_a_refusal_is_unknown(tmp_path, lab_models, standin):
    models, _ = lab_models
    build_info = write_build_info(tmp_path / "android-before-the-lister", standin)  # no lister recorded
    devices = {
        "crash": _phone("Crash Phone", 29, "qti-dsp=quant", vlog="all", env={"SBT_CRASH": "nnapi"}),
        "locked": _phone("Locked Phone", 30, "qti-dsp=quant", setprop_denied=True),
    }
    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        r = invoke(work, *_deploy_args(models, build_info, results), port=server.port)
        serial = {name: d.serial for name, d in devs.items()}
        assert _vlog(devs["crash"]) == "all" and _vlog(devs["locked"]) == "<unset>"
    assert r.returncode != 0  # the crashing NNAPI models fail their benchmark
    found = {(p.serial, p.file): p for p in DeployResults.load(deploy_results_path(results, "latest")).hardware}
    crashed = found[(serial["crash"], INT8_NNAPI)]
    assert crashed.status == "accelerated" and crashed.restored is True, crashed  # compiled, then crashed
    assert not crashed.devices and "did not build the NNAPI device lister" in crashed.driver_details, crashed
    locked = found[(serial["locked"], INT8_NNAPI)]
    assert locked.status == "unknown" and "did not take" in locked.reason, locked


def test_ctrl_c_during_the_placement_run_puts_the_property_back(tmp_path, lab_models):
    models, build_info = lab_models
    marker = tmp_path / "compiling"
    slow = f"sh -c 'touch {marker}; sleep 4; exec \"$@\"' _ {RUNTIME_LOG}"  # the runtime takes 4 s to compile
    devices = {"phone": _phone("Slow Phone", 30, "qti-dsp=quant", vlog="model", env={"SBT_NNAPI_LOG_CMD": slow})}
    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        # a real process of its own: the test sends it SIGINT while it runs (tests/cli.py cannot)
        proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(ROOT),
                                 *_deploy_args(models, build_info, results, "--variant", "quant_full")],
                                cwd=work, env=dict(os.environ, ANDROID_ADB_SERVER_PORT=str(server.port), CI="1"), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (marker.exists() and _vlog(devs["phone"]) != "model"):
            time.sleep(0.1)  # the placement run has set the property
        assert _vlog(devs["phone"]) == VLOG_VALUE
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        time.sleep(0.5)
        assert _vlog(devs["phone"]) == "model", out
    assert proc.returncode == 130, out  # Ctrl-C stops the deploy (issue 21 item 3) once the property is back
    assert out.count("benchmarking mobilenetv2-quant_full-nnapi.pt") <= 1, out  # a variant named twice runs once


def _probe_shells() -> list:
    """The pids of the virtual phones' shells running a placement probe (their command line carries its marker)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"TORCHDROID_NNLOG" in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def test_a_link_dropped_during_the_placement_run_leaves_the_users_value_to_the_next_run(tmp_path, lab_models):
    """Issue 34 item 4: the host and the phone's shell die during the placement run before any trap runs (a pulled
    cable, a killed adbd): the phone keeps compilation,manager.  The next deploy, even one that reads no
    placements, puts the user's value back first (before: it stayed changed, and a later probe "restored" it)."""
    models, build_info = lab_models
    marker = tmp_path / "compiling"
    slow = f"sh -c 'touch {marker}; sleep 10; exec \"$@\"' _ {RUNTIME_LOG}"
    devices = {"phone": _phone("Cut Phone", 30, "qti-dsp=quant", vlog="model", env={"SBT_NNAPI_LOG_CMD": slow})}
    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, CI="1")
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        env["ANDROID_ADB_SERVER_PORT"] = str(server.port)
        proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(ROOT),
                                 *_deploy_args(models, build_info, results, "--variant", "quant_full")],
                                cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not (marker.exists() and _vlog(devs["phone"]) != "model"):
                time.sleep(0.1)
            assert _vlog(devs["phone"]) == VLOG_VALUE
            proc.kill()  # the host is gone ...
            for pid in _probe_shells():  # ... and the phone's shell dies without running its trap
                os.kill(pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        assert _vlog(devs["phone"]) == VLOG_VALUE  # what the cut-off run left
        again = invoke(work, *_deploy_args(models, build_info, results, "--variant", "quant_full", "--no-hardware"),
                       port=server.port)
        after = _vlog(devs["phone"])
    assert again.returncode == 0, again.stdout + again.stderr
    assert after == "model", again.stdout + again.stderr
    assert "debug.nn.vlog put back to 'model'" in again.stdout + again.stderr


def test_one_page_per_run_explains_every_phones_number(tmp_path, lab_models, tiny_lane):
    """Issue 23's must-show: three phones; one deploy of both formats (latency, hardware, numerics; the programs'
    ETDump) into one results directory; `invoke report` shows each phone's latency, hardware, verdicts and top
    operators, on the console and the page."""
    import shutil

    from tests.executorch_support.section import write_section
    from toolchain.records import load_section
    from host_nnapi.build import cache_root
    from tests.executorch_support.device import build_standin_runner, write_runtime_build_info
    from tests.executorch_support.lane import copy_models

    models, build_info = lab_models
    printer = (f"env PYTHONPATH={ROOT} TORCHDROID_HOST_NNAPI_CACHE={cache_root()} \"$VDEV_PYTHON\" "
               f"{ROOT / 'tests' / 'deploy_support' / 'print_output.py'}")
    answers = {"SBT_OUTPUT_CMD": printer, "SBT_OUTPUT_CACHE": str(tmp_path / "outputs")}
    devices = {
        "dsp": _phone("DSP Phone", 30, "qti-dsp=quant,qti-gpu=float", devices="qti-dsp:4:30,qti-gpu:3:30", env=answers),
        "wrong": _phone("Wrong Driver", 31, "vendor-npu=all-AVERAGE_POOL_2D-RESHAPE",
                        env=dict(answers, SBT_OFF_LSB="quant_full-nnapi:4")),  # Android 12 allows 3 (PW5)
        "silent": _phone("Silent Phone", 29),  # no placement log, no printed outputs
    }
    results, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    pte_models = copy_models(tiny_lane[0], tmp_path / "pte-models")
    for f in pte_models.iterdir():  # one models directory (lab_models' own copy): the programs beside the models
        if f.name != "manifest.json" and not (models / f.name).exists():
            (shutil.copytree if f.is_dir() else shutil.copy2)(f, models / f.name)
    write_section(models, load_section(pte_models))
    runner = build_standin_runner(tmp_path / "runner", event_tracer=True)
    runner_info = write_runtime_build_info(tmp_path / "et-build", runner, event_tracer=True)
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        args = [a for a in _deploy_args(models, build_info, results) if a != "--no-numerics"]
        r = invoke(work, *args, "--format", "torchscript,executorch", "--runner-build-info", str(runner_info),
                   port=server.port)
        assert r.returncode == 0, r.stdout + r.stderr
        page = invoke(work, "report", "--results", str(results), port=server.port)
        serial = {name: d.serial for name, d in devs.items()}
    assert page.returncode == 0, page.stdout + page.stderr
    out = page.stdout
    for name, label in (("dsp", "DSP Phone"), ("wrong", "Wrong Driver"), ("silent", "Silent Phone")):
        assert f"{label} ({serial[name]}): latency, hardware and answers" in out, out
    assert "qti-dsp" in out and "vendor-npu + CPU fallback" in out and "DIFFERS (4 LSB)" in out, out
    assert "unknown (not checked)" not in out.split("Silent Phone")[0]  # the checked phones have verdicts
    assert "top ExecuTorch operator" in out and "native_call_convolution.out" in out, out
    html = next(results.glob("report-run-*.html")).read_text()
    for anchor in ("phones", "hardware", "numerics", f"phone-{serial['wrong']}", f"operators-{serial['dsp']}"):
        assert f"id='{anchor}'" in html, anchor
