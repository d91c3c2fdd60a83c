"""The fork server (tests/adversarial/forkrun.py) runs a case as a real ``invoke`` process would: same exit code,
stdout and stderr, same process state as seen from inside; and the comparison can see a difference."""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap

import pytest

from tests.adversarial import forkrun, harness
from tests.adversarial.forkrun import import_time_keys
from tests.adversarial.harness import INVOKE, Outcome, clean_env, fork_server, run_invoke

PROBE_TASKS = textwrap.dedent('''
    import json, os, signal, stat, sys, tempfile
    from invoke import task

    OWN = ("tasks", "toolchain", "converter", "deploy", "workflow", "appgen", "host_nnapi", "ndk_build")

    @task
    def probe(c):
        import __main__
        print(json.dumps({
            "argv": sys.argv, "orig_argv": sys.orig_argv, "path": sys.path, "cwd": os.getcwd(),
            "main": getattr(__main__, "__file__", None),
            "own modules": sorted(m for m in sys.modules if m.split(".")[0] in OWN),
            "signals": {str(int(s)): repr(signal.getsignal(s)) for s in signal.valid_signals()
                        if s not in (signal.SIGKILL, signal.SIGSTOP)},
            "tty": [os.isatty(i) for i in range(3)],
            "pipes": [stat.S_ISFIFO(os.fstat(i).st_mode) for i in range(3)],
            "streams": [(s.encoding, s.errors, s.line_buffering) for s in (sys.stdin, sys.stdout, sys.stderr)],
            "stdin": sys.stdin.read(),
            "tmp": tempfile.gettempdir(), "env": dict(os.environ), "fds": sorted(os.listdir("/proc/self/fd")),
        }, indent=1, sort_keys=True))

    @task
    def boom(c):
        raise RuntimeError("an uncaught error")

    @task
    def leave(c):
        print("partly done", flush=True)
        sys.exit("stopped: a message, exit 1")

    @task
    def torch_loaded(c):
        print("torch" in sys.modules)
''')


@pytest.fixture
def server():
    srv = fork_server()
    if srv is None:
        pytest.skip("TORCHDROID_TEST_FORK=0: no fork server in this run")
    return srv


def both(server, args, cwd, env=None, stdin=None):
    """(forked, fresh) outcomes of ``invoke ARGS`` from ``cwd``."""
    env = clean_env(env)
    forked = Outcome(*server.run(args, cwd, env, timeout=300, stdin=stdin))
    res = subprocess.run([INVOKE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
                         input=stdin)
    return forked, Outcome(res.returncode, res.stdout, res.stderr)


@pytest.fixture
def probe_root(tmp_path):
    root = tmp_path / "probe"
    root.mkdir()
    (root / "tasks.py").write_text(PROBE_TASKS)
    (tmp_path / "work").mkdir()
    return root


@pytest.mark.parametrize("stdin", [None, "typed by the user\n"])
def test_the_process_looks_the_same_from_inside(server, probe_root, stdin):
    forked, fresh = both(server, ["--search-root", str(probe_root), "probe"], probe_root.parent / "work",
                         env={"INVOKE_BUILD_DIR": "elsewhere"}, stdin=stdin)
    assert (forked.code, forked.err) == (fresh.code, fresh.err) == (0, "")
    got, want = json.loads(forked.out), json.loads(fresh.out)
    assert "tasks" in want["own modules"]
    for key in want:
        assert got[key] == want[key], key


@pytest.mark.parametrize("task", ["boom", "leave"])
def test_an_uncaught_error_and_a_sys_exit_message_end_the_same(server, probe_root, task):
    forked, fresh = both(server, ["--search-root", str(probe_root), task], probe_root.parent)
    assert forked == fresh
    assert fresh.code == 1
    if task == "boom":  # the traceback, frame for frame, from the console script on
        assert fresh.err.startswith(f'Traceback (most recent call last):\n  File "{INVOKE}"'), fresh.err
        assert fresh.err.rstrip().endswith("RuntimeError: an uncaught error")


def stamped(outcome: Outcome) -> Outcome:
    """The outcome with run-log names (task-YYYYMMDD-HHMMSS-PID.log: a time and a process id) made equal."""
    return Outcome(outcome.code, *(re.sub(r"\d{8}-\d{6}-\d+\.log", "STAMP.log", t) for t in (outcome.out, outcome.err)))


@pytest.mark.parametrize("args, code", [
    (["convert", "--nosuch"], 1),  # Invoke's own parse error (exit 1)
    (["report"], 5),  # our code's own failure, no traceback: nothing to report in a fresh directory
    (["convert", "--no-verify", "--weights", "random", "--calibration", "missing.png"], 2),  # imports torch first
    (["--list"], 0),  # success
])
def test_a_case_run_forked_or_fresh_gives_the_same_outcome(server, tmp_path, args, code):
    forked = stamped(run_invoke(args, tmp_path))
    fresh = stamped(run_invoke(args, tmp_path, fresh=True))
    assert forked == fresh
    assert fresh.code == code, fresh.text


def test_the_comparison_sees_a_difference_the_fork_makes(server, probe_root):
    """Control: a forked child has torch loaded before our code imports it, a fresh interpreter has not."""
    forked, fresh = both(server, ["--search-root", str(probe_root), "torch-loaded"], probe_root.parent)
    assert (forked.out, fresh.out) == ("True\n", "False\n")
    assert forked != fresh


def test_a_variable_read_at_import_sends_the_case_to_a_fresh_interpreter(server):
    env = clean_env()
    assert import_time_keys(env, server.env) == []
    for changed in ({"OMP_NUM_THREADS": "3"}, {"PYTHONWARNINGS": "error"}, {"LANG": "C"}, {"HOME": "/nowhere"},
                    {"TORCH_LOGS": "+dynamo"}, {"LC_ALL": "C"}):
        assert import_time_keys(clean_env(changed), server.env) == sorted(changed)
    ours = {"INVOKE_BUILD_DIR": "x", "PATH": "/bin", "TORCHDROID_JDK_DIRS": "/jdk", "ANDROID_HOME": "/sdk"}
    assert import_time_keys(clean_env(ours), server.env) == []  # read by our code, in the child



def test_a_start_up_variable_changed_in_this_process_gets_a_new_server(monkeypatch):
    """torch sets TORCHINDUCTOR_CACHE_DIR in the pytest process when an in-process test uses it; the cases inherit
    it, so the server must have been started with it (else every later case would fall back to a fresh run)."""
    made, closed = [], []

    class Stub:
        def __init__(self, script, env):
            self.env = env
            made.append(self)

        def close(self):
            closed.append(self)

    monkeypatch.setattr(forkrun, "ForkServer", Stub)
    monkeypatch.setattr(harness, "_SERVER", [])
    monkeypatch.delenv("TORCHDROID_TEST_FORK", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    first = fork_server()
    assert fork_server() is first and not closed
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_elsewhere")
    second = fork_server()
    assert closed == [first] and second is not first
    assert second.env["TORCHINDUCTOR_CACHE_DIR"] == "/tmp/torchinductor_elsewhere"
    monkeypatch.setenv("PATH", os.environ["PATH"] + os.pathsep + "/nowhere")  # read by the child: no new server
    assert fork_server() is second
