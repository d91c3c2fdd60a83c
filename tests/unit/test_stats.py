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


def test_the_one_verdict_rule_a_speed_up_a_slow_down_and_no_measured_difference():
    """The headline is the median of the per-round ratios, inside their range; "no measured difference" only
    when that range includes 1.0 (bench-executorch once printed 1.45x for rounds 1.50-2.69 and called it noise)."""
    from toolchain.stats import NO_DIFFERENCE, SLOW_DOWN, SPEED_UP, compare

    up = compare([2.69, 1.50, 2.10])
    assert up.verdict == SPEED_UP and up.measured
    assert up.headline == 2.10 and (up.low, up.high) == (1.50, 2.69)
    assert up.summary("fp32-xnnpack", "cpu") == "fp32-xnnpack vs cpu: 2.10x (rounds 1.50x-2.69x): speed-up"
    # negative control: a range that includes 1.0 is no measured difference, whatever the headline
    noise = compare([0.9, 1.05, 1.2])
    assert noise.verdict == NO_DIFFERENCE and not noise.measured and "rerun" in noise.note("b", "a")
    assert compare([1.0, 1.3, 1.4]).verdict == NO_DIFFERENCE  # a round at exactly 1.0x is inside the range
    # a slow-down is the mirror image of a speed-up
    down = compare([1 / 2.69, 1 / 1.50, 1 / 2.10])
    assert down.verdict == SLOW_DOWN and down.headline == 1 / 2.10
    # one ratio (a single round) is its own range
    assert compare([1.5]).verdict == SPEED_UP and compare([0.8]).verdict == SLOW_DOWN
    assert compare([1.5]).span() == "1.50x"
    with pytest.raises(ValueError):
        compare([])
