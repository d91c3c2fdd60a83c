"""pytest fixtures for build-android tests (import them into a test module)."""

from __future__ import annotations

import pytest

from . import NDK_REVISIONS, FakePytorch, git_test_env, make_fake_jdk, make_fake_ndk, make_fake_pytorch, make_ndk_release

__all__ = ["fake_pytorch", "fake_ndk", "ndk_releases", "fake_jdk11", "git_file_protocol", "ccache_dir"]


@pytest.fixture(scope="session")
def fake_pytorch(tmp_path_factory) -> FakePytorch:
    return make_fake_pytorch(tmp_path_factory.mktemp("remote"))


@pytest.fixture(scope="session")
def fake_ndk(tmp_path_factory):
    return make_fake_ndk(tmp_path_factory.mktemp("ndk") / "android-ndk-r21e", "21.4.7075529")


@pytest.fixture(scope="session")
def ndk_releases(tmp_path_factory):
    """{"r21e": path, "r23c": ..., "r26d": ..., "r27c": ...}: fixture NDKs with each revision's layout."""
    root = tmp_path_factory.mktemp("ndks")
    return {release: make_ndk_release(root, release) for release in NDK_REVISIONS}


@pytest.fixture(scope="session")
def fake_jdk11(tmp_path_factory):
    return make_fake_jdk(tmp_path_factory.mktemp("jdk") / "jdk-11", "11.0.22")


@pytest.fixture(scope="session")
def ccache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("ccache")


@pytest.fixture(autouse=True)
def git_file_protocol(monkeypatch, ccache_dir):
    for key, value in git_test_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CCACHE_DIR", str(ccache_dir))  # builds use ccache when it is installed: not ~/.cache
