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
"""

from __future__ import annotations

import math
import statistics
from fractions import Fraction
from typing import Sequence

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
