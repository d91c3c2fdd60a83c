"""The adversarial suite's one way to run a task as a user would, and to judge the outcome.

Every case runs the real ``invoke`` command in a fresh directory (relative build dir, no
``INVOKE_*`` or ``ANDROID_*`` variables unless the case sets them) -- as a child of a fork server that has
torch imported but none of our modules (tests/adversarial/forkrun.py; ``fresh=True`` or a changed start-up
variable gets a new interpreter, ``TORCHDROID_TEST_FORK=0`` for all) -- and asserts:

* the exit code's *kind* (2 usage, 3 tool, 4 tool failed, 5 record, 6 conversion, 7 device,
  8 verification, 9 compatibility, 0 success);
* no Python traceback and no C++ abort on the console (unless ``--debug`` was asked for);
* the message names the cause and a fix (``fix:`` line, or the words the case expects);
* nothing of the user's lost: files the case put there are byte-identical afterwards;
* no ``*.partial`` / ``.tmp*`` files left behind under the case's directory.

Cases are tagged with ``@adversarial(area, klass)`` so ``tests/adversarial/table.py`` can write
the table in docs/adversarial.md from the suite itself.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, Optional, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVOKE = str(Path(sys.executable).parent / "invoke")

EXIT_KINDS = {
    "ok": 0,
    "usage": 2,
    "tool": 3,
    "tool-failed": 4,
    "record": 5,
    "conversion": 6,
    "device": 7,
    "verification": 8,
    "compat": 9,
    "partly converted": 10,
    "interrupted": 130,
}

TRACEBACK_MARKS = ("Traceback (most recent call last)", "terminate called after throwing", "Aborted (core dumped)")
PARTIAL_MARKS = (".partial", ".tmp-", ".torchdroid-tmp")


def adversarial(area: str, klass: str):
    """Tag a case with the task area and the class of misuse it covers (for the docs table)."""
    return pytest.mark.adversarial(area=area, klass=klass)


@dataclass
class Outcome:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def clean_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment of a user with nothing set: no INVOKE_*, no ANDROID_*, adb on a dead port (this process's
    :func:`held_dead_port`: nothing answers there and nothing can start there)."""
    from tests.virtual_device.harness import held_dead_port

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_", "TORCHDROID_"))}
    env["ANDROID_ADB_SERVER_PORT"] = str(held_dead_port())
    env["CI"] = "1"
    env.update(extra or {})
    return env


_SERVER: list = []  # this process's fork server (tests/adversarial/forkrun.py), started by the first case


def fork_server():
    """This process's fork server, or None when ``TORCHDROID_TEST_FORK=0``.  A new one when this process's own
    environment changed a variable read at start-up since the server started (torch, imported by an in-process
    test, sets ``TORCHINDUCTOR_CACHE_DIR``): every case inherits it, as a real child would."""
    if os.environ.get("TORCHDROID_TEST_FORK", "1") == "0":
        return None
    from tests.adversarial.forkrun import ForkServer, import_time_keys

    base = clean_env()
    if _SERVER and import_time_keys(base, _SERVER[0].env):
        _SERVER.pop().close()
    if not _SERVER:
        _SERVER.append(ForkServer(INVOKE, base))
    return _SERVER[0]


def _close_fork_server() -> None:
    while _SERVER:
        _SERVER.pop().close()


atexit.register(_close_fork_server)


def run_invoke(args: Sequence[str], cwd: Path, env: Optional[Dict[str, str]] = None, timeout: float = 600,
               stdin: Optional[str] = None, fresh: bool = False) -> Outcome:
    """Run ``invoke ARGS`` with the repository's tasks.py from ``cwd`` (a user's working directory).

    The program runs in a child forked from this process's fork server (torch already imported, none of our
    modules: tests/adversarial/forkrun.py), unless ``fresh`` asks for a new interpreter (a case about start-up
    itself) or the case's environment changes a variable read at start-up or import, which gets one too: tests/cli.py
    with the case's clean environment."""
    from tests.cli import invoke

    res = invoke(cwd, "--search-root", str(ROOT), *args, env=clean_env(env), timeout=timeout, stdin=stdin, fresh=fresh)
    return Outcome(res.returncode, res.stdout, res.stderr)


def snapshot(paths: Iterable[Path]) -> Dict[Path, str]:
    """sha256 of every file under the given paths (to prove nothing of the user's was lost)."""
    out: Dict[Path, str] = {}
    for p in paths:
        p = Path(p)
        files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else []
        for f in files:
            out[f] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def partial_files(root: Path) -> list:
    return [p for p in Path(root).rglob("*") if any(m in p.name for m in PARTIAL_MARKS)]


def assert_clean(outcome: Outcome, kind: str, *, mentions: Sequence[str] = (), needs_fix: bool = True,
                 kept: Optional[Dict[Path, str]] = None, root: Optional[Path] = None) -> None:
    """The case's verdict: exit kind, no traceback, cause and fix named, nothing lost, nothing partial."""
    want = EXIT_KINDS[kind]
    assert outcome.code == want, f"exit {outcome.code}, wanted {want} ({kind})\n{outcome.text[-3000:]}"
    for mark in TRACEBACK_MARKS:
        assert mark not in outcome.text, f"traceback/abort on the console:\n{outcome.text[-3000:]}"
    low = outcome.text.lower()
    for word in mentions:
        assert word.lower() in low, f"message does not mention {word!r}:\n{outcome.text[-3000:]}"
    if kind != "ok" and needs_fix:
        assert "fix:" in low or "fix " in low or "use " in low or "run " in low, \
            f"no fix in the message:\n{outcome.text[-3000:]}"
    if kept:
        after = snapshot(kept.keys())
        for path, digest in kept.items():
            assert after.get(path) == digest, f"user file changed or lost: {path}"
    if root is not None:
        left = partial_files(root)
        assert not left, f"partial files left behind: {left}"
