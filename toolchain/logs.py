"""Logging: a debug log file per run under the build directory, short console output."""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterator, List, Optional

from .layout import Layout

LOG_NAME = re.compile(r"(.+)-\d{8}-\d{6}-\d+\.log")  # <task>-<stamp>-<pid>.log: the name of every run log
CONSOLE_FORMAT = "%(message)s"
FILE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
_HANDLER_TAG = "_torchdroid_handler"


_terminal: Optional[Any] = None  # the run's rich Console on the terminal (a dup of fd 2 as it was at the start)
_decided = False  # setup_logging decided whether this run has a terminal
_redirected = 0  # native_output_to_log blocks open: fd 2 is the run log, not the terminal


def interactive() -> bool:
    """True when this run draws progress bars: stderr was a terminal when the run started (decided once, before any
    block sent native output to the log) and we are not in CI."""
    if _decided:
        return _terminal is not None
    return sys.stderr.isatty() and not os.environ.get("CI")


def terminal() -> Optional[Any]:
    """The rich Console every bar and console log line of this run draws on, or None without a terminal.  It
    writes to a duplicate of the terminal's descriptor, so a bar keeps drawing while fd 2 goes to the run log."""
    return _terminal if interactive() else None


def _decide_terminal() -> None:
    """Whether this run has a terminal, decided at its start (not inside a block that redirected fd 2)."""
    global _terminal, _decided
    if _redirected:
        return
    if _terminal is not None:
        _terminal.file.close()
    _terminal, _decided = None, True
    if sys.stderr.isatty() and not os.environ.get("CI"):
        from rich.console import Console

        sys.stderr.flush()
        stream = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
        _terminal = Console(file=stream, highlight=False)


class _LogFile(logging.FileHandler):
    """The run's log file, never written through a link planted at its name (toolchain/fsutil.py)."""

    def _open(self):
        from .fsutil import open_append

        return open_append(self.baseFilename)

    def handleError(self, record: logging.LogRecord) -> None:
        """A log write that fails (a full disk mid-run) is said once, not a ``--- Logging error ---`` traceback per
        line; the console keeps the run's messages and the stage's own writes meet the full disk as a clean error."""
        err = sys.exc_info()[1]
        if not isinstance(err, OSError):
            super().handleError(record)
            return
        if not getattr(self, "_failed", False):
            self._failed = True
            sys.stderr.write(f"warning: the run log {self.baseFilename} cannot be written any more "
                             f"({err.strerror or err}); the console keeps this run's messages\n")


