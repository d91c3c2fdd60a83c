"""What tasks print: tables that fit the terminal, one style of notes and warnings, JSON on request.

* Tables take the terminal's width (``COLUMNS`` wins); when stdout is not a terminal (a pipe, a file, CI)
  and ``COLUMNS`` is not set, at most :data:`PIPE_WIDTH` columns.  A table that does not fit whole is
  printed as a list instead (one block per row: the first cell, then ``column: value`` lines), so a
  number or a header is never wrapped in the middle and nothing is cut.  One number per cell.
* ``note(...)`` and ``warning(...)`` print ``note: ...`` / ``warning: ...`` lines, indented
  continuation lines included.
* ``emit_json(obj)`` prints dataclasses, paths and tuples as JSON (``--json`` on the result tasks).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence


PIPE_WIDTH = 120  # not a terminal (a log, CI, `| less`): never wider than this


def _console():
    import os

    from rich.console import Console

    width = None
    if not sys.stdout.isatty() and not os.environ.get("COLUMNS", "").isdigit():
        width = PIPE_WIDTH
    return Console(highlight=False, soft_wrap=False, width=width)


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, numeric: Sequence[str] = ()) -> None:
    """A rich table when it fits the width whole, else the same cells as a list (:func:`_as_list`)."""
    from rich.console import Console
    from rich.table import Table

    cells = [["" if x is None else str(x) for x in row] for row in rows]
    t = Table(title=title, title_justify="left", expand=False)
    for col in columns:
        t.add_column(col, no_wrap=True, justify="right" if col in numeric else "left")
    for row in cells:
        t.add_row(*row)
    console = _console()
    if Console(width=100_000).measure(t).maximum <= console.width:
        console.print(t)
    else:
        _as_list(title, columns, cells, console.width)


def _as_list(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> None:
    """The narrow layout: per row its first cell, then ``column: value`` lines; only text wraps, at spaces."""
    import textwrap

    def wrapped(text: str, head: str, rest: str) -> list:
        return textwrap.wrap(text, width=width, initial_indent=head, subsequent_indent=rest, break_long_words=True,
                             break_on_hyphens=False) or [head.rstrip()]

    out = textwrap.wrap(title, width=width) if title else []
    for row in rows:
        out.extend(wrapped(row[0] if row else "", "- ", "  "))
        for col, value in zip(columns[1:], row[1:]):
            if value != "":
                out.extend(wrapped(value, f"    {col}: ", "      "))
    print("\n".join(out))
    sys.stdout.flush()


def note(text: str) -> None:
    _line("note", text)


def warning(text: str) -> None:
    _line("warning", text)


def _line(label: str, text: str) -> None:
    print(f"{label}: " + str(text).replace("\n", "\n  "))
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
    print(json.dumps(data, indent=2, sort_keys=False))
