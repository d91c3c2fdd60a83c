"""Is the phone's answer right, ExecuTorch lane (issue 23 item 2): deploy-executorch runs every program once more per
recorded reference input with ``--inputs=... --print_output=all``, reads the printed outputs back and compares them
with the host ExecuTorch runtime's on the same inputs.

The virtual phones run the stand-in executor_runner, which prints what the installed ExecuTorch runtime computes for
the pushed .pte on the pushed input file, in upstream's format (docs/facts.md E17-E21); one phone's runtime is a few
percent off on the XNNPACK programs, one prints nothing, one has a runner older than ``--print_output``.
"""

import json
import re
import shutil

import pytest

from deploy.executorch import Unprintable, parse_outputs, runner_command
from tests.executorch_support.device import (build_standin_runner, deploy_executorch, latest_executorch,
                                             write_runtime_build_info)
from tests.executorch_support.lane import copy_models
from tests.virtual_device.harness import adb_with_devices

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")
DIR = "/data/local/tmp/torchdroid"
PROGRAMS = {"tiny-fp32-xnnpack.pte", "tiny-int8-xnnpack.pte", "tiny-fp32-portable.pte"}


@pytest.fixture(scope="module")
def runners(tmp_path_factory):
    root = tmp_path_factory.mktemp("et-num-runners")
    return {"new": build_standin_runner(root / "new"), "old": build_standin_runner(root / "old", print_all_output_bool=True)}


def deploy_pte(models, info, results, port):
    return deploy_executorch(models, info, results, port, warmup=0, iters=1, repeat=1, device_dir=DIR, timeout=600)


def test_the_runners_print_format_is_read_back_and_refused_when_incomplete():
    text = ("I executorch:executor_runner.cpp:798] 1 outputs: \nOutput[0][0]: (float) 0.245308\n"
            "Output[0][1]: (float) -1.000000\nOutput[1][0]: (int) 3\n")
    assert parse_outputs(text) == {0: [0.245308, -1.0], 1: [3.0]}
    with pytest.raises(Unprintable):
        parse_outputs("OutputX 0: tensor(sizes=[1, 2], [0.25, -1.])\n")  # the default summary mode is not read
    with pytest.raises(Unprintable, match="not all printed"):
        parse_outputs("Output[0][0]: (float) 1.0\nOutput[0][2]: (float) 1.0\n")
    cmd = runner_command("/d", "a b.pte", 1, 1, printed="in-0.bin")
    assert "--inputs=in-0.bin --print_output=all --num_executions=1" in cmd and "'a b.pte'" in cmd


@pytest.mark.slow
def test_three_phones_one_runtime_off_one_silent(tiny_lane, runners, tmp_path):
    models = copy_models(tiny_lane[0], tmp_path / "models")
    info = write_runtime_build_info(tmp_path / "build", runners["new"])
    cache = str(tmp_path / "outputs")
    phones = {"good": {"env": {"ETR_OUTPUT_CACHE": cache}},
              "off": {"env": {"ETR_OUTPUT_CACHE": cache, "ETR_OFF_PERCENT": "xnnpack:3"}},
              "silent": {"env": {"ETR_OUTPUT_CACHE": cache, "ETR_NO_OUTPUT": "tiny"}}}
    with adb_with_devices(tmp_path / "adb", phones) as (server, devs):
        result = deploy_pte(models, info, tmp_path / "res", server.port)
        serials = {name: d.serial for name, d in devs.items()}
        log = (devs["good"].state_dir / "device.log").read_text()
    assert not result.problems, result.problems
    got = {(v.serial, v.file): v for v in latest_executorch(tmp_path / "res").verdicts}
    assert len(got) == 9
    for f in PROGRAMS:  # the good phone agrees on every program, on the four recorded reference inputs
        v = got[serials["good"], f]
        assert v.verdict == "agrees" and v.inputs == 4 and v.backend == "executorch", v
        assert v.top1 == "4/4" and v.max_abs is not None and v.reference.startswith("host-executorch (reference")
    fp32, int8 = got[serials["off"], "tiny-fp32-xnnpack.pte"], got[serials["off"], "tiny-int8-xnnpack.pte"]
    assert fp32.verdict == "differs" and "largest difference" in fp32.reason and fp32.tolerance.startswith("|d| <= 0.001")
    assert int8.verdict == "differs" and int8.max_lsb > 2 and "LSB" in int8.tolerance  # the quantization's bound
    assert got[serials["off"], "tiny-fp32-portable.pte"].verdict == "agrees"  # the others pass
    for f in PROGRAMS:
        v = got[serials["silent"], f]
        assert v.verdict == "unknown" and "printed no output values" in v.reason
    # the runner got the recorded inputs as files, one run each, printing every output
    runs = re.findall(r"--model_path=tiny-fp32-portable\.pte --inputs=(tiny-input-\d\.bin) --print_output=all", log)
    assert runs == [f"tiny-input-{i}.bin" for i in range(4)]
    # the verdicts are in the run's document (the device's one list), no second file
    assert result.facts["checked"] and not list((tmp_path / "res").glob("executorch-*"))
    from deploy import numerics_report
    from deploy.results import run_document

    verdicts, note = numerics_report.of_run(*run_document(tmp_path / "res", None))  # the run's one list has them
    assert len(verdicts) == 9 and not note
    page = numerics_report.html_section(verdicts, {}, note)
    assert "ExecuTorch programs" in page and page.count("differs") >= 2 and "tiny-int8-xnnpack.pte" in page


