"""Every child process in its own process group, stopped with all it started when ``run`` ends (issue 34 item 5):
on success, on a failure, on Ctrl-C/SIGTERM (a KeyboardInterrupt in the main thread) and a child that ignores
SIGTERM (SIGKILL after the grace)."""

from __future__ import annotations

import os
import time

import pytest

from toolchain import runner
from toolchain.errors import ToolFailed

# a background sleep that has let go of the output pipe (else run() would wait for it), its pid printed
BACKGROUND = "sleep 300 >/dev/null 2>&1 & echo $!"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is not running
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def _gone(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.parametrize("script", [BACKGROUND, BACKGROUND + "; exit 3"], ids=["success", "failure"])
def test_what_a_child_started_in_the_background_ends_with_the_run(script):
    pids = []
    try:
        runner.run(["sh", "-c", script], on_line=lambda line: pids.append(int(line)))
    except ToolFailed:
        pass
    assert pids and _gone(pids[0]), "the background child outlived the run"


@pytest.mark.parametrize("trap", ["", "trap '' TERM; "], ids=["stops-on-term", "ignores-term"])
def test_an_interrupt_stops_the_child_and_everything_it_started(trap, monkeypatch):
    monkeypatch.setattr(runner, "STOP_GRACE", 0.5)
    pids = []

    def interrupt(line: str) -> None:
        pids.append(int(line))
        raise KeyboardInterrupt  # what Ctrl-C (or workflow.run's SIGTERM handler) raises in the main thread

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        runner.run(["sh", "-c", f"{trap}sleep 300 >/dev/null 2>&1 & echo $!; sleep 300"], on_line=interrupt)
    assert time.monotonic() - start < 10
    assert pids and _gone(pids[0]), "a child survived the interrupted run"


def test_a_signal_while_the_child_starts_still_stops_it(monkeypatch):
    """Ctrl-C (or SIGTERM) inside ``Popen()`` itself, once the child runs: it is stopped like any other child (it
    was left running, writing after the task, e.g. the compiler of the host NNAPI library into its temporary)."""
    import signal
    import subprocess

    real = subprocess.Popen
    started = []

    def popen_then_signal(*args, **kwargs):
        proc = real(*args, **kwargs)
        started.append(proc)
        os.kill(os.getpid(), signal.SIGINT)  # handled before Popen() returns to the runner
        return proc

    monkeypatch.setattr(runner.subprocess, "Popen", popen_then_signal)
    with pytest.raises(KeyboardInterrupt):
        runner.run(["sleep", "300"])
    assert started and _gone(started[0].pid), "the child started while the signal came is still running"
    started[0].wait()
