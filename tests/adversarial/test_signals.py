"""A signal at each stage boundary (issue 34, Must show): SIGINT and SIGTERM reach a real ``invoke convert`` (a tiny
model, then the host NNAPI check after it) at each boundary its run log names, generated from a signal-free run:
the progress lines of every stage (``torchdroid.progress``), each mode saved and the manifest written
(``converter.pipeline``), the host NNAPI library (``host_nnapi.*``).  The signal is sent the moment the boundary's
line is in the log (no sleeps), and each time: one clear message, exit 130/143, no traceback, the build and output
locks free, no child process left, no half-written file, the output directory whole or absent, the user's files
byte for byte."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import List, Optional

import pytest

from tests.adversarial.harness import (
    INVOKE,
    ROOT,
    TRACEBACK_MARKS,
    adversarial,
    clean_env,
    partial_files,
    snapshot,
)
from toolchain.fsutil import lock_path_for, ownership
from toolchain.records import MANIFEST_NAME, ConvertManifest

TINY = f"{ROOT / 'tests' / 'converter_support' / 'user_models.py'}:tiny"
BOUNDARY = re.compile(r"^\S+ \S+ \w+ +(torchdroid\.progress|converter\.pipeline|host_nnapi\.\w+): (.*)$")
MARK = "TORCHDROID_SIGNAL_CASE"  # in the run's environment: every process it started inherits it
DONE = "results: m/verify.json"  # the run's last line: a signal after the last boundary may come after it
SAID = {signal.SIGINT: ("interrupted", 130), signal.SIGTERM: ("terminated by SIGTERM", 143)}


def _start(cwd: Path, case: str) -> subprocess.Popen:
    argv = [INVOKE, "--search-root", str(ROOT), "convert", "--model", TINY, "--weights", "random",
            "--quant", "none,core", "--out", "m"]
    env = clean_env({"INVOKE_CONVERT_CALIBRATION_COUNT": "8", MARK: case,  # the host library built by every run:
                     "TORCHDROID_HOST_NNAPI_CACHE": str(cwd / "cache")})  # the same boundaries each time, its compiler
                                                                           # and temporaries among the checked ones
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _boundaries(cwd: Path) -> List[str]:
    """The boundary lines of the run logs under ``cwd`` so far, in the order the run wrote them."""
    found = []
    logs = cwd / "build" / "logs"
    for log in sorted(logs.glob("*.log"), key=lambda p: (p.stat().st_mtime_ns, p.name)) if logs.is_dir() else []:
        for line in log.read_text(errors="replace").splitlines():
            m = BOUNDARY.match(line)
            if m:
                found.append(f"{m.group(1)}: {m.group(2)}")
    return found


def _user_files(cwd: Path) -> dict:
    (cwd / "build").mkdir()
    (cwd / "notes.txt").write_text("the user's notes")
    (cwd / "build" / "NOTES.txt").write_text("the user's notes in the build directory")
    return snapshot([cwd / "notes.txt", cwd / "build" / "NOTES.txt"])


def _children(case: str) -> List[str]:
    """Processes still running that the case's run started (they carry its mark in their environment)."""
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"{MARK}={case}".encode() in env.split(b"\0"):
            left.append(f"{pid} {cmd}")
    return left


def _free(lock: Path) -> bool:
    if not lock.exists():
        return True
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _signal_at(cwd: Path, k: int, sig: int) -> tuple:
    """Run, send ``sig`` the moment the ``k``-th boundary line is in the log; (exit code, output, boundary)."""
    case = uuid.uuid4().hex
    proc = _start(cwd, case)
    deadline, at = time.monotonic() + 300, None
    try:
        while at is None:
            ended = proc.poll() is not None  # asked before the log is read: an ended run's log is complete
            seen = _boundaries(cwd)
            if len(seen) > k:
                at = seen[k]
                break
            assert not ended, f"the run ended before boundary {k}: {proc.communicate()[0][-3000:]}"
            assert time.monotonic() < deadline, f"boundary {k} never came"
            time.sleep(0.01)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 10  # the run's exit: its children were stopped before it
    while _children(case) and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc.returncode, out, at, _children(case)


def _check_outputs(cwd: Path) -> Optional[str]:
    """None when the output directory is absent or whole: every file its manifest lists, unchanged; its
    per-file ownership names no file torchdroid half-wrote."""
    out = cwd / "m"
    if (out / MANIFEST_NAME).is_file():
        for f in ConvertManifest.load(out).files:
            f.check_hash()
    found = ownership(out)
    if found is not None and found.kept:
        return f"files in {out} that are not torchdroid's whole outputs: {found.kept_lines()}"
    left = partial_files(cwd)
    return f"half-written files left: {left}" if left else None


@pytest.fixture(scope="module")
def boundaries(tmp_path_factory) -> List[str]:
    """The boundary lines of a signal-free run (the points each case stops the run at)."""
    cwd = tmp_path_factory.mktemp("signal-free")
    proc = _start(cwd, uuid.uuid4().hex)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    found = _boundaries(cwd)
    assert len(found) >= 6, found  # loading, calibration, the modes, the manifest, the host check's models
    return found


@pytest.mark.slow
@adversarial("signals", "SIGINT/SIGTERM at each stage boundary")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_at_each_stage_boundary_stops_the_run_cleanly(tmp_path, boundaries, sig):
    said, code = SAID[sig]
    bad = []
    for k in range(len(boundaries)):
        cwd = tmp_path / f"at-{k}"
        cwd.mkdir()
        kept = _user_files(cwd)
        rc, out, at, children = _signal_at(cwd, k, sig)
        where = f"{sig.name} at boundary {k} ({at})"
        finished = rc == 0 and DONE in out and said.lower() not in out.lower()  # the signal came as the run exited
        problems = ["" if rc == code or finished else f"exit {rc}, wanted {code}",
                    "" if finished or out.lower().count(said.lower()) == 1 else f"not one {said!r} message",
                    "a traceback" if any(m in out for m in TRACEBACK_MARKS) else "",
                    "" if _free(cwd / "build" / ".torchdroid-build.lock") else "the build lock is still held",
                    "" if _free(lock_path_for(cwd / "m")) else "the output lock is still held",
                    f"child processes left: {children}" if children else "",
                    "" if snapshot(kept.keys()) == kept else "a user file changed or was lost",
                    _check_outputs(cwd) or ""]
        problems = [p for p in problems if p]
        if problems:
            bad.append(f"{where}: {'; '.join(problems)}\n    {out.strip()[-600:]}")
    assert not bad, "\n".join(bad)
