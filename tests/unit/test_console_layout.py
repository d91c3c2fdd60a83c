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


def _left_out(out: str, columns) -> list:
    """The columns the table's note says were left out to fit (the note may wrap over lines)."""
    flat = " ".join(out.split())
    if "(left out: " not in flat:
        return []
    named = flat.split("(left out: ", 1)[1].split(";", 1)[0]
    return [c.strip() for c in named.split(",") if c.strip() in columns]


@pytest.mark.parametrize("width", [None, "80", "60", "200"])
@pytest.mark.parametrize("seed", range(25))
def test_generated_tables_fit_and_keep_every_number_and_word_whole(seed, width, capsys, monkeypatch):
    """Fits the width; a table, never a `column: value` list; every number and every word of the columns shown is
    there whole (a word, an option or a path is never split over lines); a column left out is named, and only
    when the table could not fit with it; the first column always stays."""
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
    assert not any(line.startswith("- ") for line in lines), out  # not the list layout
    dropped = _left_out(out, columns)
    assert columns[0] not in dropped
    shown = [i for i, c in enumerate(columns) if c not in dropped]
    tokens = {t for line in lines for t in line.replace("│", " ").replace("┃", " ").split()}
    for i in shown:
        for row in rows:
            if columns[i] in numeric:
                assert any(row[i] in line for line in lines), (row[i], out)  # whole, on one line
            for word in row[i].split():
                assert word in tokens, (word, out)  # whole, never split
    if dropped:  # left out only when needed: the narrowest whole table is wider than the output
        def narrowest(i: int) -> int:
            cells = [r[i] for r in rows] if columns[i] in numeric else [w for r in rows for w in r[i].split()]
            return max(len(w) for w in [*columns[i].split(), *cells])

        assert 3 * len(columns) + 1 + sum(narrowest(i) for i in range(len(columns))) > limit, out


def test_a_table_wider_than_the_terminal_drops_low_priority_columns_not_becomes_a_list(capsys, monkeypatch):
    """Issue 31: at 80 columns a table became `column: value` lists; now the columns the caller ranks lowest go."""
    monkeypatch.setenv("COLUMNS", "80")
    columns = ["model", "median ms", "p90 ms", "min ms", "max ms", "mean ms", "std ms", "first ms", "load ms",
               "model MB"]
    console.table("t", columns, [["mobilenetv2-quant_none-cpu.pt"] + ["123.45"] * 9], numeric=columns[1:],
                  drop=("std ms", "mean ms", "max ms", "load ms"))
    out = capsys.readouterr().out
    assert "mobilenetv2-quant_none-cpu.pt" in out and "model: " not in out and "- mobilenetv2" not in out
    dropped = _left_out(out, columns)
    assert "std ms" in dropped and "mean ms" in dropped and "median ms" not in dropped, out
    assert "median" in out and max(len(line) for line in out.splitlines()) <= 80


def test_notes_wrap_at_spaces_on_a_terminal_and_never_inside_an_option(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setattr(console.sys.stdout, "isatty", lambda: True, raising=False)
    console.note("use invoke convert --mode/long-option-name-here to pick another lane of things")
    out = capsys.readouterr().out
    assert "--mode/long-option-name-here" in out.split(), out
    assert max(len(line) for line in out.splitlines() if "--mode" not in line) <= 40


def test_each_note_and_warning_once_per_run(capsys):
    with console.one_run():
        for _ in range(3):
            console.warning("random weights: predictions are meaningless")
            console.note("a note")
            console.table("t", ["a"], [["x"]])
        with console.one_run():  # a stage inside `invoke all` is the same run
            console.warning("random weights: predictions are meaningless")
    console.note("a note")  # a new run
    out = capsys.readouterr().out
    assert out.count("random weights") == 1 and out.count("note: a note") == 2 and out.count("│ x") == 1, out


def test_the_pipe_width_was_unbounded_before(capsys, monkeypatch):
    """Negative control for the checker: the old pipe width (1000) with wrapping cells gives a line over 120."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(console, "PIPE_WIDTH", 1000)
    console.table("t", ["a", "b"], [["x", "word " * 60]])
    assert max(len(line) for line in capsys.readouterr().out.splitlines()) > 120


def test_an_error_on_a_terminal_wraps_at_spaces_and_keeps_its_indentation(monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    monkeypatch.setattr(console.sys.stderr, "isatty", lambda: True, raising=False)
    text = ("torchdroid deploy: bad input: --serial names no device here\n"
            "  fix: pass one of the serials adb lists, e.g. invoke deploy --serial=emulator-5554 --mode/long-option")
    out = console.for_stderr(text)
    assert "--serial=emulator-5554" in out.split() and "--mode/long-option" in out.split(), out
    assert all(len(line) <= 50 for line in out.splitlines()), out
    assert all(line.startswith("  ") for line in out.splitlines()[1:]), out  # the fix stays indented under it
    monkeypatch.setattr(console.sys.stderr, "isatty", lambda: False, raising=False)
    assert console.for_stderr(text) == text  # a pipe gets it as it is
