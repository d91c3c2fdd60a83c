"""What every task does around its one call: check the config, log to a file, turn errors into exit codes."""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
from pathlib import Path
from typing import Any, Iterator, Optional

from invoke import Exit

from toolchain.console import for_stderr, quiet_stdout
from toolchain.layout import Layout


def refuse_dry(config: Any, name: str) -> None:
    """``invoke --dry TASK``: Invoke's dry run only covers ``c.run`` commands, which torchdroid does not use."""
    run = config.get("run", {}) if hasattr(config, "get") else {}
    if run and run.get("dry"):
        raise Exit(f"torchdroid {name}: bad input: --dry is not supported by `{name}`\n"
                   "  cause: Invoke's --dry only echoes shell commands run through Invoke; torchdroid's tasks call "
                   "their tools directly, so a dry run would silently do the real work\n"
                   "  fix: run without --dry; `invoke clean --dry-run` previews a clean, and each task's --help "
                   "says what it writes", code=2)


@contextlib.contextmanager
def stage(config: Any, name: str, debug: bool = False, allow_dry: bool = False,
          frees_space: bool = False, log: Optional[Path] = None, as_json: bool = False) -> Iterator[Any]:
    """Check every config value, log to <build_dir>/logs, turn a TorchdroidError into a clean message and exit code.

    A stage starts only with room for its log and locks, except one that ``frees_space`` (clean: what a user runs
    on a full disk; its log then stops with one warning).  ``log``: the run log an earlier block of the same run
    opened (``all`` between its stages), continued rather than a second file.  ``as_json``: the task's ``--json``;
    stdout then belongs to the one JSON document (:func:`toolchain.console.quiet_stdout`), the stage's output goes
    to stderr."""
    from toolchain.errors import TorchdroidError
    from toolchain.fsutil import as_usage_error, build_lock
    from toolchain.resolve import Resolver, check_config

    if not allow_dry:
        refuse_dry(config, name)
    try:
        check_config(config)  # every key from every source, before any work starts
        resolver = Resolver(config)
        debug = bool(debug) or resolver.get("debug")
        build_dir = resolver.path("build_dir")
        log_path = _start_log(build_dir, name, debug, need_space=not frees_space, log=log)
    except TorchdroidError as e:
        raise Exit(for_stderr(f"torchdroid {name}: {e.label}: {e}"), code=e.exit_code) from None
    _rotate_logs(build_dir, resolver)
    with terminable(name), quiet_stdout(as_json):
        try:
            try:
                with build_lock(build_dir, name):  # one writing task per build directory (fsutil.BUILD_WRITERS)
                    yield log_path
            except OSError as e:  # a full disk met by any writer of any stage: one message, not a traceback
                problem = as_usage_error(e, near=build_dir)
                if problem is None:
                    raise
                raise problem from e
        except TorchdroidError as e:
            if debug:
                raise
            raise Exit(for_stderr(f"torchdroid {name}: {e.label}: {e}\n  (run log: {log_path}; --debug shows the "
                                  "traceback)"),
                       code=e.exit_code) from e
        except Terminated as e:
            raise stopped(name, e.signum, NOTHING_HALF_WRITTEN, _detail(e)) from None
        except KeyboardInterrupt as e:
            raise stopped(name, signal.SIGINT, NOTHING_HALF_WRITTEN, _detail(e)) from None


def _detail(e: BaseException) -> str:
    """What the stage kept when it was stopped (``detail``, set by the stage, e.g. deploy's completed rows)."""
    detail = getattr(e, "detail", "")
    return f": {detail}" if detail else ""


def _start_log(build_dir, name: str, debug: bool, need_space: bool = True, log: Optional[Path] = None):
    """The run log under a build directory that is usable: a directory (or creatable), with room for the log."""
    from toolchain.fsutil import as_usage_error, ensure_space, ensure_writable_dir
    from toolchain.logs import setup_logging

    ensure_writable_dir(build_dir, "build directory (build_dir)")
    ensure_writable_dir(Layout(build_dir).logs, "log directory")
    if need_space:
        ensure_space(build_dir, 0, "the run log and the lock files")
    try:
        return setup_logging(build_dir, name, debug, path=log)
    except OSError as e:
        problem = as_usage_error(e, near=build_dir)
        if problem is None:
            raise
        raise problem from e


