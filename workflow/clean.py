"""`invoke clean`: remove build outputs, caches and old logs, only inside the build directory, only what
torchdroid wrote.

Only names torchdroid itself writes under the build directory are candidates (never a file found by a
pattern elsewhere), and each must show that torchdroid wrote it (``toolchain.fsutil.check_removable``, the
guard every deleter uses: its marker, a record of its own, or the kind's own recogniser below); a git
checkout with local changes is never removed.  Anything that fails the guard refuses the whole clean before
anything is removed.  While removing, clean holds the lock each writing task holds on its directory, so it
never deletes under a running convert, make-app or build-android.  A symlink is removed as a link, never
followed.  ``dry_run`` lists without removing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from toolchain import layout
from toolchain.errors import NoSpaceError, UsageError
from toolchain.fsutil import (LOCK_SUFFIX, Ownership, check_removable, forget_written, output_lock, ownership,
                              record_removed)
from toolchain.logs import torchdroid_logs
from toolchain.layout import Layout

log = logging.getLogger(__name__)

# what each kind names, relative to the build directory (toolchain/layout.py); outputs also take app-<model>
KINDS = {
    "logs": (),  # logs/*.log older than the limit
    "outputs": layout.OUTPUTS,
    "caches": layout.CACHES,  # PyTorch checkouts of build-android, remembered facts (cache/)
    "results": layout.HISTORY,  # the benchmark history: only when asked for by name
}
DEFAULT_KINDS = ("logs",)
CHECKOUT_RE = re.compile(r"(pytorch|executorch)-[0-9a-f]{12}")  # build-android's src/<name>-<sha12>
ANDROID_NAMES = {layout.BUILD_INFO, "build.log", "source.log", "cmake", "executorch", "install"}


@dataclass
class CleanPlan:
    build_dir: Path
    targets: List[Tuple[Path, int]] = field(default_factory=list)  # (path, bytes)
    judged: Dict[Path, Ownership] = field(default_factory=dict)  # targets with a manifest: their files, judged

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.targets)

    def kept(self) -> List[str]:
        """Every file clean keeps in a directory it cleans, with why (the user's, or edited since)."""
        return [line for found in self.judged.values() for line in found.kept_lines()]


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(root) / name).lstat().st_size
    return total


def _check_build_dir(build_dir: Path) -> Path:
    resolved = build_dir.resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve() or resolved == Path.cwd().resolve():
        raise UsageError(f"refusing to clean {build_dir}: it is {resolved}, not a build directory of its own",
                         remedy="set build_dir (INVOKE_BUILD_DIR or invoke.yaml) to a directory only torchdroid "
                                "writes, e.g. build")
    return resolved


# --------------------------------------------------------------------------- what torchdroid wrote, per name


def _checkout(path: Path) -> bool:
    """A build-android checkout: its name, and a git checkout (changes are refused by the guard itself)."""
    return bool(CHECKOUT_RE.fullmatch(path.name)) and (path / ".git").exists()


def _android(path: Path) -> bool:
    """build-android's tree: one directory per ABI, each holding its log, CMake tree or build-info."""
    kids = [e for e in path.iterdir() if not e.name.startswith(".")]
    return all(e.is_dir() and not e.is_symlink() and any((e / n).exists() for n in ANDROID_NAMES) for e in kids)


def _results(path: Path) -> bool:
    """deploy's results directory: a results database of torchdroid's (the JSON exports are records)."""
    db = path / "results.sqlite"
    if not db.is_file() or db.is_symlink():
        return False
    with contextlib.suppress(sqlite3.Error):
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2)) as con:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            return {"meta", "runs", "results"} <= names
    return False


RECOGNISERS: Dict[str, Callable[[Path], bool]] = {layout.ANDROID: _android, layout.RESULTS: _results}


def _ours(name: str) -> Optional[Callable[[Path], bool]]:
    return RECOGNISERS.get(name)


# --------------------------------------------------------------------------- plan and execute


def _names(root: Path, kind: str) -> List[str]:
    """The known names of ``kind``; outputs also take make-app's app-<model> directories."""
    names = list(KINDS[kind])
    if kind == "outputs" and root.is_dir():
        names += sorted(e.name for e in root.iterdir() if layout.APP_DIR_RE.fullmatch(e.name))
    return names


def _candidates(root: Path, kinds: Sequence[str]) -> List[Tuple[Path, str]]:
    """(path, what) of every existing known name of the kinds asked for; src/ is judged per checkout."""
    found = []
    for kind in kinds:
        for name in _names(root, kind):
            target = root / name
            if not (target.exists() or target.is_symlink()):
                continue
            if name == layout.SRC and target.is_dir() and not target.is_symlink():
                for child in sorted(target.iterdir()):
                    found.append((child, "a build-android checkout"))
                continue
            found.append((target, f"clean --what {kind}"))
    return found


