"""Collects every adversarial case's area, class and outcome; writes docs/adversarial.md on request.

``TORCHDROID_ADVERSARIAL_TABLE=docs/adversarial.md ./run test tests/adversarial`` rewrites the table
from the run itself, so the docs can never claim a case the suite does not hold.  A plugin registered by
tests/conftest.py, not this directory's conftest: under xdist only the controlling process sees every report,
and it never loads the conftest files of sub-directories (it does not collect).
"""

from __future__ import annotations

import os
from pathlib import Path

_ROWS: dict = {}

# Classes whose inputs are generated (Hypothesis), not listed: (class, how its inputs are generated, where).
GENERATED = (
    ("malformed config value, from a config file", "for every non-CLI key of toolchain/settings.py, values built "
     "from its kind: text that is no number, numbers outside the range, non-integral numbers, NaN/inf, booleans, "
     "texts that are not a choice, empty or NUL-holding paths, lists and mappings where a scalar belongs, list items "
     "that are not choices; resolved in-process (toolchain/resolve.py) and by the up-front config check: a usage "
     "error (exit 2) naming the key, nothing else", "tests/adversarial/test_generated.py"),
    ("malformed config value, from an INVOKE_* variable", "the same kinds as text (what a variable can hold); the "
     "error names the key and the variable", "tests/adversarial/test_generated.py"),
    ("model output: shape and structure", "tensors of 1 to 4 dimensions (sizes 1-5) nested in tuples and lists: "
     "top-1 is measured only for [N, classes] logits, never a crash", "tests/adversarial/test_generated.py"),
    ("file system fault under a running task", "the N-th os.replace or os.fsync of a real `invoke report` process "
     "(the commit and flush of every atomic write, toolchain/fsutil.py) fails with a generated errno: ENOSPC, "
     "EDQUOT, EROFS, EACCES, EPERM or EIO (tests/adversarial/fsfault_invoke.py): one message, exit 2, no "
     "traceback, no partial file, none of the user's files lost", "tests/adversarial/test_fs_faults.py"),
    ("model output: NaN and infinity", "the same structures with a NaN, +inf or -inf put at a generated place: "
     "always refused, naming the output", "tests/adversarial/test_generated.py"),
    ("SIGINT/SIGTERM at each stage boundary", "a real `invoke convert` of a tiny model and its host NNAPI check, "
     "stopped by SIGINT and by SIGTERM at each boundary line (progress, each mode saved, the manifest, the host "
     "library, each model checked) a signal-free run wrote to its log: exit 130/143 with one message, no "
     "traceback, the locks free, no child process left, the outputs whole or absent, the user's files kept",
     "tests/adversarial/test_signals.py"),
)


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
    if hasattr(session.config, "workerinput"):  # a worker process sees its share; the controller sees every report
        return
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
        "## Generated classes",
        "",
        "These classes are covered by generated inputs (Hypothesis, bounded by `max_examples`), not by listed",
        "cases; each generated test is one row of the table below.",
        "",
        "| class | how the inputs are generated | where |",
        "|---|---|---|",
        *(f"| {klass} | {how} | `{where}` |" for klass, how, where in GENERATED),
        "",
        "## Cases",
        "",
        "| area | class | case | outcome |",
        "|---|---|---|---|",
    ]
    for nodeid, (area, klass, outcome) in sorted(_ROWS.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0])):
        case = nodeid.split("::", 1)[-1]
        lines.append(f"| {area} | {klass} | `{case}` | {outcome} |")
    Path(target).write_text("\n".join(lines) + "\n", encoding="utf-8")
