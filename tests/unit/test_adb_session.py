"""`invoke all`'s adb server: when it must start one and no port was asked for, it uses a port of its own, never the
shared 5037, and puts everything back (issue 24 item 9)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from workflow.adb_session import adb_server_for_run, answers

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")


def test_a_server_all_starts_has_a_port_of_its_own_and_is_stopped(monkeypatch):
    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT", raising=False)
    monkeypatch.delenv("ANDROID_ADB_SERVER_ADDRESS", raising=False)
    if answers("127.0.0.1", 5037):
        pytest.skip("an adb server already runs on 5037 here (all would use it)")
    said = []
    with adb_server_for_run(None, None, said.append) as started:
        port = int(os.environ["ANDROID_ADB_SERVER_PORT"])
        assert started and port != 5037 and answers("127.0.0.1", port)
        assert not answers("127.0.0.1", 5037)  # the shared port stays free for the user's own server
    assert "ANDROID_ADB_SERVER_PORT" not in os.environ
    assert not answers("127.0.0.1", port)
    assert f"port {port}" in said[0] and f"port {port}" in said[-1]


@pytest.mark.parametrize("var,value", [("ANDROID_ADB_SERVER_PORT", "50x7"), ("ADB_SERVER_SOCKET", "tcp:localhost:port"),
                                       ("ANDROID_ADB_SERVER_ADDRESS", "bad host!")])
def test_the_server_is_resolved_as_deploy_resolves_it(monkeypatch, var, value):
    """One resolver (deploy.adb.default_address): a bad variable is a usage error, never a silent 5037."""
    from toolchain.errors import UsageError

    monkeypatch.setenv(var, value)
    with pytest.raises(UsageError, match=var):
        with adb_server_for_run(None, None, print):
            pass


def test_with_the_users_servers_no_adb_variable_is_read(monkeypatch):
    """deploy.servers given: deploy ignores the adb variables, and so does all's server policy (nothing started)."""
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", "50x7")
    with adb_server_for_run(None, None, print, servers=("127.0.0.1:5037",)) as started:
        assert started is False


def test_a_signal_while_the_server_starts_still_stops_it(monkeypatch):
    """SIGTERM/Ctrl-C can land between `adb start-server` and the run's own start (seen under load: the server was
    left running after a terminated `invoke all`); whatever answers on the port this run started is stopped."""
    import workflow.adb_session as session

    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT", raising=False)
    monkeypatch.delenv("ANDROID_ADB_SERVER_ADDRESS", raising=False)
    if answers("127.0.0.1", 5037):
        pytest.skip("an adb server already runs on 5037 here (all would use it)")
    calls = {"n": 0}

    listening = session.listening

    def interrupted_once_started(host, port, timeout=2.0):
        calls["n"] += 1
        if calls["n"] == 2:  # 1: is one running? (no)  2: did ours start? -> the signal lands here
            calls["port"] = port
            raise KeyboardInterrupt
        return listening(host, port, timeout)

    monkeypatch.setattr(session, "listening", interrupted_once_started)
    try:
        with pytest.raises(KeyboardInterrupt):
            with adb_server_for_run(None, None, print):
                pass
        assert "port" in calls and not answers("127.0.0.1", calls["port"]), "the server this run started still runs"
    finally:
        if "port" in calls:  # never leave a server behind, even when the check fails
            subprocess.run(["adb", "-P", str(calls["port"]), "kill-server"], capture_output=True, check=False)
    assert "ANDROID_ADB_SERVER_PORT" not in os.environ


def _daemon_pid(port: int) -> int:
    """The adb server started for ``port`` (its command line: ``adb -L tcp:PORT fork-server server ...``)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if b"fork-server" in argv and f"tcp:{port}".encode() in argv:
                return int(entry)
    raise AssertionError(f"no adb server process for port {port}")


def test_a_server_too_slow_to_answer_under_load_is_still_stopped(monkeypatch):
    """The flaky `test_sigterm_to_all_stops_the_adb_server_it_started`: on a loaded machine the server this run just
    started may not reply to a version query within answers()' 2 s, and the run then neither called it its own nor
    stopped it (left running after `invoke all`).  Here the server is not scheduled for 4 s right after
    `adb start-server` (SIGSTOP, then SIGCONT): it is still this run's and is stopped at the end."""
    import signal
    import threading

    import toolchain.runner

    from workflow.adb_session import listening

    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT", raising=False)
    monkeypatch.delenv("ANDROID_ADB_SERVER_ADDRESS", raising=False)
    if answers("127.0.0.1", 5037):
        pytest.skip("an adb server already runs on 5037 here (all would use it)")
    real_run, found = toolchain.runner.run, {}

    def run_then_stall_the_server(argv, **kw):
        result = real_run(argv, **kw)
        if "start-server" in argv:
            found["port"] = int(argv[argv.index("-P") + 1])
            pid = _daemon_pid(found["port"])
            os.kill(pid, signal.SIGSTOP)
            threading.Timer(4.0, os.kill, (pid, signal.SIGCONT)).start()
        return result

    monkeypatch.setattr(toolchain.runner, "run", run_then_stall_the_server)
    try:
        with adb_server_for_run(None, None, print) as started:
            assert started, "the server this run started was not called its own"
        assert not listening("127.0.0.1", found["port"]), "the server this run started still runs"
    finally:
        if "port" in found:
            subprocess.run(["adb", "-P", str(found["port"]), "kill-server"], capture_output=True, check=False,
                           timeout=60)
