"""The virtual phones' warm python (tests/warm_python.py) runs a script as a cold ``python SCRIPT ARGS`` would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import warm_python as warm

WRAPPER = Path(warm.__file__).with_name("warm-python")
SCRIPT = """\
import os, sys
import json
print("out", sys.argv[1:], os.getcwd(), os.environ.get("ANSWER"), sys.stdin.read().strip())
print("err", getattr(json, "touched", False), file=sys.stderr)
json.touched = True  # a later call must not see it: each call forks from the server's state
if sys.argv[1] == "raise":
    raise RuntimeError("boom")
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A warm python of this test only (its own directory), preloading only json (no torch: quick)."""
    monkeypatch.setenv(warm.PRELOAD_ENV, "json")
    saved = {k: os.environ.get(k) for k in (warm.ENV, warm.OWNER)}
    warm.enable(str(tmp_path / "warm"))
    yield tmp_path / "warm"
    warm.disable()
    for k, v in saved.items():
        if v is not None:
            os.environ[k] = v


def _run(tmp_path, *args, **env):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return subprocess.run([str(WRAPPER), str(script), *args], input="from stdin", capture_output=True, text=True,
                          cwd=tmp_path, env=dict(os.environ, VDEV_HOST_PYTHON=sys.executable, **env), timeout=120)


def test_a_script_gets_its_arguments_streams_directory_and_environment_and_its_exit_code(tmp_path, server):
    first = _run(tmp_path, "3", ANSWER="42")
    assert first.returncode == 3, first.stderr
    assert first.stdout == f"out ['3'] {tmp_path} 42 from stdin\n" and first.stderr == "err False\n"
    again = _run(tmp_path, "0", ANSWER="7")
    assert again.returncode == 0 and again.stdout.split()[3] == "7"
    assert again.stderr == "err False\n"  # the first call's change to a module stayed in its own process
    crashed = _run(tmp_path, "raise")
    assert crashed.returncode == 1 and "RuntimeError: boom" in crashed.stderr and "Traceback" in crashed.stderr


def test_a_server_that_cannot_start_is_an_error_not_a_cold_python(tmp_path, server):
    (server / "sock").mkdir()  # the socket's path is taken: the server dies at bind, the client says so
    start = time.monotonic()
    r = _run(tmp_path, "0")
    assert r.returncode == 127 and "no server answers" in r.stderr and "out" not in r.stdout, r.stderr
    assert time.monotonic() - start < 60


def test_a_python_with_options_is_the_host_python(tmp_path, server):
    """The phone's tools run `$VDEV_PYTHON -I -S TOOL` (tests/virtual_device/vbin): that is no script to fork."""
    r = subprocess.run([str(WRAPPER), "-I", "-S", "-c", "import sys; print(sys.flags.isolated, sys.argv[1:])", "x"],
                       capture_output=True, text=True, env=dict(os.environ, VDEV_HOST_PYTHON=sys.executable))
    assert r.returncode == 0 and r.stdout == "1 ['x']\n", r.stderr
    assert not (server / "sock").exists()  # no server was needed
