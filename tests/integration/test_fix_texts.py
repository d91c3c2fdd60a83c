"""A fix names options that exist: each task's message about a missing build-info is checked against that task's own
``--help`` (issue 24: check-compat and deploy-executorch suggested ``--binary``, which neither has), and the ExecuTorch
task names the lane its runner is built in."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli import invoke
from tests.executorch_support.device import write_pte_models
from tests.ndk_support.models import make_models_and_manifest

ROOT = Path(__file__).resolve().parents[2]


def _run(args, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
    env["CI"] = "1"
    return invoke(cwd, "--search-root", str(ROOT), *args, env=env)


def _options(text: str) -> set:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))


def _fix_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip().startswith("fix:")]
    assert lines, stderr
    return lines[0]


@pytest.fixture(scope="module")
def legacy_dir(tmp_path_factory) -> Path:
    cwd = tmp_path_factory.mktemp("legacy")
    make_models_and_manifest(cwd / "build" / "models")
    return cwd


@pytest.fixture(scope="module")
def pte_dir(tmp_path_factory) -> Path:
    cwd = tmp_path_factory.mktemp("pte")
    write_pte_models(cwd / "build" / "models")
    return cwd


@pytest.mark.parametrize("task,args,where", [
    ("check-compat", ["--build-info", "missing/build-info.json"], "legacy_dir"),
    ("deploy", ["--build-info", "missing/build-info.json"], "legacy_dir"),
    ("deploy-executorch", [], "pte_dir"),
    ("deploy-executorch", ["--build-info", "missing/build-info.json"], "pte_dir"),
])
def test_a_missing_build_info_is_fixed_with_options_the_task_has(task, args, where, request):
    cwd = request.getfixturevalue(where)
    r = _run([task, *args], cwd)
    assert r.returncode in (2, 5), r.stderr
    fix = _fix_line(r.stderr)
    declared = _options(_run([task, "--help"], cwd).stdout)
    assert declared, "the task's --help lists no options"
    named = _options(fix) - {"--lane"}  # `--lane` belongs to the build-android command the fix names
    assert named <= declared, f"{task}'s fix names {sorted(named - declared)}, which it does not have: {fix}"
    if task == "deploy-executorch":
        assert "invoke build-android --lane executorch" in fix, fix


def test_the_checker_sees_an_option_a_task_does_not_have(legacy_dir):
    """Negative control: the old shared text (``--binary`` for every reader) is caught for check-compat."""
    declared = _options(_run(["check-compat", "--help"], legacy_dir).stdout)
    old = "fix: run `invoke build-android` first (or pass the file with --build-info / the binary with --binary)"
    assert _options(old) - declared == {"--binary"}
