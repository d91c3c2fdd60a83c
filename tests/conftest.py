"""Shared fixtures.  Test-only substitutes for the physical boundary live under tests/."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("TORCHDROID_TEST", "1")
# The commands the tests start print to a pipe: the width a user's log gets (toolchain/console.PIPE_WIDTH), not
# the width of whatever terminal or CI runner started pytest (a CI with COLUMNS=80 wrapped a table title the
# tests read).  A test about widths sets COLUMNS itself.
os.environ.pop("COLUMNS", None)
# Ctrl-C tests send SIGINT to the commands they start.  A test run started in the background (`cmd &` in a
# script) has SIGINT ignored, which its children inherit and Python then leaves ignored: a handler here (reset to
# the default in every command the tests start, as from a terminal).  SIGHUP is left as it is (nohup).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


_SHARED_MADE = []


def pytest_configure(config):
    """The run's directory for artefacts built once and shared by the worker processes (tests/shared.py); the
    adversarial table's plugin (tests/adversarial/table.py)."""
    from tests.adversarial import table
    from tests.shared import ENV, make_run_dir

    if not config.pluginmanager.is_registered(table):
        config.pluginmanager.register(table, "torchdroid-adversarial-table")

    if not hasattr(config, "workerinput") and not os.environ.get(ENV):
        _SHARED_MADE.append(make_run_dir())


def pytest_unconfigure(config):  # noqa: ARG001
    import shutil

    for path in _SHARED_MADE:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def signal_handlers_put_back():
    """A task run in this process leaves its after-the-task handlers (workflow.run.terminable), as the program's end
    would: the next test gets Ctrl-C, SIGTERM and SIGHUP as they were before."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, handler in before.items():
        if handler is not None:
            signal.signal(s, handler)


@pytest.fixture(scope="session", autouse=True)
def warm_python():
    """Python scripts the virtual phones run (fixture runners, output printers, the NNAPI runtime log) fork from one
    server of this process that imported torch and ExecuTorch once, started when the first one is needed
    (tests/warm_python.py)."""
    from tests import warm_python as warm
    from tests.shared import run_dir

    warm.enable(str(run_dir() / f"warm-python-{os.getpid()}"))
    yield
    warm.disable()


OPT_IN = ("ndk", "device", "network")  # need the real thing: run only when `-m` names them (./run test -m ndk)


def pytest_collection_modifyitems(config, items):
    """Tests that need a real NDK, phone or internet are left out unless the -m expression names their marker, so
    `-m "not slow"` (the quick loop) still leaves them out."""
    wanted = config.getoption("markexpr") or ""
    keep, drop = [], []
    for item in items:
        opt_in = [m for m in OPT_IN if item.get_closest_marker(m) is not None]
        (drop if opt_in and not any(m in wanted for m in opt_in) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
