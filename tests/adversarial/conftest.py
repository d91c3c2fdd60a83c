"""Collects every adversarial case's area, class and outcome; writes docs/adversarial.md on request.

``TORCHDROID_ADVERSARIAL_TABLE=docs/adversarial.md ./run test tests/adversarial`` rewrites the table
from the run itself, so the docs can never claim a case the suite does not hold.
"""

from __future__ import annotations

import os
from pathlib import Path

_ROWS: dict = {}


def pytest_runtest_logreport(report):
    if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
        return
    for key, value in report.user_properties:
        if key == "adversarial":
            _ROWS[report.nodeid] = (*value, report.outcome)


def pytest_collection_modifyitems(items):
    for item in items:
        mark = item.get_closest_marker("adversarial")
        if mark is not None:
            item.user_properties.append(("adversarial", (mark.kwargs.get("area", "?"), mark.kwargs.get("klass", "?"))))


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001
    target = os.environ.get("TORCHDROID_ADVERSARIAL_TABLE")
    if not target or not _ROWS:
        return
    lines = [
        "# The adversarial suite",
        "",
        "Written by `TORCHDROID_ADVERSARIAL_TABLE=docs/adversarial.md ./run test tests/adversarial` from the run",
        "itself. Each case runs the real `invoke` from a fresh directory as a careless or unlucky user would and",
        "asserts the exit code's kind, no traceback, cause and fix in the message, nothing of the user's lost",
        "and no partial file left (`tests/adversarial/harness.py`).",
        "",
        f"{len(_ROWS)} cases, {sum(1 for r in _ROWS.values() if r[2] == 'passed')} clean.",
        "",
        "| area | class | case | outcome |",
        "|---|---|---|---|",
    ]
    for nodeid, (area, klass, outcome) in sorted(_ROWS.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0])):
        case = nodeid.split("::", 1)[-1]
        lines.append(f"| {area} | {klass} | `{case}` | {outcome} |")
    Path(target).write_text("\n".join(lines) + "\n", encoding="utf-8")
