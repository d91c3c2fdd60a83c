"""build-android as a user runs it: the default (relative) build dir, from the checkout root and from another
directory, with no INVOKE_* variables (issue 9: a relative build dir used to end in exit 127)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.cli import invoke
from tests.ndk_support import git_test_env
from tests.ndk_support.fixtures import *  # noqa: F403

ROOT = Path(__file__).resolve().parents[2]


def user_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
    env.update(git_test_env(), CI="1")
    return env


def _args(fake_pytorch, ndk):
    return ["build-android", "--ndk", str(ndk), "--repo-url", fake_pytorch.url, "--commit", fake_pytorch.pinned,
            "--abi", "x86_64", "--max-jobs", "2"]


def test_from_a_checkout_root_with_the_default_build_dir(tmp_path, fake_pytorch, ndk_releases):
    checkout = tmp_path / "torchdroid"  # a checkout's root: tasks.py and invoke.yaml, build/ created beside them
    checkout.mkdir()
    (checkout / "tasks.py").symlink_to(ROOT / "tasks.py")
    shutil.copy(ROOT / "invoke.yaml", checkout / "invoke.yaml")
    res = invoke(checkout, *_args(fake_pytorch, ndk_releases["r26d"]), env=user_env(), timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    info = checkout / "build" / "android" / "x86_64" / "build-info.json"
    assert f"build-info: {info}" in res.stdout
    data = json.loads(info.read_text())
    assert Path(data["source_dir"]) == (checkout / "build" / "src" / f"pytorch-{fake_pytorch.pinned[:12]}").resolve()
    assert (info.parent / data["artefacts"][0]["path"]).is_file()


def test_from_another_directory_with_the_default_build_dir(tmp_path, fake_pytorch, ndk_releases):
    work = tmp_path / "somewhere" / "else"
    work.mkdir(parents=True)
    res = invoke(work, "--search-root", str(ROOT), *_args(fake_pytorch, ndk_releases["r27c"]), env=user_env(),
                 timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert (work / "build" / "android" / "x86_64" / "build-info.json").is_file()
    assert (work / "build" / "src").is_dir() and not (ROOT / "build" / "src" / "pytorch-" ).exists()
