"""A signal between two steps of a write (issue 34): Ctrl-C or SIGTERM that comes while a temporary is created, a
directory swapped in or a model's factory still runs takes effect once the step is whole, so nothing is left
half-done: no ``.partial`` nobody removes, no output directory renamed away, no torch thread cut by the exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from toolchain import fsutil
from toolchain.fsutil import OWNER_MARKER, atomic_dir, atomic_path, signals_held

ROOT = Path(__file__).resolve().parents[2]


def _interrupt_self() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # Python runs the handler at the next bytecode: still inside the caller


def test_a_signal_inside_the_block_takes_effect_at_its_end():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            _interrupt_self()
            steps.append("after the signal")
        steps.append("after the block")  # never reached: the signal is raised as the block ends
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_while_the_temporary_is_created_leaves_no_partial(tmp_path, monkeypatch):
    real = tempfile.mkstemp

    def mkstemp_then_signal(*args, **kwargs):
        made = real(*args, **kwargs)
        _interrupt_self()  # the file exists, its name not yet kept by atomic_path
        return made

    monkeypatch.setattr(fsutil.tempfile, "mkstemp", mkstemp_then_signal)
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(tmp_path / "record.json") as tmp:
            tmp.write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_signal_between_the_two_renames_of_a_replaced_directory_keeps_the_old_one(tmp_path, monkeypatch):
    out = tmp_path / "models"
    with atomic_dir(out, stage="convert") as d:
        (d / "a.pt").write_text("first")
    real = os.replace

    def replace_then_signal(src, dst):
        real(src, dst)
        if Path(dst).name.endswith("old" + fsutil.PARTIAL_SUFFIX):
            _interrupt_self()  # the old directory moved aside, the new one not yet in its place

    monkeypatch.setattr(fsutil.os, "replace", replace_then_signal)
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(out, force=True, stage="convert") as d:
            (d / "a.pt").write_text("second")
    monkeypatch.undo()
    assert (out / "a.pt").read_text() == "second"  # the swap was whole when the signal took effect
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models"]  # no .partial directory beside it
    assert (out / OWNER_MARKER).is_file()


FACTORY = """
import time, torch
def slow():
    open({started!r}, "w").close()
    a = torch.randn(512, 512)
    until = time.monotonic() + 3  # the signal comes meanwhile
    while time.monotonic() < until:
        a = torch.tanh(a @ a)  # torch's C++ code running in the factory thread, without the GIL
    return torch.nn.Conv2d(3, 8, 3)
"""

RUN = """
import os, signal, sys, threading, time
sys.path.insert(0, {root!r})
from converter.models import ModelSpec, _call_factory
from pathlib import Path
spec = ModelSpec(name="slow", stem="slow", source="factory", factory_file=Path({path!r}), factory_name="slow", factory_sha256="0" * 64,
                 input_hw=(8, 8))
def interrupt():
    while not os.path.exists({started!r}):
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt, daemon=True).start()
try:
    _call_factory(spec)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_a_signal_while_the_factory_runs_waits_for_it_before_the_process_exits(tmp_path):
    started = str(tmp_path / "started")
    model = tmp_path / "slow_model.py"
    model.write_text(FACTORY.format(started=started))
    script = RUN.format(root=str(ROOT), path=str(model), started=started)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 130, (proc.returncode, proc.stdout, proc.stderr[-4000:])
    assert "terminate called" not in proc.stderr


AT_START = """
import os, signal, sys, threading, time
sys.path.insert(0, {root!r})
import torch
from converter.worker import Worker

def busy():
    a = torch.randn(512, 512)
    until = time.monotonic() + 2
    while time.monotonic() < until:
        a = torch.tanh(a @ a)  # torch's C++ code in the worker thread, without the GIL

real_start = threading.Thread.start
def start_then_signal(self):
    real_start(self)
    os.kill(os.getpid(), signal.SIGINT)  # the thread runs; the caller has no worker to wait for yet
threading.Thread.start = start_then_signal
try:
    Worker(busy, daemon=True)  # as the factory runs: nothing but the worker waits for it
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_a_signal_as_a_worker_starts_still_waits_for_its_torch_work(tmp_path):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(AT_START.format(root=str(ROOT)))],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 130, (proc.returncode, proc.stdout, proc.stderr[-4000:])
    assert "terminate called" not in proc.stderr


def test_a_signal_while_a_directory_is_created_leaves_no_partial(tmp_path, monkeypatch):
    real = tempfile.mkdtemp

    def mkdtemp_then_signal(*args, **kwargs):
        made = real(*args, **kwargs)
        _interrupt_self()  # the directory exists, atomic_dir does not know it yet
        return made

    monkeypatch.setattr(fsutil.tempfile, "mkdtemp", mkdtemp_then_signal)
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(tmp_path / "models", stage="convert") as d:
            (d / "a.pt").write_text("model")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


AFTER_THE_TASK = """
import os, signal, sys
from invoke import Exit
from workflow.run import terminable
with terminable("first"):
    pass
os.kill(os.getpid(), signal.SIG{sig})  # the first task has ended: its outcome stands
print("after the first task", flush=True)
try:
    with terminable("second"):
        print("the second task ran", flush=True)
except Exit as e:
    print(e.message, flush=True)
    sys.exit(e.code)
"""


@pytest.mark.parametrize("sig,code,said", [("INT", 130, "interrupted"), ("TERM", 143, "terminated by SIGTERM")])
def test_a_signal_after_a_task_ended_leaves_it_done_and_stops_the_next_one_before_it_starts(sig, code, said):
    """Invoke turns a KeyboardInterrupt after the task into a silent exit 1, SIGTERM's default into -15."""
    run = subprocess.run([sys.executable, "-c", AFTER_THE_TASK.format(sig=sig)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == code, run.stdout + run.stderr
    assert run.stdout.splitlines() == ["after the first task", f"torchdroid second: {said} (before it started)"]
    assert "Traceback" not in run.stderr
