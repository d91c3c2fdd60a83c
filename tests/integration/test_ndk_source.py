"""The pinned PyTorch checkout against a local bare "PyTorch" (real git, file:// URLs)."""

from __future__ import annotations

import shutil

import pytest

from ndk_build.gitsource import ensure_checkout
from toolchain.tools.git import Git
from tests.ndk_support import make_fake_pytorch
from tests.ndk_support.fixtures import *  # noqa: F403 (pytest fixtures: fake_pytorch, fake_ndk)
from toolchain.errors import ToolFailed, UsageError
from toolchain.runner import run


def _git(*args, cwd):
    return run(["git", *args], cwd=cwd, check=False)


def test_fetches_only_the_pinned_commit_with_submodules_and_reuses_it(tmp_path, fake_pytorch):
    git = Git.locate(tmp_path / "git.log")
    dest = tmp_path / "src"
    co = ensure_checkout(git, fake_pytorch.url, fake_pytorch.pinned, dest, jobs=2)
    assert co.reused is False
    assert _git("rev-parse", "HEAD", cwd=dest).output.strip() == fake_pytorch.pinned
    # shallow: one commit, and neither the older bulk nor the newer (broken) tip was fetched
    assert (dest / ".git" / "shallow").is_file()
    assert _git("rev-list", "--count", "HEAD", cwd=dest).output.strip() == "1"
    assert _git("cat-file", "-e", fake_pytorch.base, cwd=dest).returncode != 0
    assert _git("cat-file", "-e", fake_pytorch.broken, cwd=dest).returncode != 0
    # the submodule is populated at the superproject's (non-tip) commit
    assert (dest / "third_party" / "fakedep" / "fakedep.c").is_file()
    assert not (dest / "third_party" / "fakedep" / "NEWS").exists()
    assert [s.path for s in co.submodules] == ["third_party/fakedep"]

    again = ensure_checkout(git, fake_pytorch.url, fake_pytorch.pinned, dest, jobs=2)
    assert again.reused is True and again.commit == fake_pytorch.pinned


def test_existing_checkout_at_another_commit_moves_to_the_pin(tmp_path, fake_pytorch):
    git = Git.locate()
    dest = tmp_path / "src"
    ensure_checkout(git, fake_pytorch.url, fake_pytorch.broken, dest)
    co = ensure_checkout(git, fake_pytorch.url, fake_pytorch.pinned, dest)
    assert co.reused is False
    assert git.head(dest) == fake_pytorch.pinned


def test_checkout_with_local_changes_is_refused_and_left_alone(tmp_path, fake_pytorch):
    git = Git.locate()
    dest = tmp_path / "src"
    ensure_checkout(git, fake_pytorch.url, fake_pytorch.pinned, dest)
    edited = dest / "CMakeLists.txt"
    edited.write_text(edited.read_text() + "# my local edit\n")
    with pytest.raises(UsageError) as ei:
        ensure_checkout(git, fake_pytorch.url, fake_pytorch.pinned, dest)
    msg = str(ei.value)
    assert "local changes" in msg and "CMakeLists.txt" in msg and "stash" in msg
    assert edited.read_text().endswith("# my local edit\n")


def test_missing_submodule_is_detected_before_building(tmp_path):
    remote = make_fake_pytorch(tmp_path / "remote", bulk_bytes=1000)
    git = Git.locate()
    dest = tmp_path / "src"
    ensure_checkout(git, remote.url, remote.pinned, dest)
    # the submodule goes away and its server becomes unreachable
    assert _git("submodule", "deinit", "-q", "-f", "third_party/fakedep", cwd=dest).returncode == 0
    shutil.rmtree(dest / ".git" / "modules")
    remote.dep_bare.rename(tmp_path / "gone.git")
    with pytest.raises(ToolFailed) as ei:
        ensure_checkout(git, remote.url, remote.pinned, dest)
    msg = str(ei.value)
    assert "third_party/fakedep" in msg
    assert "submodule update --init --recursive" in msg


def test_not_a_sha_and_unknown_commit_are_clear_errors(tmp_path, fake_pytorch):
    git = Git.locate()
    with pytest.raises(UsageError) as ei:
        ensure_checkout(git, fake_pytorch.url, "v2.8.0", tmp_path / "a")
    assert "full commit SHA" in str(ei.value) and "git ls-remote" in str(ei.value)
    with pytest.raises(ToolFailed) as ei:
        ensure_checkout(git, fake_pytorch.url, "1" * 40, tmp_path / "b")
    assert f"commit {'1' * 40} is not in {fake_pytorch.url}" in str(ei.value) and "--repo-url" in str(ei.value)


def test_server_that_refuses_fetch_by_sha_falls_back_to_full_fetches(tmp_path, monkeypatch, caplog):
    remote = make_fake_pytorch(tmp_path / "remote", bulk_bytes=1000, allow_sha=False)
    # protocol v0: upload-pack enforces uploadpack.allowReachableSHA1InWant=false, like a strict server
    monkeypatch.setenv("GIT_CONFIG_COUNT", "2")
    monkeypatch.setenv("GIT_CONFIG_KEY_1", "protocol.version")
    monkeypatch.setenv("GIT_CONFIG_VALUE_1", "0")
    git = Git.locate()
    dest = tmp_path / "src"
    co = ensure_checkout(git, remote.url, remote.pinned, dest)
    assert git.head(dest) == remote.pinned and co.submodules[0].populated
    assert int(_git("rev-list", "--count", "HEAD", cwd=dest).output) > 1  # full history this time
    messages = " ".join(r.message for r in caplog.records)
    assert "refused a shallow fetch" in messages


def test_changes_inside_a_submodule_are_refused_untracked_files_are_not(tmp_path, fake_pytorch):
    git = Git.locate()
    dest = tmp_path / "src"
    ensure_checkout(git, fake_pytorch.url, fake_pytorch.pinned, dest)
    (dest / "generated_by_a_build.txt").write_text("untracked\n")
    assert ensure_checkout(git, fake_pytorch.url, fake_pytorch.pinned, dest).reused
    (dest / "third_party" / "fakedep" / "fakedep.c").write_text("/* patched */\n")
    with pytest.raises(UsageError) as ei:
        ensure_checkout(git, fake_pytorch.url, fake_pytorch.pinned, dest)
    assert "third_party/fakedep" in str(ei.value)


def test_tags_and_branches_resolve_to_their_commit_without_fetching(tmp_path, fake_pytorch):
    git = Git.locate()
    assert git.resolve_ref(fake_pytorch.url, "v0.1.0") == (fake_pytorch.pinned, "refs/tags/v0.1.0")  # peeled
    assert git.resolve_ref(fake_pytorch.url, "release/0.1") == (fake_pytorch.pinned, "refs/heads/release/0.1")
    assert git.resolve_ref(fake_pytorch.url, "main") == (fake_pytorch.broken, "refs/heads/main")
    with pytest.raises(UsageError) as ei:
        git.resolve_ref(fake_pytorch.url, "v9.9.9")
    assert f"{fake_pytorch.url} has no tag or branch 'v9.9.9'" in str(ei.value)
    assert "git ls-remote --tags" in str(ei.value)
    with pytest.raises(UsageError) as ei:
        git.resolve_ref(fake_pytorch.url, "--upload-pack=touch")
    assert "neither a full commit SHA nor a tag" in str(ei.value)
    with pytest.raises(ToolFailed) as ei:
        git.resolve_ref((tmp_path / "no-such.git").as_uri(), "v0.1.0")
    assert "`git ls-remote" in str(ei.value) and "pass the full SHA" in str(ei.value)
