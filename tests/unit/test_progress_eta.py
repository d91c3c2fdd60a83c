"""Progress says how long is left only when it knows (issue 31 item 5: "about 0 s left" before a 15 s step), and in
a pipe prints a few lines for long work only."""

from __future__ import annotations

import logging

from toolchain import progress as prog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_time_left_says_nothing_below_a_few_seconds():
    assert prog.time_left([], 3, "the checks") == ""  # nothing timed yet: nothing made up
    assert prog.time_left([0.1], 3, "the checks") == ""  # was "about 0 s left" before a 15 s step
    assert prog.time_left([10.0, 20.0], 2, "2 programs") == " (about 30 s left for 2 programs, from those so far)"


def test_time_left_of_a_bar_comes_from_the_recent_steps_not_the_quick_first_ones(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(prog.time, "monotonic", clock)
    p = prog.Progress("bench", total=12)
    assert p.left() == ""  # no step finished
    for _ in range(3):  # loading: quick
        clock.now += 0.1
        p.advance()
    assert p.left() == ""  # 9 steps at 0.1 s: not worth saying
    for _ in range(3):  # timing rounds: 4 s each
        clock.now += 4.0
        p.advance()
    assert p.left() == "about 24 s left"  # 6 rounds left at the last 3 steps' pace (the mean of all: 12 s)
    clock.now += 3.0  # the current step is under way
    assert p.left() == "about 21 s left"


def test_plain_lines_in_a_pipe_only_for_work_that_takes_seconds(monkeypatch, caplog):
    clock = Clock()
    monkeypatch.setattr(prog.time, "monotonic", clock)
    monkeypatch.setattr(prog, "terminal", lambda: None)
    caplog.set_level(logging.DEBUG, logger="torchdroid.progress")
    with prog.progress("quick", total=3) as p:
        for i in range(3):
            clock.now += 0.5
            p.advance(text=f"step {i}")
    assert [r for r in caplog.records if r.levelno >= logging.INFO] == []  # 1.5 s of work: no line
    caplog.clear()
    with prog.progress("long", total=20) as p:
        for i in range(20):
            clock.now += 4.0
            p.advance(text=f"step {i}")
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert 2 <= len(said) <= 4, said  # the first after 5 s, then one per 30 s of 80 s
    assert said[0].startswith("[2/20 0:00:08, about") and said[0].endswith("step 1"), said
