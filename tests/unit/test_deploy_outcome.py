"""deploy's exit (issue 34 item 8): a phone whose outputs differ fails the task only with --fail-on-numerics
(exit 8); by default it is reported and warned about, and the summary says the exit code is not affected."""

from __future__ import annotations

import pytest

import tasks  # noqa: F401  its @task declarations tie each parameter to its config key (stage_settings reads them)
from deploy.device_run import DeviceReport
from deploy.orchestrate import DeployResult, numerics_policy, outcome
from toolchain.numerics_records import NumericsVerdict
from workflow import stage_settings


def _result(verdict: str, fail_on_numerics: bool, errors=()) -> DeployResult:
    rep = DeviceReport("A", errors=list(errors))
    rep.numerics.append(NumericsVerdict("A", "m-quant_full-nnapi.pt", "nnapi", "full", verdict,
                                        reason="3 LSB off" if verdict != "agrees" else ""))
    return DeployResult([rep], None, None, {}, [], "/data/local/tmp/torchdroid/p", fail_on_numerics=fail_on_numerics)


def test_outputs_that_differ_are_reported_by_default_and_fail_with_the_flag():
    assert outcome(_result("differs", False), ["torchscript"]) is None
    assert "exit code is not affected" in numerics_policy(_result("differs", False))
    what, code = outcome(_result("differs", True), ["torchscript"])
    assert code == 8 and "1 phone output(s) differ" in what
    assert outcome(_result("agrees", True), ["torchscript"]) is None and numerics_policy(_result("agrees", True)) == ""
    assert outcome(_result("unknown", True), ["torchscript"]) is None  # not checked is not "differs"


def test_a_failed_device_is_exit_7_before_the_numerics():
    assert outcome(_result("differs", True, errors=["offline"]), ["torchscript"])[1] == 7


@pytest.mark.parametrize("config, cli, want", [({}, {}, False), ({"deploy": {"fail_on_numerics": True}}, {}, True),
                                               ({}, {"fail_on_numerics": True}, True)])
def test_the_option_from_the_config_and_the_command_line(config, cli, want):
    assert stage_settings.deploy(config, **cli).fail_on_numerics is want
