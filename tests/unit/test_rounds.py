"""Alternated rounds and the spread of a ratio (converter/rounds.py)."""

from converter.rounds import Ratio, alternate, prepare, ratio


def test_rounds_alternate_the_models_and_rotate_the_order():
    calls = []
    subjects = [prepare(k, lambda k=k: (lambda: calls.append(k)), warmup=1) for k in "abc"]
    calls.clear()
    order = []
    alternate(subjects, rounds=3, iters=2, on_round=lambda r, s: order.append((r, s.key)))
    assert order == [(0, "a"), (0, "b"), (0, "c"), (1, "b"), (1, "c"), (1, "a"), (2, "c"), (2, "a"), (2, "b")]
    assert calls == [k for _, k in order for _ in range(2)]
    assert all(len(s.runs) == 3 and all(len(run) == 2 for run in s.runs) for s in subjects)
    stats = subjects[0].stats()
    assert stats.repeats == 3 and stats.min_ms <= stats.median_ms <= stats.max_ms


def test_a_ratio_whose_rounds_spread_wider_than_its_difference_is_uncertain():
    steady = ratio("float", [[10.0, 10.0], [10.2, 10.2], [9.8, 9.8]], "int8", [[4.0], [4.1], [3.9]])
    assert round(steady.value, 2) == 2.5 and not steady.uncertain
    # 1.05x overall, but one round says 0.8x and another 1.3x: the difference is noise
    noisy = ratio("float", [[10.0], [8.0], [13.0]], "int8", [[9.5], [10.0], [10.0]])
    assert noisy.uncertain and noisy.low < 1.0 < noisy.high and "no measured difference" in noisy.note()
    assert Ratio("a", "b", [1.5]).uncertain is False  # one round: its own range
    assert noisy.as_dict()["uncertain"] is True and noisy.as_dict()["verdict"] == "no measured difference"


def test_every_round_faster_is_a_speed_up_whose_headline_is_the_rounds_median():
    """bench-executorch printed "1.45x (rounds 1.50-2.69) ... not a measured difference": a headline outside every
    round's range while every round showed a speed-up.  Rounds 1.50x, 2.10x, 2.69x whose medians pooled over
    all rounds give 1.50x: the headline is the median of the rounds (2.10x) and the verdict a speed-up."""
    r = ratio("cpu", [[3.0], [6.3], [2.69]], "xnnpack", [[2.0], [3.0], [1.0]])
    assert [round(x, 2) for x in r.per_round] == [1.50, 2.10, 2.69]
    assert round(r.value, 2) == 2.10 and r.low <= r.value <= r.high
    assert not r.uncertain and r.as_dict()["verdict"] == "speed-up" and "speed-up" in r.note()
    slow = ratio("cpu", [[2.0], [3.0], [1.0]], "xnnpack", [[3.0], [6.3], [2.69]])
    assert round(slow.value, 2) == round(1 / 2.10, 2) and not slow.uncertain and slow.as_dict()["verdict"] == "slow-down"
    assert Ratio.from_dict(r.as_dict()).per_round == [round(x, 4) for x in r.per_round]
