"""What tasks print: tables that fit the terminal, one channel for notes and warnings, JSON on request.

* Tables take the terminal's width (``COLUMNS`` wins); when stdout is not a terminal (a pipe, a file, CI) and
  ``COLUMNS`` is not set, at most :data:`PIPE_WIDTH` columns.  Text cells wrap at spaces only (a word, a path, an
  option or a number is never split); when the table still does not fit, its lowest-priority columns are left out
  (``drop``: the caller's order, else from the right; the first column always stays) and one line names them.  Only
  a table whose first column alone cannot fit becomes a list (the first cell, then ``column: value`` lines).
* ``note(...)`` and ``warning(...)`` print ``note: ...`` / ``warning: ...`` lines; within a run (:func:`one_run`)
  each text is printed once, however many stages say it.  On a terminal long lines are wrapped at spaces, never
  inside a word or an option; in a pipe each stays one line (a pager or an editor wraps it, grep finds it).
* ``emit_json(obj)`` prints dataclasses, paths and tuples as JSON (``--json`` on every task that prints a table);
  while the stage runs, :func:`quiet_stdout` points file descriptor 1 itself at stderr, so what a user's model
  prints (Python's ``print`` or TorchScript's C++) and what a child process writes never reach the JSON on stdout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, List, Optional, Sequence

PIPE_WIDTH = 120  # not a terminal (a log, CI, `| less`): never wider than this

_shown: Optional[set] = None  # within a run: what the notes channel has printed (None: outside a run, no memory)
_depth = 0  # runs entered: 2 and more while `invoke all` runs a stage's task


@contextlib.contextmanager
def one_run() -> Iterator[None]:
    """A run (a task, or `invoke all` with every stage it calls): each note, warning and table is printed once in
    it.  Nested runs are the outer run."""
    global _shown, _depth
    outer = _shown is None
    if outer:
        _shown = set()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if outer:
            _shown = None


def next_step(text: str) -> None:
    """``next: COMMAND  (why)``, the command a user runs after this task; not said inside a larger run (`invoke all`
    goes on to the next stage itself, and its summary says what is left)."""
    if _depth <= 1:
        _print(f"next: {text}")


def first_time(text: str) -> bool:
    """True when ``text`` was not said yet in this run (and remembers it): neither on its own nor as part of a longer
    note or warning (the converter's "random (untrained) weights: ..." after `all` warned that it uses them).
    Always True outside a run."""
    if _shown is None:
        return True
    key = " ".join(str(text).split())
    if key in _shown or any(key in said for said in _shown if not said.startswith(_TABLE)):
        return False
    _shown.add(key)
    return True


_TABLE = "\0table "  # tables are remembered whole, never taken as part of a note


def width() -> int:
    """The columns output may take: ``COLUMNS``, else the terminal's, else :data:`PIPE_WIDTH` in a pipe."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not sys.stdout.isatty():
        return PIPE_WIDTH
    import shutil

    return shutil.get_terminal_size((PIPE_WIDTH, 24)).columns


def _console(columns: int):
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=columns, file=sys.stdout)


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, numeric: Sequence[str] = (),
          drop: Sequence[str] = ()) -> None:
    """A rich table in :func:`width` columns: whole when it fits, else text cells wrapped at spaces, else without
    its lowest-priority columns (``drop`` first, in that order, then from the right), named on one line after it."""
    n = len(columns)
    cells = [[_cell(row, i) for i in range(n)] for row in rows]
    if not first_time(_TABLE + repr((title, list(columns), cells))):
        return  # the same table again in this run (a stage that reports what an earlier one showed)
    limit = width()
    spans = [_span(columns[i], [row[i] for row in cells], columns[i] in numeric) for i in range(n)]
    keep = _columns_that_fit(columns, spans, drop, limit)
    if _narrowest(keep, spans) > limit:
        return _as_list(title, columns, cells, limit)
    if title:  # above the table, wrapped at spaces to the output's width (not to the table's)
        _print("\n".join(_wrap(title, limit, "", "  ")))
    widths = _fit([spans[i] for i in keep], limit - _chrome(keep))
    _console(limit).print(_rich_table([columns[i] for i in keep], [[row[i] for i in keep] for row in cells], widths,
                                      numeric))
    _say_left_out([columns[i] for i in range(n) if i not in keep], _chrome(range(n)) + sum(hi for _, hi in spans),
                  limit)


def _say_left_out(left_out: Sequence[str], whole: int, limit: int) -> None:
    if left_out:
        _print("\n".join(_wrap(f"(left out: {', '.join(left_out)}; COLUMNS={whole} shows them)", limit, "  ", "  ")))


def _cell(row: Sequence[Any], i: int) -> str:
    value = row[i] if i < len(row) else None
    return "" if value is None else str(value)


def _columns_that_fit(columns: Sequence[str], spans: Sequence[tuple], drop: Sequence[str], limit: int) -> List[int]:
    """The columns kept: all, less the lowest-priority ones (``drop``'s order, then from the right; never the
    first) until the narrowest table fits ``limit``."""
    keep = list(range(len(columns)))
    order = [columns.index(c) for c in drop if c in columns[1:]]
    order += [i for i in reversed(range(1, len(columns))) if i not in order]
    while _narrowest(keep, spans) > limit and len(keep) > 1:
        keep.remove(order.pop(0))
    return keep


def _narrowest(keep: Sequence[int], spans: Sequence[tuple]) -> int:
    return _chrome(keep) + sum(spans[i][0] for i in keep)


