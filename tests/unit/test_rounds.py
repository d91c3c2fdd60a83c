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
    assert stats["repeats"] == 3 and stats["min_ms"] <= stats["median_ms"] <= stats["max_ms"]


def test_a_ratio_whose_rounds_spread_wider_than_its_difference_is_uncertain():
    steady = ratio("float", [[10.0, 10.0], [10.2, 10.2], [9.8, 9.8]], "int8", [[4.0], [4.1], [3.9]])
    assert round(steady.value, 2) == 2.5 and not steady.uncertain
    # 1.05x overall, but one round says 0.8x and another 1.3x: the difference is noise
    noisy = ratio("float", [[10.0], [8.0], [13.0]], "int8", [[9.5], [10.0], [10.0]])
    assert noisy.uncertain and noisy.low < 1.0 < noisy.high and "not a measured difference" in noisy.note()
    assert Ratio("a", "b", 1.5, [1.5]).uncertain is False  # one round: no spread to judge
    assert noisy.as_dict()["uncertain"] is True
