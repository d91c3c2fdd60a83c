"""One progress line per device: a rich line each on a terminal, a few plain log lines otherwise (CI, pipes)."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Callable, Iterator

from toolchain.logs import terminal

log = logging.getLogger(__name__)


@contextlib.contextmanager
def device_lines() -> Iterator[Callable[[str, str], None]]:
    """Yield ``status(serial, text)``; thread-safe, for the per-device workers."""
    console = terminal()  # decided when the run started: the lines stay while native output goes to the run log
    if console is None:
        yield _plain_lines()
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    lock = threading.Lock()
    tasks: dict = {}
    with Progress(SpinnerColumn(), TextColumn("[bold]{task.fields[serial]}"), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=console) as progress:
        def status(serial: str, text: str) -> None:
            log.debug("[%s] %s", serial, text)
            with lock:
                if serial not in tasks:
                    tasks[serial] = progress.add_task(text, total=None, serial=serial)
                else:
                    progress.update(tasks[serial], description=text)
                if text == "done" or text.startswith("failed"):
                    progress.update(tasks[serial], total=1, completed=1)

        yield status


def _plain_lines() -> Callable[[str, str], None]:
    """Without a terminal, per device: its first status, its outcome ("done", "failed ...", "interrupted ...") and in
    between at most one line per :data:`toolchain.progress.PLAIN_EVERY` seconds; every status goes to the run log."""
    import time

    from toolchain.progress import PLAIN_EVERY

    lock = threading.Lock()
    last: dict = {}

    def status(serial: str, text: str) -> None:
        now = time.monotonic()
        with lock:
            shown = serial not in last or now - last[serial] >= PLAIN_EVERY or text == "done" or \
                text.startswith(("failed", "interrupted"))
            if shown:
                last[serial] = now
        log.log(logging.INFO if shown else logging.DEBUG, "[%s] %s", serial, text)

    return status
