"""The one way convert runs torch work in a thread (the calibration beside quant_none's export, the next mode's
export, the user's model factory): its value or exception handed back, and a wait that still waits when a signal
interrupts it.

The process must never exit while torch runs in a thread: the interpreter's exit ends such a thread inside torch's
C++ code, which aborts the process ("terminate called without an active exception", exit -6) instead of the stage's
clean 130/143.  ``threading.Thread.join`` cannot be trusted here: on CPython 3.11 a join interrupted by Ctrl-C or
SIGTERM marks the still running thread as stopped, so every later join (and the interpreter's own wait for
non-daemon threads at exit) returns at once.  The worker's own event says when the function has returned.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from toolchain.fsutil import signals_held


class Worker:
    """``fn(*args)`` in a thread named ``name``, started at once; :meth:`result` waits for it and returns its value
    or raises its exception."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "torchdroid-convert", daemon: bool = False):
        self._value: Any = None
        self._error: Optional[BaseException] = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(fn, args), name=name, daemon=daemon)
        with signals_held():  # started, or not at all: a signal inside start() would leave it running unknown
            self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple) -> None:
        try:
            self._value = fn(*args)
        except BaseException as e:  # handed to the caller by result()
            self._error = e
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait_through_signal(self, timeout: Optional[float], after_signal: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds (None: until it returns); True when ``fn`` has returned.  A signal while
        waiting (KeyboardInterrupt, the task's Terminated) is raised again only once ``fn`` has returned, or after
        ``after_signal`` more seconds (None: no limit); a second signal ends that wait at once."""
        try:
            return self._done.wait(timeout)
        except BaseException:
            self._done.wait(after_signal)
            raise

    def result(self) -> Any:
        self.wait_through_signal(None)
        if self._error is not None:
            raise self._error
        return self._value
