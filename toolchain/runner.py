"""The one helper that runs every subprocess.

argv lists only (never ``shell=True``), environment overrides on top of the
current environment, every output line streamed to a log file, and one typed
error (:class:`~toolchain.errors.ToolFailed`) carrying the log path and the last
lines of output on failure.

Each child runs in its own process group (a new session: Ctrl-C at the terminal
reaches torchdroid only, which decides).  Whenever :func:`run` returns or raises
(success, a failure, a timeout, Ctrl-C, SIGTERM) the whole group is stopped:
SIGTERM, then SIGKILL after ``STOP_GRACE`` seconds, so nothing the tool started
(a build script's cmake, make and compilers) goes on writing after the task,
and a lock the caller holds is released only once they are gone.  A daemon that
leaves the group on purpose (``adb start-server``: setsid) is not touched.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence, Union

from .errors import ToolFailed, ToolNotFound
from .fsutil import open_append, signals_held

log = logging.getLogger(__name__)

PathLike = Union[str, os.PathLike]
TAIL_LINES = 25
STOP_GRACE = 5.0  # seconds between SIGTERM and SIGKILL to a child's process group


@dataclass(frozen=True)
class RunResult:
    argv: tuple
    returncode: int
    output: str
    seconds: float
    log_path: Optional[Path]

    @property
    def lines(self) -> list:
        return self.output.splitlines()


def quote_argv(argv: Sequence[PathLike]) -> str:
    """A copy-pasteable shell rendering of ``argv`` (for logs and messages)."""
    return " ".join(shlex.quote(str(a)) for a in argv)


def run(
    argv: Sequence[PathLike],
    *,
    cwd: Optional[PathLike] = None,
    env: Optional[Mapping[str, str]] = None,
    replace_env: bool = False,
    log_path: Optional[PathLike] = None,
    on_line: Optional[Callable[[str], None]] = None,
    timeout: Optional[float] = None,
    check: bool = True,
    input: Optional[str] = None,
    what: Optional[str] = None,
    hint: Optional[Callable[[str], Optional[str]]] = None,
    keep_output: bool = True,
) -> RunResult:
    """Run ``argv``; stream its combined output to ``log_path`` and ``on_line``.

    ``env`` entries override the current environment (or replace it with
    ``replace_env``); a value of ``None`` removes a variable.  On a non-zero exit
    (with ``check``) or a timeout, raise :class:`ToolFailed` naming the command,
    the last lines, the log and, where ``hint(output)`` recognises the failure,
    a remedy.  A missing executable raises :class:`ToolNotFound`.
    """
    argv = [str(a) for a in argv]
    if not argv:
        raise ValueError("run() needs a non-empty argv")
    what = what or f"`{Path(argv[0]).name}`"
    log_path = Path(log_path) if log_path is not None else None
    log_file = _open_log(log_path, argv, cwd)
    log.debug("run: %s (cwd=%s)", quote_argv(argv), cwd)
    start = time.monotonic()
    proc: Optional[subprocess.Popen] = None
    try:
        try:
            with signals_held():  # the child exists only once the stop below can reach it (a signal inside Popen()
                proc = _start(argv, cwd, _merged_env(env, replace_env), input is not None, what)  # left it running)
            if input is not None:
                _feed_in_background(proc, input)
            with _kill_after(proc, timeout) as timed_out:
                captured = _drain(proc, log_file, on_line, keep_output)
        finally:
            if proc is not None:
                stop_group(proc)
        seconds = time.monotonic() - start
        if log_file:
            log_file.write(f"# exit code {proc.returncode} after {seconds:.1f}s\n")
            log_file.flush()
        _raise_for_outcome(proc.returncode, timed_out.is_set(), captured, argv, what, timeout, check, hint,
                           log_path)
        return RunResult(tuple(argv), proc.returncode, "\n".join(captured.kept), seconds, log_path)
    finally:
        if log_file:
            log_file.close()


@dataclass
class _Captured:
    """What a run printed: every line (when kept) and the last TAIL_LINES for messages."""

    kept: list
    tail: collections.deque

    def for_hint(self) -> str:
        """All of the output when it was kept, else its tail (``keep_output=False``)."""
        return "\n".join(self.kept or self.tail)


def _merged_env(env: Optional[Mapping[str, str]], replace_env: bool) -> dict:
    full_env = {} if replace_env else dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = str(value)
    return full_env


def _open_log(log_path: Optional[Path], argv: list, cwd: Optional[PathLike]):
    if log_path is None:
        return None
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_file = open_append(log_path)  # never through a link planted at the log's name
    log_file.write(f"\n$ {quote_argv(argv)}\n")
    if cwd:
        log_file.write(f"# cwd: {cwd}\n")
    log_file.flush()
    return log_file


def _start(argv: list, cwd: Optional[PathLike], env: dict, with_input: bool, what: str) -> subprocess.Popen:
    try:
        return subprocess.Popen(
            argv,
            cwd=str(cwd) if cwd else None,
            env=env,
            stdin=subprocess.PIPE if with_input else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            start_new_session=True,  # its own process group: stop_group reaches everything it starts
        )
    except (FileNotFoundError, PermissionError) as e:
        missing = isinstance(e, FileNotFoundError)
        raise ToolNotFound(
            f"{what} could not be started: {argv[0]} {'was not found' if missing else 'is not executable'}",
            cause=str(e),
            remedy=f"install {Path(argv[0]).name} or put it on PATH" if missing else f"chmod +x {shlex.quote(argv[0])}",
        ) from e


def _feed_in_background(proc: subprocess.Popen, text: str) -> None:
    def _feed() -> None:
        try:
            proc.stdin.write(text)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    threading.Thread(target=_feed, daemon=True).start()


@contextlib.contextmanager
def _kill_after(proc: subprocess.Popen, timeout: Optional[float]):
    """Kill ``proc`` when ``timeout`` seconds pass; yields the event that says it happened."""
    timed_out = threading.Event()
    timer = None
    if timeout is not None:
        def _kill() -> None:
            timed_out.set()
            _signal_group(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, _kill)
        timer.daemon = True
        timer.start()
    try:
        yield timed_out
    finally:
        if timer:
            timer.cancel()


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the process group ``pgid``; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its user (setuid): not ours to stop
        return False
    return True


def stop_group(proc: subprocess.Popen, grace: Optional[float] = None) -> None:
    """Stop ``proc`` and every process of its group: SIGTERM, SIGKILL to what is left after ``grace`` seconds;
    ``proc`` reaped.  Nothing to do (one failed ``killpg``) when the child and all it started have ended."""
    if not _signal_group(proc.pid, signal.SIGTERM):
        proc.wait()
        return
    deadline = time.monotonic() + (STOP_GRACE if grace is None else grace)
    try:
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader: a zombie would count as a member of the group
            if not _signal_group(proc.pid, 0):
                break
            time.sleep(0.05)
        else:
            log.debug("process group %d still running after SIGTERM: SIGKILL", proc.pid)
            _signal_group(proc.pid, signal.SIGKILL)
    except BaseException:  # a second Ctrl-C or SIGTERM while waiting: no more grace
        _signal_group(proc.pid, signal.SIGKILL)
        raise
    finally:
        proc.wait()


def _drain(proc: subprocess.Popen, log_file, on_line, keep_output: bool) -> _Captured:
    captured = _Captured(kept=[], tail=collections.deque(maxlen=TAIL_LINES))
    for raw in proc.stdout:
        line = raw.rstrip("\n")
        captured.tail.append(line)
        if keep_output:
            captured.kept.append(line)
        if log_file:
            log_file.write(raw if raw.endswith("\n") else raw + "\n")
        if on_line:
            on_line(line)
    proc.wait()
    return captured


def _raise_for_outcome(returncode: int, timed_out: bool, captured: _Captured, argv: list, what: str,
                       timeout: Optional[float], check: bool, hint, log_path: Optional[Path]) -> None:
    if timed_out:
        raise ToolFailed(
            f"{what} did not finish within {timeout:g}s and was stopped",
            cause=f"command: {quote_argv(argv)}",
            tail=list(captured.tail),
            log_path=log_path,
            remedy="raise the timeout in the configuration or look at the log for where it hung",
        )
    if check and returncode != 0:
        remedy = hint(captured.for_hint()) if hint else None
        raise ToolFailed(
            f"{what} failed with exit code {returncode}",
            cause=f"command: {quote_argv(argv)}",
            tail=list(captured.tail),
            log_path=log_path,
            remedy=remedy,
        )
