"""Timing several models against each other: load and warm each, then alternate them round by round.

Timing model A for a minute and model B a minute later compares two machines (load, clock, thermal state
change in between): the measured ratio moved from 4.0x to 2.6x between two runs that way.  Here every model
is loaded, run once and warmed up first (its load time, first inference, warm-up and peak memory measured
alone), then ``rounds`` rounds each time every model for ``iters`` iterations, the order rotating by one each
round.  A ratio between two models is then known per round, and its spread over the rounds says whether the
difference it shows is larger than the noise (:class:`Ratio`, judged by the one rule of
:class:`toolchain.stats.Comparison`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from toolchain.stats import VARIANCE_LIMIT_PCT, Comparison, compare, percentile, spread_pct

from .torch_state import peak_above, reset_peak


def timed(call: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000.0


@dataclass
class Timing:
    """A subject's statistics: every timed iteration of its rounds, their spread, load, first, warm-up."""

    median_ms: float
    p90_ms: float
    min_ms: float
    mean_ms: float
    max_ms: float = 0.0
    std_ms: float = 0.0
    load_ms: float = 0.0  # loading it (torch.jit.load, ExecuTorch's load_method)
    first_ms: float = 0.0  # the first inference after loading
    warmup_ms: float = 0.0  # mean of the warm-up iterations
    spread_pct: float = 0.0  # range of the per-round medians relative to their median
    unstable: bool = False  # spread_pct > VARIANCE_LIMIT_PCT: the rounds disagree
    repeats: int = 1


@dataclass
class Subject:
    """One model being timed: how to call it, and what was measured of it."""

    key: str
    call: Callable[[], Any]
    load_ms: float = 0.0
    first_ms: float = 0.0
    warm: List[float] = field(default_factory=list)
    memory_kb: Optional[int] = None  # peak resident memory this model added while loading and warming up
    runs: List[List[float]] = field(default_factory=list)  # one list of ``iters`` times per round
    iters: Optional[int] = None  # timed calls per round for this subject (None: the rounds' own count)

    @property
    def call_ms(self) -> float:
        """One call's time as the warm-up saw it (the first call when there was no warm-up)."""
        return statistics.fmean(self.warm) if self.warm else self.first_ms

    def stats(self) -> Timing:
        """median / p90 / min / mean / max / std over every timed iteration, the rounds' spread, load, first, warm-up."""
        times = [t for run in self.runs for t in run]
        spread = spread_pct([statistics.median(run) for run in self.runs])
        return Timing(median_ms=statistics.median(times), p90_ms=percentile(times, 90), min_ms=min(times),
                      mean_ms=statistics.fmean(times), max_ms=max(times),
                      std_ms=statistics.stdev(times) if len(times) > 1 else 0.0, load_ms=self.load_ms,
                      first_ms=self.first_ms, warmup_ms=statistics.fmean(self.warm) if self.warm else 0.0,
                      spread_pct=spread, unstable=len(self.runs) > 1 and spread > VARIANCE_LIMIT_PCT,
                      repeats=len(self.runs))


def prepare(key: str, load: Callable[[], Callable[[], Any]], warmup: int) -> Subject:
    """Load a model (``load`` returns its call), run it once and ``warmup`` times, measuring what it adds to memory."""
    baseline = reset_peak()
    t0 = time.perf_counter()
    call = load()
    load_ms = (time.perf_counter() - t0) * 1000.0
    first = timed(call)
    warm = [timed(call) for _ in range(warmup)]
    return Subject(key, call, load_ms, first, warm, peak_above(baseline))


def estimate_s(subjects: Sequence[Subject], rounds: int, iters: int) -> float:
    """How long :func:`alternate` will take, from each subject's warm-up time."""
    return sum(s.call_ms * (s.iters or iters) for s in subjects) * max(1, rounds) / 1000.0


def alternate(subjects: Sequence[Subject], rounds: int, iters: int,
              on_round: Optional[Callable[[int, Subject], None]] = None) -> None:
    """``rounds`` rounds of ``iters`` timed calls of every subject, the order rotating by one each round."""
    n = len(subjects)
    for r in range(max(1, rounds)):
        for i in range(n):
            s = subjects[(r + i) % n]
            if on_round is not None:
                on_round(r, s)
            s.runs.append([timed(s.call) for _ in range(s.iters or iters)])


@dataclass
class Ratio:
    """``base`` time / ``other`` time per round (> 1: ``other`` is faster), judged by :class:`toolchain.stats.Comparison`."""

    base: str
    other: str
    per_round: List[float]

    @property
    def comparison(self) -> Comparison:
        return compare(self.per_round)

    @property
    def value(self) -> float:
        """The headline: the median of the per-round ratios."""
        return self.comparison.headline

    @property
    def low(self) -> float:
        return self.comparison.low

    @property
    def high(self) -> float:
        return self.comparison.high

    @property
    def uncertain(self) -> bool:
        """The rounds' range includes 1.0: no measured difference."""
        return not self.comparison.measured

    @property
    def noisy(self) -> bool:
        """The rounds spread more than the difference reported (toolchain.stats.Comparison.noisy)."""
        return self.comparison.noisy

    def as_dict(self) -> Dict[str, Any]:
        return {"base": self.base, "other": self.other, "ratio": round(self.value, 4),
                "per_round": [round(x, 4) for x in self.per_round], "low": round(self.low, 4),
                "high": round(self.high, 4), "uncertain": self.uncertain, "noisy": self.noisy,
                "verdict": self.comparison.verdict}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Ratio":
        """The ratio :meth:`as_dict` wrote (its headline and verdict follow from ``per_round``)."""
        return cls(d["base"], d["other"], [float(x) for x in d["per_round"]])

    def summary(self) -> str:
        return self.comparison.summary(self.other, self.base)

    def note(self) -> str:
        return self.comparison.note(self.other, self.base)

    def noise_note(self) -> str:
        return self.comparison.noise_note(self.other, self.base)


def ratio_notes(ratios: List[Ratio]) -> List[str]:
    """One note per ratio that measured no difference, or whose rounds spread more than the difference it reports."""
    return [r.note() if r.uncertain else r.noise_note() for r in ratios if r.uncertain or r.noisy]


def ratio(base_key: str, base_runs: List[List[float]], other_key: str, other_runs: List[List[float]]) -> Ratio:
    """The ratio of two subjects timed in the same alternated rounds: one per round, of the rounds' medians."""
    return Ratio(base_key, other_key, [statistics.median(b) / statistics.median(o) for b, o in zip(base_runs, other_runs)])