INTERRUPT_CODES = (130, 128 + signal.SIGTERM, 128 + signal.SIGHUP)  # Ctrl-C, SIGTERM, SIGHUP: the run was stopped


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: ends the run like Ctrl-C (every ``finally`` runs: locks, partial files, the adb server)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


class _Termination:
    def __init__(self) -> None:
        self.signum: Optional[int] = None

    def __call__(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        self.signum = signum
        raise Terminated(signum)


class _AfterTask:
    """The handler once the outermost task has ended: its outcome and exit code are decided, so a Ctrl-C or SIGTERM
    that comes now has nothing to stop.  Invoke would turn a KeyboardInterrupt raised there into a silent exit 1 and
    SIGTERM's default action would end a finished run with -15; noted instead, it stops the next task of the same
    command line (``invoke convert verify``) before that task starts."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None

    def __call__(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        self.signum = self.signum or signum


_AFTER_TASK = _AfterTask()
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def terminable(name: str) -> Iterator[Any]:
    """Within the block SIGTERM/SIGHUP raise :class:`Terminated` in the main thread (Python's default would end
    the process without running any ``finally``) and Ctrl-C raises KeyboardInterrupt.  Nested blocks share the
    outer handler; yields it, so a caller can tell afterwards whether a signal ended the run (``.signum``).  A task
    that runs more than one stage (convert, then verify) wraps them all: a signal between two stages ends it with
    the same message and exit code as one inside a stage (Ctrl-C: 130, not Invoke's silent 1).  After the outermost
    block a signal is noted by :class:`_AfterTask`, and a noted one stops the next block before it starts."""
    current = signal.getsignal(signal.SIGTERM)
    if isinstance(current, _Termination) or threading.current_thread() is not threading.main_thread():
        yield current if isinstance(current, _Termination) else _Termination()
        return
    late, _AFTER_TASK.signum = _AFTER_TASK.signum, None
    if late is not None:
        raise stopped(name, late, "before it started")
    handler = _Termination()
    for s, h in ((signal.SIGTERM, handler), (signal.SIGHUP, handler), (signal.SIGINT, signal.default_int_handler)):
        signal.signal(s, h)
    try:
        yield handler
    except Terminated as e:
        raise stopped(name, e.signum, NOTHING_HALF_WRITTEN) from None
    except KeyboardInterrupt:
        raise stopped(name, signal.SIGINT, NOTHING_HALF_WRITTEN) from None
    finally:
        for s in _STOP_SIGNALS:
            signal.signal(s, _AFTER_TASK)
        atexit.unregister(_ignore_signals_at_exit)  # one entry, registered after torch's own exit hooks (atexit
        atexit.register(_ignore_signals_at_exit)  # runs the last registered first)


NOTHING_HALF_WRITTEN = "nothing half-written was left under a final name"


def stopped(name: str, signum: int, detail: str, kept: str = "") -> Exit:
    """The one way a task a signal stopped ends: its message (``kept``: what the stage kept, ``_detail``) and exit
    code 128 + the signal (Ctrl-C: 130)."""
    how = "interrupted" if signum == signal.SIGINT else f"terminated by {signal.Signals(signum).name}"
    return Exit(f"torchdroid {name}: {how}{kept} ({detail})", code=128 + signum)


def _ignore_signals_at_exit() -> None:
    """At the interpreter's exit the task's outcome and exit code are decided: a Ctrl-C or SIGTERM then has
    nothing left to stop and must not print a traceback from torch's teardown or turn a finished run into -15."""
    for s in _STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def _rotate_logs(build_dir, resolver) -> None:
    from toolchain.logs import rotate_logs

    with contextlib.suppress(OSError):  # rotation never fails a run
        rotate_logs(Layout(build_dir).logs, keep=resolver.get("clean.keep_logs"))
