"""The one way convert runs torch work in a thread (the calibration beside quant_none's export, the next mode's
export, the user's model factory): its value or exception handed back, and waits that still wait when a signal
interrupts them.

The process must never exit while torch runs in a thread: the interpreter's exit ends such a thread inside torch's
C++ code, which aborts the process ("terminate called without an active exception", exit -6) instead of the stage's
clean 130/143.  ``threading.Thread.join`` cannot be trusted for this: on CPython 3.11 a join interrupted by Ctrl-C
or SIGTERM marks the still running thread as stopped, so every later join (and the interpreter's own wait for
non-daemon threads at exit) returns at once.  A worker's own event says when its function has returned; every
caller waits for it on its error path, and at the interpreter's exit every worker still running is waited for
(the net under a signal that lands between a worker's start and its caller's ``try``).
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import Any, Callable, Optional, Set

from toolchain.fsutil import signals_held

log = logging.getLogger(__name__)

_running: Set["Worker"] = set()
_running_guard = threading.Lock()


class Worker:
    """``fn(*args)`` in a thread named ``name``, started at once; :meth:`result` waits for it and returns its value
    or raises its exception.  ``stop_wait``: how long a stopped run (a signal) waits for ``fn`` before it goes on
    (None: until it returns; a user's factory that may hang gets a limit), ``on_stop``: what to say when that wait
    lasts more than a second."""

    def __init__(self, fn: Callable[..., Any], *args: Any, name: str = "torchdroid-convert", daemon: bool = False,
                 stop_wait: Optional[float] = None, on_stop: Optional[Callable[[], None]] = None):
        self._value: Any = None
        self._error: Optional[BaseException] = None
        self._done = threading.Event()
        self.stop_wait, self._on_stop = stop_wait, on_stop
        self._thread = threading.Thread(target=self._run, args=(fn, args), name=name, daemon=daemon)
        try:
            with signals_held():  # started or not at all; a signal held meanwhile is raised just below
                with _running_guard:
                    _running.add(self)
                self._thread.start()
        except BaseException:
            self._after_signal()
            raise

    def _run(self, fn: Callable[..., Any], args: tuple) -> None:
        try:
            self._value = fn(*args)
        except BaseException as e:  # handed to the caller by result()
            self._error = e
        finally:
            with _running_guard:
                _running.discard(self)
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _after_signal(self) -> None:
        """A signal stops the run: wait for ``fn`` (``stop_wait``), saying so after a second; a second signal ends
        the wait at once."""
        if self._thread.ident is None or self._done.wait(1.0):
            return
        if self._on_stop is not None:
            self._on_stop()
        self._done.wait(None if self.stop_wait is None else max(0.0, self.stop_wait - 1.0))

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait up to ``timeout`` seconds (None: until it returns); True when ``fn`` has returned.  A signal while
        waiting is raised again once ``fn`` has returned (or after ``stop_wait``)."""
        try:
            return self._done.wait(timeout)
        except BaseException:
            self._after_signal()
            raise

    def result(self) -> Any:
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value


def _wait_at_exit() -> None:
    """At the interpreter's exit (after the task's outcome is decided): no worker may still be inside torch."""
    with _running_guard:
        running = list(_running)
    for worker in running:
        log.debug("waiting for %s before the exit", worker._thread.name)
        worker._done.wait(worker.stop_wait)


atexit.register(_wait_at_exit)  # registered after torch's own exit hooks: runs before them
