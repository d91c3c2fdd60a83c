"""Fixtures shared by the integration tests."""

from __future__ import annotations

import pytest

from tests.deploy_support.fixtures import build_standin


@pytest.fixture(scope="session")
def standin(tmp_path_factory):
    """The stand-in speed_benchmark_torch, compiled once with the host compiler (tests copy it, never edit it)."""
    return build_standin(tmp_path_factory.mktemp("standin"))


@pytest.fixture(scope="session")
def nnapi_lab(tmp_path_factory):
    """The NNAPI device lister (built with build-android's code and the fixture NDK) and a stand-in
    libneuralnetworks.so, once for the session."""
    from tests.deploy_support.fixtures import build_nnapi_lab

    return build_nnapi_lab(tmp_path_factory.mktemp("nnapi-lab"))


@pytest.fixture(scope="session")
def executorch_report_chain(tmp_path_factory, standin):
    """deploy, deploy-executorch, deploy, deploy-executorch --models elsewhere on two virtual devices (results kept
    after each step; tests/executorch_support/report_chain.py). Needs adb."""
    import shutil

    if shutil.which("adb") is None:
        pytest.skip("adb is not installed (./run test installs it)")
    from tests.executorch_support.report_chain import run_chain

    return run_chain(tmp_path_factory.mktemp("et-report"), standin)


@pytest.fixture(scope="session")
def mobilenet_models(tmp_path_factory):
    """MobileNetV2 converted once for the session, in this process (as `invoke all` does): six files and a manifest."""
    from converter import ConvertSettings, convert

    out = tmp_path_factory.mktemp("models")
    result = convert(ConvertSettings(out=out, weights="random", calibration_count=8,
                                     build_dir=tmp_path_factory.mktemp("build")))
    return out, result


@pytest.fixture(scope="session")
def tiny_lane(tmp_path_factory):
    """The tiny user model as legacy TorchScript and real .pte programs (with ETRecords), once for the session."""
    from tests.executorch_support.lane import convert_tiny

    out = tmp_path_factory.mktemp("et") / "models"
    legacy, pte = convert_tiny(out)
    return out, legacy, pte
