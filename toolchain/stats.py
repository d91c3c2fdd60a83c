"""Statistics of timed samples: the one percentile definition every benchmark here uses.

**Percentile: nearest rank.**  The p-th percentile (0 <= p <= 100) of n samples is the smallest sample that at
least p % of the samples are less than or equal to: sorted ascending, the sample at 1-based rank
``ceil(p / 100 * n)`` (rank 1 for p = 0, rank n for p = 100).  It is always a measured sample, and it is what
the app computes on the phone (``BenchStats.java`` in the app template), so the same samples give the same p90
there and here.  ``p90`` is ``percentile(samples, 90)`` everywhere (convert's host bench, deploy's binary
benchmark, the ExecuTorch runs).

**Median** is :func:`statistics.median` (the mean of the two middle samples for an even n), so for an even n
the median can lie between the 50th percentile and the next sample.

**Spread** of repeated rounds: the range of the per-round medians relative to their median; rounds further
apart than :data:`VARIANCE_LIMIT_PCT` make a row ``unstable``.

**Comparison** of two things timed in the same alternated rounds (:class:`Comparison`): the one verdict rule
for every timing comparison the tool prints.  Each round gives one ratio (``base`` time / ``other`` time, > 1:
``other`` is faster).  The headline is the median of the per-round ratios, shown with their range; the
difference is "no measured difference" only when that range includes 1.0, else a speed-up (every round above
1.0) or a slow-down (every round below 1.0).  One ratio (a single round) is its own range.  A comparison is
**noisy** when its rounds spread more than the difference it reports (``high - low > |headline - 1|``): the
direction may be measured, its size is not (issue 32; pyperf warns on a spread of 10 % of the mean, TC6).
"""

from __future__ import annotations

import math
import statistics
from fractions import Fraction
from dataclasses import dataclass
from typing import Sequence, Tuple

VARIANCE_LIMIT_PCT = 10.0  # per-round medians further apart than this (relative to their median): unstable


def percentile(samples: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile of ``samples`` (see the module text); ValueError when empty."""
    if not samples:
        raise ValueError("no samples to take a percentile of")
    if not 0 <= p <= 100:
        raise ValueError(f"a percentile is between 0 and 100, not {p}")
    ordered = sorted(samples)
    rank = math.ceil(Fraction(str(p)) * len(ordered) / 100)  # exact: 0.9 * 30 is 27, not 27.000000000000004
    return ordered[max(rank, 1) - 1]


def spread_pct(medians: Sequence[float]) -> float:
    """100 * (max - min) / median of the per-round medians; 0 for one round or a zero median."""
    centre = statistics.median(medians)
    return 100.0 * (max(medians) - min(medians)) / centre if centre else 0.0


SPEED_UP, SLOW_DOWN, NO_DIFFERENCE = "speed-up", "slow-down", "no measured difference"


@dataclass(frozen=True)
class Comparison:
    """``base`` time / ``other`` time in each round (> 1: ``other`` is faster), and the verdict they give."""

    per_round: Tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.per_round:
            raise ValueError("a comparison needs at least one round's ratio")

    @property
    def headline(self) -> float:
        """The median of the per-round ratios: always inside their range."""
        return statistics.median(self.per_round)

    @property
    def low(self) -> float:
        return min(self.per_round)

    @property
    def high(self) -> float:
        return max(self.per_round)

    @property
    def verdict(self) -> str:
        """:data:`SPEED_UP`, :data:`SLOW_DOWN`, or :data:`NO_DIFFERENCE` when the rounds' range includes 1.0."""
        if self.low > 1.0:
            return SPEED_UP
        if self.high < 1.0:
            return SLOW_DOWN
        return NO_DIFFERENCE

    @property
    def measured(self) -> bool:
        """Every round saw the same direction: the difference is larger than the rounds' noise."""
        return self.verdict != NO_DIFFERENCE

    @property
    def noisy(self) -> bool:
        """The rounds spread more than the difference the headline reports (every "no measured difference" is)."""
        return len(self.per_round) > 1 and self.high - self.low > abs(self.headline - 1.0)

    def noise_note(self, other: str, base: str) -> str:
        """Why a noisy comparison's size is not to be trusted, and what to do ("" when it is not noisy)."""
        if not self.noisy:
            return ""
        return (f"{other} vs {base}: the rounds spread {self.high - self.low:.2f}x ({self.low:.2f}x-{self.high:.2f}x), "
                f"more than the {abs(self.headline - 1.0):.2f}x difference reported: its size is not measured; rerun "
                "on a quieter machine or with more --repeat")

    def span(self) -> str:
        """``2.10x (rounds 1.50x-2.69x)``; just ``2.10x`` for one round."""
        if len(self.per_round) == 1:
            return f"{self.headline:.2f}x"
        return f"{self.headline:.2f}x (rounds {self.low:.2f}x-{self.high:.2f}x)"

    def summary(self, other: str, base: str) -> str:
        """The verdict in words, e.g. ``b vs a: 2.10x (rounds 1.50x-2.69x): speed-up``."""
        return f"{other} vs {base}: {self.span()}: {self.verdict}"

    def note(self, other: str, base: str) -> str:
        """:meth:`summary`, and what to do when the rounds do not measure a difference."""
        if self.measured:
            return self.summary(other, base)
        return (f"{self.summary(other, base)} (the rounds' range includes 1.0x); rerun on a quieter machine or "
                "with more --repeat")


def compare(per_round: Sequence[float]) -> Comparison:
    """The comparison of per-round ratios (``base`` / ``other`` each round); ValueError when there is none."""
    return Comparison(tuple(float(x) for x in per_round))
