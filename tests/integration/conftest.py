"""Fixtures shared by the integration tests."""

from __future__ import annotations

import pytest

from tests.deploy_support.fixtures import build_standin


@pytest.fixture(scope="session")
def standin(tmp_path_factory):
    """The stand-in speed_benchmark_torch, compiled once with the host compiler (tests copy it, never edit it)."""
    return build_standin(tmp_path_factory.mktemp("standin"))
