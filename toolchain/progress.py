"""Progress on long work: a rich bar on a terminal, plain log lines otherwise (CI, pipes)."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Iterator, Optional, Sequence

from .logs import interactive

log = logging.getLogger("torchdroid.progress")


class Progress:
    """``advance()`` and ``describe()``; prints at most one plain line per step or per 5 s."""

    def __init__(self, description: str, total: Optional[int]):
        self.description = description
        self.total = total
        self.done = 0
        self._rich = None
        self._task = None
        self._last = 0.0
        self._start = time.monotonic()

    def describe(self, text: str) -> None:
        self.description = text
        if self._rich is not None:
            self._rich.update(self._task, description=text)
        else:
            self._plain(force=True)

    def set_total(self, total: int) -> None:
        self.total = total
        if self._rich is not None:
            self._rich.update(self._task, total=total)

    def advance(self, n: int = 1, text: Optional[str] = None) -> None:
        self.done += n
        if text:
            self.description = text
        if self._rich is not None:
            self._rich.update(self._task, advance=n, description=self.description)
        elif text:
            self._plain(force=True)

    def update(self, done: int, total: Optional[int] = None, text: Optional[str] = None) -> None:
        if total is not None:
            self.set_total(total)
        self.advance(done - self.done, text)

    def _plain(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 5.0:
            return
        self._last = now
        elapsed = _clock(now - self._start)
        if self.total:
            log.info("[%d/%d %s] %s", self.done, self.total, elapsed, self.description)
        else:
            log.info("[%s] %s", elapsed, self.description)


def duration(seconds: float) -> str:
    """A length of time for a reader: "42 s", "3 min 05 s"."""
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def time_left(spent: Sequence[float], left: int, what: str) -> str:
    """`` (about 1 min 05 s left for WHAT, from those so far)``: the rest of ``left`` steps at the mean of those timed
    so far (``spent``); "" before one was timed (no earlier times to go by, and nothing made up)."""
    if not spent:
        return ""
    return f" (about {duration(sum(spent) / len(spent) * left)} left for {what}, from those so far)"


def _clock(seconds: float) -> str:
    """Elapsed time as H:MM:SS, never shortened."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@contextlib.contextmanager
def progress(description: str, total: Optional[int] = None) -> Iterator[Progress]:
    p = Progress(description, total)
    if interactive():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, SpinnerColumn, TextColumn, TimeElapsedColumn

        # the clock and the count first: a long description is cut at the terminal's edge, never the elapsed time
        columns = [SpinnerColumn(), TimeElapsedColumn(), MofNCompleteColumn(), BarColumn(bar_width=20),
                   TextColumn("{task.description}")]
        with RichProgress(*columns, transient=True) as rp:
            p._rich = rp
            p._task = rp.add_task(description, total=total)
            yield p
    else:
        yield p