def setup_logging(build_dir: Path, stage: str, debug: bool = False, path: Optional[Path] = None) -> Path:
    """Send everything to ``<build_dir>/logs/<stage>-<timestamp>.log`` (or ``path``, appended to); INFO to the console.

    Returns the log path so failures can point at it.  Calling it again replaces
    the handlers it installed before (tests run several stages in one process).
    """
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, _HANDLER_TAG, False):
            root.removeHandler(h)
            h.close()
    logs = Layout(build_dir).logs
    logs.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = path or logs / f"{stage}-{stamp}-{os.getpid()}.log"
    fh = _LogFile(path, encoding="utf-8")
    _record_log(logs, path)
    fh.setLevel(logging.DEBUG)
    fh.setFormatter(logging.Formatter(FILE_FORMAT))
    setattr(fh, _HANDLER_TAG, True)
    console: logging.Handler
    _decide_terminal()
    if terminal() is not None:
        from rich.logging import RichHandler

        console = RichHandler(console=terminal(), show_time=False, show_path=False, markup=False,
                              rich_tracebacks=debug)
    else:
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(logging.Formatter(CONSOLE_FORMAT))
    console.setLevel(logging.DEBUG if debug else logging.INFO)
    if not debug:
        console.addFilter(_own_or_warning)  # upstream libraries' INFO (ExecuTorch's partitioner...) only in the file
    console.addFilter(_warning_once)
    setattr(console, _HANDLER_TAG, True)
    root.addHandler(fh)
    root.addHandler(console)
    root.setLevel(logging.DEBUG)
    for noisy in ("PIL", "matplotlib", "urllib3", "asyncio", "adbutils"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # torch 2.x deprecates torch.jit with a FutureWarning on every call we make: the log keeps
    # them, the console does not (a stage's own warnings are printed by the stage).
    logging.captureWarnings(True)
    warnings_log = logging.getLogger("py.warnings")
    warnings_log.propagate = False
    for h in list(warnings_log.handlers):
        if getattr(h, _HANDLER_TAG, False):
            warnings_log.removeHandler(h)
    warnings_log.addHandler(fh)
    return path


def _record_log(logs: Path, path: Path) -> None:
    """List the run log in the log directory's manifest (by name: it grows while the run writes it), so that rotation
    and ``clean --what logs`` remove only torchdroid's logs and name anything else there.  A directory marked now
    takes the logs an older torchdroid wrote there (its log names) as its own.  Never fails the run: a log left
    unlisted (a full disk) is only kept and named by clean."""
    from .errors import NoSpaceError, WriteError
    from .fsutil import LIVE, is_owned, own_dir, record_written

    with contextlib.suppress(OSError, NoSpaceError, WriteError):  # a full disk is checked before writing: NoSpaceError
        if not is_owned(logs):
            own_dir(logs, "logs")
            for old in sorted(logs.iterdir()):
                if LOG_NAME.fullmatch(old.name) and old.is_file() and not old.is_symlink():
                    record_written(old, kind=LIVE)
        record_written(path, kind=LIVE)


def torchdroid_logs(logs: Path) -> List[Path]:
    """The run logs in ``logs`` torchdroid may remove: the ones its manifest lists, or (an older torchdroid's
    directory, no manifest) the files named as run logs."""
    from .fsutil import ownership

    if not Path(logs).is_dir():
        return []
    found = ownership(logs)
    names = set(found.ours) if found is not None else None
    return sorted(p for p in Path(logs).glob("*.log") if LOG_NAME.fullmatch(p.name) and p.is_file()
                  and not p.is_symlink() and (names is None or p.name in names))


OWN_LOGGERS = ("torchdroid", "converter", "deploy", "workflow", "toolchain", "host_nnapi", "ndk_build", "appgen",
               "tasks", "benchmarks", "tests")


def _warning_once(record: logging.LogRecord) -> bool:
    """A warning the run's notes channel already showed (toolchain/console.py) is not shown again."""
    from .console import first_time

    return record.levelno < logging.WARNING or first_time(record.getMessage())


def _own_or_warning(record: logging.LogRecord) -> bool:
    """The console shows torchdroid's own INFO lines and everybody's warnings; the log file keeps everything."""
    return record.levelno >= logging.WARNING or record.name.split(".")[0] in OWN_LOGGERS


@contextlib.contextmanager
def native_output_to_log() -> Iterator[Optional[Path]]:
    """Send what C/C++ libraries write to file descriptor 2 (ExecuTorch's runtime and cpuinfo, torch's C++ warnings)
    to the run log for the block, keeping torchdroid's own console lines on the terminal.  Without a run log (a
    library call outside a task) nothing changes."""
    path = current_log_path()
    if path is None:
        yield None
        return
    ours = [h for h in logging.getLogger().handlers
            if getattr(h, _HANDLER_TAG, False) and type(h) is logging.StreamHandler and h.stream is sys.stderr]
    global _redirected
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(2)
    console = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")
    previous = [h.setStream(console) for h in ours]
    _redirected += 1
    try:
        with open(path, "ab") as log_file:
            os.dup2(log_file.fileno(), 2)
        yield path
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        _redirected -= 1
        for h, stream in zip(ours, previous):
            h.setStream(stream)
        console.close()


def current_log_path() -> Optional[Path]:
    for h in logging.getLogger().handlers:
        if getattr(h, _HANDLER_TAG, False) and isinstance(h, logging.FileHandler):
            return Path(h.baseFilename)
    return None


def rotate_logs(logs: Path, keep: int = 50) -> list:
    """Keep the newest ``keep`` logs of each task (``<task>-<stamp>-<pid>.log``); return what was removed.

    The log of the running process is never removed.
    """
    from .fsutil import record_removed

    current = current_log_path()
    by_task: dict = {}
    for p in torchdroid_logs(logs):
        by_task.setdefault(LOG_NAME.fullmatch(p.name).group(1), []).append(p)
    removed = []
    for paths in by_task.values():
        paths.sort(key=lambda p: (p.stat().st_mtime, p.name), reverse=True)
        for old in paths[keep:]:
            if current is not None and old.resolve() == current.resolve():
                continue
            old.unlink(missing_ok=True)
            record_removed(old)
            removed.append(old)
    return removed
