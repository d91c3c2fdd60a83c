"""Fixtures shared by the integration tests."""

from __future__ import annotations

import pytest

from tests.deploy_support.fixtures import build_standin
from tests.shared import built_once


@pytest.fixture(scope="session")
def standin(tmp_path_factory):
    """The stand-in speed_benchmark_torch, compiled once with the host compiler (tests copy it, never edit it)."""
    return built_once("standin", build_standin)


@pytest.fixture(scope="session")
def nnapi_lab(tmp_path_factory):
    """The NNAPI device lister (built with build-android's code and the fixture NDK) and a stand-in
    libneuralnetworks.so, once for the session."""
    from tests.deploy_support.fixtures import build_nnapi_lab

    return built_once("nnapi-lab", build_nnapi_lab)


@pytest.fixture(scope="session")
def executorch_report_chain(tmp_path_factory, standin):
    """deploy, deploy --format torchscript,executorch, deploy on two virtual devices (results kept after each step;
    tests/executorch_support/report_chain.py). Needs adb."""
    import shutil

    if shutil.which("adb") is None:
        pytest.skip("adb is not installed (./run test installs it)")
    from tests.executorch_support.report_chain import run_chain

    # once per test run (two test files use it, and they may run in different workers); only
    # test_report_executorch's default-report test writes there (its report files), the others copy a snapshot
    return built_once("et-report-chain", lambda home: run_chain(home, standin))


@pytest.fixture(scope="session")
def mobilenet_models(tmp_path_factory):
    """MobileNetV2 converted once for the test run, in this process (as `invoke all` does): six files and a manifest."""
    from tests.converter_support.mobilenet import converted_mobilenet

    return converted_mobilenet()


@pytest.fixture(scope="session")
def tiny_lane(tmp_path_factory):
    """The tiny user model as legacy TorchScript and real .pte programs (with ETRecords), once for the session."""
    return built_once("tiny-lane", _convert_tiny_lane)


def _convert_tiny_lane(home):
    from tests.executorch_support.lane import convert_tiny

    out = home / "models"
    legacy, pte = convert_tiny(out)
    return out, legacy, pte
