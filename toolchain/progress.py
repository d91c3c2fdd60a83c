"""Progress on long work: a rich bar with the time left on a terminal, a few plain log lines otherwise (CI, pipes).

The bar draws on the run's terminal (toolchain/logs.terminal: decided once when the run starts), so it stays while
native output goes to the run log.  The time left is the mean of the last :data:`RECENT` steps times the steps left
(the first steps of a stage are often of another kind: loading before timing), shown once a step has finished and only
when it is at least :data:`WORTH_SAYING` seconds (never "about 0 s left" before a long step)."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Iterator, List, Optional, Sequence, Tuple

from .logs import terminal

log = logging.getLogger("torchdroid.progress")

PLAIN_EVERY = 30.0  # seconds between plain progress lines in a pipe (the first is printed at once)
WORTH_SAYING = 5.0  # a time left below this is not said: a few seconds, and the mean of short steps misleads
RECENT = 3  # steps the time left is estimated from


class Progress:
    """``advance()`` and ``describe()``: the bar on a terminal; else plain lines for long work only (see
    :meth:`_plain`; every step goes to the run log)."""

    def __init__(self, description: str, total: Optional[int]):
        self.description = description
        self.total = total
        self.done = 0
        self._rich = None
        self._task = None
        self._last = 0.0
        self._start = time.monotonic()
        self._marks: List[Tuple[float, int]] = [(self._start, 0)]  # (when, steps done) at each advance

    def left(self) -> str:
        """``about 1 min 05 s left`` from the recent steps' pace, or "" (see the module's docstring)."""
        (t0, d0), (t1, d1) = self._marks[max(0, len(self._marks) - 1 - RECENT)], self._marks[-1]
        if not self.total or d1 <= d0 or self.done >= self.total:
            return ""
        seconds = (t1 - t0) / (d1 - d0) * (self.total - self.done) - (time.monotonic() - t1)
        return f"about {duration(seconds)} left" if seconds >= WORTH_SAYING else ""

    def describe(self, text: str) -> None:
        self.description = text
        if self._rich is not None:
            self._rich.update(self._task, description=text)
        else:
            self._plain()

    def set_total(self, total: int) -> None:
        self.total = total
        if self._rich is not None:
            self._rich.update(self._task, total=total)

    def advance(self, n: int = 1, text: Optional[str] = None) -> None:
        self.done += n
        if n > 0:
            self._marks.append((time.monotonic(), self.done))
        if text:
            self.description = text
        if self._rich is not None:
            self._rich.update(self._task, advance=n, description=self.description)
        elif text:
            self._plain()

    def update(self, done: int, total: Optional[int] = None, text: Optional[str] = None) -> None:
        if total is not None:
            self.set_total(total)
        self.advance(done - self.done, text)

    def _plain(self) -> None:
        """A line once the work has taken :data:`WORTH_SAYING` seconds, then at most one per :data:`PLAIN_EVERY`
        seconds (every step goes to the log)."""
        now = time.monotonic()
        quiet = now - self._last < PLAIN_EVERY if self._last else now - self._start < WORTH_SAYING
        if quiet:
            log.debug("[%d/%s] %s", self.done, self.total or "?", self.description)
            return
        self._last = now
        elapsed = _clock(now - self._start) + (f", {self.left()}" if self.left() else "")
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
    seconds = sum(spent) / len(spent) * left
    if seconds < WORTH_SAYING:
        return ""
    return f" (about {duration(seconds)} left for {what}, from those so far)"


def _clock(seconds: float) -> str:
    """Elapsed time as H:MM:SS, never shortened."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@contextlib.contextmanager
def progress(description: str, total: Optional[int] = None) -> Iterator[Progress]:
    p = Progress(description, total)
    console = terminal()
    if console is not None:
        import sys

        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.table import Column

        # the clock, the count and the time left first, whole: a long description is cut at the terminal's edge
        columns = [SpinnerColumn(), TimeElapsedColumn(table_column=_whole(7)),
                   MofNCompleteColumn(table_column=_whole(2 * len(str(total or 0)) + 1)), BarColumn(bar_width=16),
                   _left_column(p), TextColumn("{task.description}", table_column=Column(
                       no_wrap=True, overflow="ellipsis", ratio=1))]
        with RichProgress(*columns, console=console, transient=True, expand=True,
                          redirect_stdout=sys.stdout.isatty()) as rp:
            p._rich = rp
            p._task = rp.add_task(description, total=total)
            yield p
    else:
        yield p


def _whole(width: int):
    from rich.table import Column

    return Column(no_wrap=True, min_width=width, width=width)


def _left_column(p: Progress):
    from rich.progress import ProgressColumn
    from rich.table import Column
    from rich.text import Text

    class Left(ProgressColumn):
        def __init__(self) -> None:  # as wide as what it says (nothing, until a time left is worth saying)
            super().__init__(table_column=Column(no_wrap=True))

        def render(self, task) -> Text:  # noqa: ARG002 - one bar per Progress: its own estimate
            return Text(p.left(), style="progress.remaining")

    return Left()
