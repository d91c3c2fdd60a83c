"""The PyTorch source: the pinned commit with its submodules, fetched cheaply and reused.

git itself is :class:`toolchain.tools.git.Git`.  An existing checkout is reused when HEAD is the pin and it
has no local changes; a checkout with local changes is never touched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import List, Tuple

from toolchain.errors import ToolFailed, UsageError
from toolchain.tools.git import SHA_RE, Git, SubmoduleState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checkout:
    path: Path
    commit: str
    repo_url: str
    reused: bool
    submodules: Tuple[SubmoduleState, ...]


def _reuse_or_move(git: Git, url: str, commit: str, dest: Path) -> bool:
    """An existing checkout: refuse local changes, else reuse it at the pin or move it there.  True: reused."""
    changes = git.local_changes(dest)
    if changes:
        raise UsageError(
            f"the PyTorch checkout at {dest} has local changes; torchdroid will not build from it or touch it",
            cause="modified or untracked files: " + "; ".join(c.strip() for c in changes[:8])
                  + (" ..." if len(changes) > 8 else ""),
            remedy=f"commit or stash them (`git -C {dest} stash -u`), or remove the checkout "
                   f"(`rm -rf {dest}`) so it is fetched again",
        )
    head = git.head(dest)
    if head == commit:
        log.info("reusing the PyTorch checkout at %s (HEAD %s)", dest, commit[:12])
        return True
    log.info("checkout %s is at %s; fetching the pinned %s", dest, (head or "nothing")[:12], commit[:12])
    git.fetch_commit(dest, url, commit)
    git.run(["checkout", "--detach", "-q", commit], cwd=dest, what="`git checkout` of the pinned commit")
    return False


def _fresh_checkout(git: Git, url: str, commit: str, dest: Path) -> None:
    if dest.exists() and any(dest.iterdir()):
        raise UsageError(
            f"{dest} exists, is not empty and is not a git checkout",
            remedy=f"choose another source directory (pytorch.source_dir) or remove {dest}",
        )
    dest.mkdir(parents=True, exist_ok=True)
    log.info("fetching PyTorch %s from %s (that commit only)", commit[:12], url)
    git.run(["init", "-q"], cwd=dest, what="`git init`")
    git.run(["remote", "add", "origin", url], cwd=dest, what="`git remote add`")
    git.fetch_commit(dest, url, commit)
    git.run(["checkout", "--detach", "-q", commit], cwd=dest, what="`git checkout` of the pinned commit")


def _populate_submodules(git: Git, dest: Path, jobs: int) -> List[SubmoduleState]:
    states = git.submodule_status(dest)
    if not all(s.populated for s in states):
        log.info("populating submodules (%d; shallow, %d in parallel)", len(states), jobs)
        git.update_submodules(dest, jobs)
        states = git.submodule_status(dest)
    missing = [s for s in states if not s.populated]
    if missing:
        raise ToolFailed(
            f"{len(missing)} submodule(s) of the PyTorch checkout are not populated: "
            + ", ".join(f"{s.path} ({s.state})" for s in missing),
            cause="the build needs every submodule; these could not be fetched or were changed by hand",
            remedy=f"run `git -C {dest} submodule update --init --recursive` and look at its error",
        )
    return states


def ensure_checkout(git: Git, url: str, commit: str, dest: Path, jobs: int = 4) -> Checkout:
    """A clean checkout of ``commit`` with all submodules populated at ``dest`` (reused when it already is)."""
    commit = commit.strip().lower()
    if not SHA_RE.fullmatch(commit):
        raise UsageError(
            f"{commit!r} is not a full commit SHA",
            remedy="pin a full 40-character SHA (`git ls-remote <url> <tag>` shows a tag's SHA)",
        )
    dest = Path(dest)
    reused = False
    if git.is_repo(dest):
        reused = _reuse_or_move(git, url, commit, dest)
    else:
        _fresh_checkout(git, url, commit, dest)
    head = git.head(dest)
    if head != commit:
        raise ToolFailed(
            f"the checkout at {dest} is at {head}, not the pinned {commit}",
            cause="git checked out another commit",
            remedy=f"remove {dest} and run the task again",
        )
    states = _populate_submodules(git, dest, jobs)
    return Checkout(dest, commit, url, reused, tuple(states))
