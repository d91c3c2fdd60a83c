"""One writer per build directory across tasks (issue 34 item 2): while one task writes under a build directory
(here a process holding its lock as a running deploy does), clean, convert, bench, make-app, report and deploy are
refused with who holds it ("busy: ... invoke deploy pid N since T") and change nothing; a lock file left by a run
that died is taken over."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.adversarial.harness import ROOT, adversarial, assert_clean, run_invoke, snapshot
from tests.adversarial.test_fs_faults import _results
from toolchain.fsutil import BUILD_LOCK

HOLD = ("import sys, time\nfrom toolchain.fsutil import build_lock\n"
        "with build_lock(sys.argv[1], 'deploy'):\n    print('held', flush=True)\n    time.sleep(60)\n")


@pytest.fixture
def deploying(tmp_path):
    """A build directory with a deploy history, and a process holding its lock as a running deploy does."""
    (tmp_path / "history").mkdir()
    build = tmp_path / "build"
    build.mkdir()
    _results(tmp_path / "history").rename(build / "results")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(build)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


@adversarial("clean", "concurrent run: another task writes in the build directory")
@pytest.mark.parametrize("args", [["clean", "--what", "results"], ["report"],
                                  ["bench", "--models", "build/results", "--iter", "1"],
                                  ["make-app", "--out", "build/app2"]], ids=lambda a: a[0])
def test_a_task_is_refused_while_another_writes_in_the_build_directory(tmp_path, deploying, args):
    kept = snapshot([tmp_path / "build"])
    out = run_invoke(args, tmp_path, {"MPLBACKEND": "Agg"})
    assert_clean(out, "usage", mentions=["busy", f"invoke deploy pid {deploying.pid} since"], kept=kept,
                 root=tmp_path)
    assert sorted(p.name for p in (tmp_path / "build" / "results").iterdir() if not p.name.startswith(".")) == \
        sorted(kept_name.name for kept_name in kept if kept_name.parent.name == "results"
               and not kept_name.name.startswith("."))


@adversarial("clean", "stale lock: its run died")
def test_a_lock_file_of_a_run_that_died_is_taken_over(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    (build / BUILD_LOCK).write_text(json.dumps({"pid": 999999, "command": "invoke deploy", "since": "yesterday"}))
    out = run_invoke(["clean", "--what", "logs"], tmp_path)
    assert_clean(out, "ok", needs_fix=False, root=tmp_path)