def _judge(plan: CleanPlan, root: Path, target: Path, what: str) -> None:
    """Add ``target`` to the plan if torchdroid may remove it (raises the guard's UsageError if not).  A directory
    with a manifest of what torchdroid wrote loses only those files, unchanged; everything else stays, named."""
    found = ownership(target)
    recognise = _checkout if target.parent == Layout(root).src else _ours(target.name)
    check_removable(target, what, ours=(lambda _p: True) if found is not None else recognise)
    if found is not None:
        plan.judged[target] = found
    plan.targets.append((target, _size(target) if found is None else sum(_size(target / f) for f in found.ours)))


def plan_clean(build_dir: Path, kinds: Sequence[str] = DEFAULT_KINDS, log_days: float = 14.0) -> CleanPlan:
    """What ``clean`` would remove: only existing known names inside ``build_dir`` that torchdroid wrote.

    Refuses (exit 2, nothing removed) when one of them is not torchdroid's, or is a checkout with changes."""
    root = _check_build_dir(Path(build_dir))
    plan = CleanPlan(Path(build_dir))
    refused: List[str] = []
    for target, what in _candidates(root, kinds):
        try:
            _judge(plan, root, target, what)
        except UsageError as e:
            refused.append(f"{e.what}" + (f" ({e.cause})" if e.cause else ""))
    if "logs" in kinds:
        _plan_logs(plan, Layout(root).logs, log_days)
    if refused:
        raise UsageError(f"refusing to clean {build_dir}: {len(refused)} item(s) there are not torchdroid's to remove; "
                         "nothing was removed", cause="\n  ".join([""] + refused),
                         remedy="move your own files out of the build directory (or point build_dir / "
                                "INVOKE_BUILD_DIR at a directory only torchdroid writes), commit or stash changes in "
                                "a checkout, or clean only the other kinds with --what")
    return plan


def _plan_logs(plan: CleanPlan, logs: Path, log_days: float) -> None:
    """The run logs older than ``log_days`` that torchdroid wrote (its manifest of the log directory); the other
    files there are kept and named."""
    limit = time.time() - log_days * 86400
    for path in torchdroid_logs(logs):
        if path.stat().st_mtime < limit:
            plan.targets.append((path, path.stat().st_size))
    found = ownership(logs)
    if found is not None and found.kept:
        plan.judged[logs] = found


def _locks(target: Path) -> List[Path]:
    """The directories whose writer lock clean must hold to remove ``target``: the target's own and every
    directory inside it that a writer locks (a lock file beside it: convert on models/, make-app on app/,
    build-android on android/<abi>/ and its ExecuTorch runtime on android/<abi>/executorch/)."""
    if target.is_symlink() or not target.is_dir():
        return []
    inner = (lock.parent / lock.name[1:-len(LOCK_SUFFIX)] for lock in target.rglob(f".*{LOCK_SUFFIX}")
             if lock.is_file() and not lock.is_symlink())
    return [target, *sorted(d for d in inner if d.is_dir() and not d.is_symlink())]


def execute(plan: CleanPlan) -> None:
    root = plan.build_dir.resolve()
    for target, _ in plan.targets:
        if root not in target.parents:  # pragma: no cover - plan_clean only names paths inside it
            raise UsageError(f"refusing to remove {target}: outside {root}")
        with contextlib.ExitStack() as held:
            for d in _locks(target):
                held.enter_context(output_lock(d, "invoke clean"))
            if target.is_symlink() or target.is_file():
                target.unlink(missing_ok=True)
                _forget(record_removed, target)  # a file of a directory torchdroid owns (a log): out of its manifest
            elif target in plan.judged:
                _remove_ours(target)
            elif target.is_dir():
                shutil.rmtree(target)


def _forget(drop, *args) -> None:
    """Drop removed files from their manifest; on a full disk (the manifest cannot be rewritten) the entries stay:
    they name files that no longer exist, and a file of the user's put there later is never taken for torchdroid's
    unless it has the same sha256 (toolchain/fsutil.ownership).  clean is what frees the space: it must not stop."""
    try:
        drop(*args)
    except NoSpaceError as e:
        log.warning("warning: %s (the manifest still lists the removed files: harmless)", e.what)


def _remove_ours(target: Path) -> None:
    """Remove torchdroid's unchanged files of ``target`` (judged again now, under the lock); the directory goes
    only when nothing else is in it, else the files kept stay with their directories and the manifest."""
    found = ownership(target)
    if found is None:
        return
    if not found.kept:
        shutil.rmtree(target)
        return
    for rel in found.ours:
        (target / rel).unlink(missing_ok=True)
    _forget(forget_written, target, found.ours)
    for root, dirs, files in os.walk(target, topdown=False):
        here = Path(root)
        if here != target and not here.is_symlink() and not any(here.iterdir()):
            here.rmdir()

