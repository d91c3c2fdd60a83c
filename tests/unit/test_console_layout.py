"""Tables fit where they go: at most the terminal's width (COLUMNS) or 120 columns in a pipe, a number is never
split over two lines, nothing is cut.  Generated tables (seeded) rather than a list of cases."""

from __future__ import annotations

import random
import string

import pytest

from toolchain import console


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase + "/._-") for _ in range(rng.randint(1, 18)))


def _table(rng: random.Random):
    columns = [f"col{i}" + "x" * rng.randint(0, 12) for i in range(rng.randint(2, 9))]
    numeric = [c for c in columns[1:] if rng.random() < 0.5]
    rows = []
    for _ in range(rng.randint(1, 6)):
        row = []
        for c in columns:
            if c in numeric:
                row.append(f"{rng.uniform(0, 100000):.{rng.randint(0, 3)}f}")
            else:
                row.append(" ".join(_word(rng) for _ in range(rng.randint(0, 12))))
        rows.append(row)
    return columns, rows, numeric


@pytest.mark.parametrize("width", [None, "80", "60", "200"])
@pytest.mark.parametrize("seed", range(25))
def test_generated_tables_fit_and_keep_every_number_whole(seed, width, capsys, monkeypatch):
    if width is None:
        monkeypatch.delenv("COLUMNS", raising=False)  # pytest's stdout is not a terminal: the pipe width
    else:
        monkeypatch.setenv("COLUMNS", width)
    limit = int(width) if width else console.PIPE_WIDTH
    columns, rows, numeric = _table(random.Random(seed))
    console.table("title", columns, rows, numeric=numeric)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= limit, out
    numbers = {row[columns.index(c)] for row in rows for c in numeric}
    for n in numbers:  # whole, on one line: a table cell or a `column: value` line
        assert any(n in line.split() or line.strip().endswith(": " + n) for line in lines), (n, out)
    words = {w for row in rows for cell in row for w in cell.split() if len(w) < limit - 10}
    flat = out.replace("\n", " ")
    assert all(w in flat for w in words)  # nothing is cut


def test_the_pipe_width_was_unbounded_before(capsys, monkeypatch):
    """Negative control for the checker: the old pipe width (1000) with wrapping cells gives a line over 120."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(console, "PIPE_WIDTH", 1000)
    console.table("t", ["a", "b"], [["x", "word " * 60]])
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) > 120
