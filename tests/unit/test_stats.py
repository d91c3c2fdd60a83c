"""toolchain.stats: the one percentile definition (nearest rank) every benchmark uses."""

import math
import random
import statistics

import pytest

from toolchain.stats import VARIANCE_LIMIT_PCT, percentile, spread_pct


def test_one_sample_is_every_percentile():
    assert [percentile([7.0], p) for p in (0, 1, 50, 90, 100)] == [7.0] * 5


def test_nearest_rank_on_an_even_count():
    xs = [4.0, 1.0, 3.0, 2.0]  # unsorted on purpose
    assert percentile(xs, 50) == 2.0  # rank ceil(2.0) = 2: a measured sample, not the mean 2.5
    assert percentile(xs, 51) == 3.0  # rank ceil(2.04) = 3
    assert percentile(xs, 75) == 3.0
    assert percentile(xs, 90) == 4.0  # rank ceil(3.6) = 4
    assert statistics.median(xs) == 2.5  # the median stays the usual one


def test_p0_and_p100_are_the_extremes():
    xs = [5, 1, 3, 2, 4]
    assert percentile(xs, 0) == 1 and percentile(xs, 100) == 5


def test_exact_ranks_do_not_round_up_from_float_error():
    # 0.9 * 10 and 0.9 * 30 are 9 and 27 exactly; the rank must not become 10 / 28 through float error
    assert percentile(list(range(1, 11)), 90) == 9
    assert percentile(list(range(1, 31)), 90) == 27
    assert percentile(list(range(1, 101)), 90) == 90
    assert percentile(list(range(1, 1001)), 99.9) == 999


def test_always_a_sample_at_least_p_percent_at_or_below():
    rng = random.Random(5)
    for n in (1, 2, 3, 7, 10, 31):
        xs = [rng.random() for _ in range(n)]
        for p in (0, 10, 50, 90, 99, 100):
            v = percentile(xs, p)
            assert v in xs
            assert sum(x <= v for x in xs) >= p / 100 * n
            assert p == 0 or sum(x < v for x in xs) < p / 100 * n  # and the smallest such sample


def test_empty_input_and_bad_p_are_errors():
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 90)
    for p in (-1, 100.5, math.nan):
        with pytest.raises(ValueError, match="between 0 and 100"):
            percentile([1.0], p)


def test_spread_of_the_rounds():
    assert spread_pct([10.0, 11.0, 12.0]) == pytest.approx(100 * 2 / 11)
    assert spread_pct([5.0]) == 0.0
    assert spread_pct([0.0, 0.0]) == 0.0  # no centre to relate to
    assert VARIANCE_LIMIT_PCT == 10.0
