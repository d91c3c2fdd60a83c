"""pytest fixtures for build-android tests (import them into a test module)."""

from __future__ import annotations

import pytest

from . import FakePytorch, git_test_env, make_fake_ndk, make_fake_pytorch

__all__ = ["fake_pytorch", "fake_ndk", "git_file_protocol"]


@pytest.fixture(scope="session")
def fake_pytorch(tmp_path_factory) -> FakePytorch:
    return make_fake_pytorch(tmp_path_factory.mktemp("remote"))


@pytest.fixture(scope="session")
def fake_ndk(tmp_path_factory):
    return make_fake_ndk(tmp_path_factory.mktemp("ndk") / "android-ndk-r21e", "21.4.7075529")


@pytest.fixture(autouse=True)
def git_file_protocol(monkeypatch):
    for key, value in git_test_env().items():
        monkeypatch.setenv(key, value)