def test_a_runner_without_print_output_is_unknown_and_says_why(tiny_lane, runners, tmp_path):
    models = copy_models(tiny_lane[0], tmp_path / "models")
    info = write_runtime_build_info(tmp_path / "build", runners["old"])
    with adb_with_devices(tmp_path / "adb", {"a": {}}) as (server, devs):
        result = deploy_pte(models, info, tmp_path / "res", server.port)
    assert not result.problems and {r.status for r in result.rows} == {"ok"}  # the timings are unaffected
    verdicts = latest_executorch(tmp_path / "res").verdicts
    assert {v.verdict for v in verdicts} == {"unknown"}
    assert all("does not know --print_output=all" in v.reason for v in verdicts)


def test_without_recorded_inputs_the_runners_all_ones_default_is_compared(tiny_lane, runners, tmp_path):
    from tests.executorch_support.section import write_section
    from toolchain.records import load_section

    models = copy_models(tiny_lane[0], tmp_path / "models")
    section = load_section(models)
    section.pop("reference")
    write_section(models, section)
    info = write_runtime_build_info(tmp_path / "build", runners["new"])
    with adb_with_devices(tmp_path / "adb", {"a": {"env": {"ETR_OFF_PERCENT": "portable:5"}}}) as (server, devs):
        deploy_pte(models, info, tmp_path / "res", server.port)
        log = (devs["a"].state_dir / "device.log").read_text()
    got = {v.file: v for v in latest_executorch(tmp_path / "res").verdicts}
    assert "--inputs" not in log and log.count("--print_output=all") == 3
    assert got["tiny-fp32-xnnpack.pte"].verdict == "agrees" and got["tiny-fp32-xnnpack.pte"].inputs == 1
    assert "all-ones" in got["tiny-fp32-xnnpack.pte"].reference
    assert got["tiny-fp32-portable.pte"].verdict == "differs"
    body = json.loads((tmp_path / "res" / "latest.json").read_text())
    assert body["kind"] == "torchdroid.deploy-results" and len(body["numerics"]) == 3


@pytest.mark.slow
def test_every_output_of_a_two_output_program_is_compared_each_by_its_own_rule(runners, tmp_path):
    """A program returning (logits, features): the phone's every printed output is compared with the host's, each
    with its own int8 rule; a phone whose runtime is off on the second output only is caught (output 0 agrees)."""
    from converter.executorch import ExecutorchSettings, convert_executorch
    from tests.converter_support.user_models import __file__ as user_models

    models = tmp_path / "models"
    convert_executorch(ExecutorchSettings(out=models, model=f"{user_models}:two_outputs", weights="random",
                                          calibration_count=4, delegates=("xnnpack",)))
    info = write_runtime_build_info(tmp_path / "build", runners["new"])
    cache = str(tmp_path / "outputs")
    phones = {"good": {"env": {"ETR_OUTPUT_CACHE": cache}},
              "second_off": {"env": {"ETR_OUTPUT_CACHE": cache, "ETR_OFF_PERCENT": "xnnpack:5", "ETR_OFF_OUTPUT": "1"}}}
    with adb_with_devices(tmp_path / "adb", phones) as (server, devs):
        result = deploy_pte(models, info, tmp_path / "res", server.port)
        serials = {name: d.serial for name, d in devs.items()}
    assert not result.problems, result.problems
    got = {(v.serial, v.file): v for v in latest_executorch(tmp_path / "res").verdicts}
    for f in ("two_outputs-fp32-xnnpack.pte", "two_outputs-int8-xnnpack.pte"):
        good, off = got[serials["good"], f], got[serials["second_off"], f]
        assert good.verdict == "agrees" and good.inputs == 4, good
        assert off.verdict == "differs" and "largest difference" in off.reason, off
    int8 = got[serials["good"], "two_outputs-int8-xnnpack.pte"]
    assert "each output by its own rule: output 0: " in int8.tolerance and "output 1: " in int8.tolerance
