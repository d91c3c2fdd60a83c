"""A file system that fails under a running task (issue 21 item 7): generated, not listed.

Through the fault-injection layer (tests/adversarial/fsfault_invoke.py) the N-th `os.replace` or `os.fsync` of a
real `invoke` process fails with a generated errno: a full disk or quota, a read-only remount, a permission
change, a failing disk.  Whichever write meets it, the task ends with one message and exit 2, no traceback, no
partial file, and what the user had (the results and what an earlier report wrote) is unchanged or whole.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.adversarial.harness import ROOT, Outcome, adversarial, assert_clean, clean_env, run_invoke, snapshot
from tests.deploy_support.report_rows import manifest, row
from toolchain.records import APP_INFO_NAME

ERRNOS = ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "EIO")


def _results(root: Path) -> Path:
    from deploy.results import ResultStore

    models = manifest(root)
    results = root / "results"
    results.mkdir()
    rows = [row("A", "cpu", "ok", 12.0), row("A", "nnapi", "ok", 9.0), row("B", "cpu", "ok", 20.0)]
    ResultStore(results / "results.sqlite").add_run("2026-11-23T10:00:00+00:00", "p", "abc",
                                                    {"models": str(models)}, rows)
    return results


def _invoke(cwd: Path, fault: str, *args: str, fresh: bool = False) -> Outcome:
    """``invoke ARGS`` with the fault layer: a child of the fork server (which installs it from the variable, as
    tests/adversarial/fsfault_invoke.py does), or with ``fresh`` a new ``python -m tests.adversarial.fsfault_invoke``."""
    if not fresh:
        return run_invoke(args, cwd, {"TORCHDROID_FS_FAULT": fault, "MPLBACKEND": "Agg"}, timeout=300)
    env = clean_env({"TORCHDROID_FS_FAULT": fault, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"})
    res = subprocess.run([sys.executable, "-m", "tests.adversarial.fsfault_invoke", "--search-root", str(ROOT),
                          *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    return Outcome(res.returncode, res.stdout, res.stderr)


def _kind(out: Outcome) -> str:
    """``ok`` when the fault fell after the task's last write (the files are still judged), else one clean message."""
    return "ok" if out.code == 0 else "usage"


@pytest.mark.parametrize("fresh", [False, True], ids=["forked", "fresh process"])
def test_the_layer_fails_the_call_it_is_told_to(tmp_path, fresh):
    """The control: without a fault `report` succeeds; with one on its first own replace the process sees it, in a
    forked child as in a fresh process.  The run's first replace is its log's entry in build/logs' manifest (the
    directory is marked by the first run), which never fails a run (toolchain/logs._record_log): report's own first
    write is the second."""
    results = _results(tmp_path)
    assert _invoke(tmp_path, "", "report", "--results", str(results), fresh=fresh).code == 0
    out = _invoke(tmp_path, "replace:2:EIO", "report", "--results", str(results), fresh=fresh)
    assert out.code == 2 and "input/output error" in out.text, out.text


@pytest.mark.slow
@adversarial("environment", "file system fault under a running task (generated: call, N, errno)")
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=st.sampled_from(("replace", "fsync")), nth=st.integers(1, 8), err=st.sampled_from(ERRNOS))
def test_a_failing_write_in_report_is_one_message_and_loses_nothing(call, nth, err):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results = _results(root)
        first = _invoke(root, "", "report", "--results", str(results))  # what the user has: an earlier report
        assert first.code == 0, first.text
        kept = snapshot([results])
        out = _invoke(root, f"{call}:{nth}:{err}", "report", "--results", str(results))
        assert_clean(out, _kind(out), root=root)
        now = snapshot([results])  # each file is the earlier one or a whole new one, never gone
        assert not [path for path in kept if path not in now], "files of the earlier report were lost"


@adversarial("environment", "file system fault under a running task (generated: call, N, errno)")
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=st.sampled_from(("replace", "fsync")), nth=st.integers(1, 12), err=st.sampled_from(ERRNOS))
def test_a_failing_write_in_make_app_is_one_message_and_loses_nothing(call, nth, err):
    """make-app writes a whole Android project (one directory put in place at the end) from the user's models."""
    import shutil

    from tests.appgen_support.models import tiny_models

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(tiny_models(), root / "build" / "models")
        kept = snapshot([root / "build" / "models"])
        out = _invoke(root, f"{call}:{nth}:{err}", "make-app", "--model", "quant_full")
        assert_clean(out, _kind(out), kept=kept, root=root)  # the user's models, byte for byte
        app = root / "build" / "app"  # no app, or a whole one: its record is written last
        assert not app.exists() or (app / APP_INFO_NAME).is_file()
