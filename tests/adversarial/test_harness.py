"""The harness itself can fail: a traceback, a wrong exit kind, a lost file and a partial file are caught."""

from __future__ import annotations

import pytest

from tests.adversarial.harness import Outcome, assert_clean, snapshot


def test_harness_catches_a_traceback():
    with pytest.raises(AssertionError, match="traceback"):
        assert_clean(Outcome(2, "", "Traceback (most recent call last):\n  fix: x"), "usage")


def test_harness_catches_a_wrong_exit_kind():
    with pytest.raises(AssertionError, match="wanted 5"):
        assert_clean(Outcome(8, "", "fix: x"), "record")


def test_harness_catches_a_lost_file_and_a_partial_file(tmp_path):
    f = tmp_path / "user.txt"
    f.write_text("mine")
    kept = snapshot([f])
    f.write_text("changed")
    with pytest.raises(AssertionError, match="lost"):
        assert_clean(Outcome(2, "", "fix: x"), "usage", kept=kept)
    (tmp_path / "model.pt.partial").write_text("x")
    with pytest.raises(AssertionError, match="partial"):
        assert_clean(Outcome(2, "", "fix: x"), "usage", root=tmp_path)