def _span(header: str, texts: Sequence[str], whole: bool) -> tuple:
    """(narrowest, widest) a column can be: its header's and cells' longest word (a cell's whole line when
    ``whole``: a number with its unit or mark stays on one line), its longest line."""
    from rich.cells import cell_len

    lines = [line for text in [header, *texts] for line in str(text).split("\n")]
    widest = max((cell_len(line) for line in lines), default=0)
    words = [w for line in lines for w in line.split()]
    if whole:
        words += [line for text in texts for line in str(text).split("\n")]
    return max((cell_len(w) for w in words), default=0), widest


def _chrome(keep: Iterable[int]) -> int:
    """Borders and padding of a table with these columns: one space each side of a cell, a border between them."""
    n = len(list(keep))
    return 3 * n + 1


def _fit(spans: Sequence[tuple], room: int) -> List[int]:
    """Column widths within ``room``: each as wide as its content, then the widest text columns narrowed toward
    their longest word, one column at a time (a caller has checked that the narrowest widths fit)."""
    widths = [hi for _, hi in spans]
    while sum(widths) > room:
        slack = [(w - lo, i) for i, ((lo, _), w) in enumerate(zip(spans, widths)) if w > lo]
        if not slack:
            break
        _, i = max(slack, key=lambda x: (widths[x[1]], x[0]))
        widths[i] -= 1
    return widths


def _rich_table(columns: Sequence[str], cells: Sequence[Sequence[str]], widths: Sequence[int],
                numeric: Sequence[str]):
    from rich.table import Table

    t = Table(expand=False)
    for col, w in zip(columns, widths):
        # text and headers wrap at spaces only: every word, and every number cell, fits its column's width
        t.add_column(col, width=w, overflow="fold", justify="right" if col in numeric else "left")
    for row in cells:
        t.add_row(*row)
    return t


def _as_list(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], limit: int) -> None:
    """The last resort, for a first column wider than the output: per row its first cell, then ``column: value``
    lines; only text wraps, at spaces."""
    out = _wrap(title, limit, "", "") if title else []
    for row in rows:
        out.extend(_wrap(row[0] if row else "", limit, "- ", "  "))
        for col, value in zip(columns[1:], row[1:]):
            if value != "":
                out.extend(_wrap(value, limit, f"    {col}: ", "      "))
    _print("\n".join(out))


def _wrap(text: str, limit: int, head: str, rest: str) -> List[str]:
    """``text`` in lines of at most ``limit`` columns, broken at spaces only: a word, a path or an option longer
    than the line stays whole on a line of its own (wider, never split)."""
    import textwrap

    return textwrap.wrap(text, width=limit, initial_indent=head, subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False) or [head.rstrip()]


def for_stderr(text: str) -> str:
    """An error message as Invoke prints it on stderr: on a terminal each line wrapped at spaces to the width (its
    indentation kept), so a hint never breaks inside a word or an option; unchanged in a pipe."""
    if not sys.stderr.isatty():
        return text
    limit = width()
    out = []
    for line in text.split("\n"):
        indent = line[:len(line) - len(line.lstrip())]
        out.extend(_wrap(line.strip(), limit, indent, indent + "  ") if line.strip() else [line])
    return "\n".join(out)


def note(text: str) -> None:
    _line("note", text)


def warning(text: str) -> None:
    _line("warning", text)


def _line(label: str, text: str) -> None:
    """``label: text`` once per run; continuation lines indented; wrapped at spaces on a terminal only."""
    if not first_time(str(text)):
        return
    lines = str(text).split("\n")
    if sys.stdout.isatty():
        limit = width()
        out = _wrap(f"{label}: {lines[0]}", limit, "", "  ")
        for line in lines[1:]:
            out.extend(_wrap(line, limit, "  ", "    "))
    else:
        out = [f"{label}: {lines[0]}"] + [f"  {line}" for line in lines[1:]]
    _print("\n".join(out))


def _print(text: str) -> None:
    print(text)
    sys.stdout.flush()


def jsonable(obj: Any) -> Any:
    """Dataclasses, paths, tuples, sets and mappings as plain JSON values."""
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj else None  # NaN is not JSON
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    return jsonable(_fields(obj))


def _fields(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if not f.name.startswith("_")}
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "__dict__"):
        return {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    return str(obj)


def emit_json(obj: Any, extra: Optional[dict] = None) -> None:
    data = jsonable(obj)
    if extra and isinstance(data, dict):
        data.update(jsonable(extra))
    text = json.dumps(data, indent=2, sort_keys=False)
    if _json_fd is None:
        return print(text)
    with os.fdopen(os.dup(_json_fd), "w", encoding="utf-8") as real:  # the real stdout (see quiet_stdout)
        real.write(text + "\n")


_json_fd: Optional[int] = None  # inside quiet_stdout(True): the real stdout, where only emit_json writes


def _stdout_fd() -> Optional[int]:
    try:
        return sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a stream without a descriptor (a test's capture)
        return None


@contextlib.contextmanager
def quiet_stdout(as_json: bool) -> Iterator[None]:
    """With ``--json``, everything written to stdout inside the block goes to stderr instead, at the descriptor
    (``dup2``): Python's ``print``, C++'s ``std::cout`` and child processes alike.  The real stdout, duplicated
    first, is where :func:`emit_json` writes the one JSON document, inside the block or after it."""
    global _json_fd
    fd = _stdout_fd() if as_json and _json_fd is None else None
    if fd is None:
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
            yield
        return
    sys.stdout.flush()
    _json_fd = os.dup(fd)
    try:
        os.dup2(sys.stderr.fileno(), fd)
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(_json_fd, fd)
        os.close(_json_fd)
        _json_fd = None
