"""git, the tool: the verbs build-android needs (resolve a tag, fetch one commit shallow, submodules).

Only the pinned commit is fetched (``git fetch --depth 1 <url> <sha>``, which needs
``uploadpack.allowReachableSHA1InWant`` on the server: GitHub allows it); submodules are fetched shallow
and in parallel, falling back to full fetches where a server refuses.
"""

from __future__ import annotations

import logging
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from toolchain.errors import ToolFailed, ToolNotFound, UsageError
from toolchain.runner import RunResult, run

log = logging.getLogger(__name__)

SHA_RE = re.compile(r"[0-9a-f]{40}")
REF_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,199}")  # a tag or branch name we pass to git
REFUSED_SHA_PATTERNS = (
    "not our ref",
    "unadvertised object",
    "Server does not allow request for unadvertised",
    "couldn't find remote ref",
    "does not support shallow",
)


@dataclass(frozen=True)
class SubmoduleState:
    path: str
    sha: str
    state: str  # "ok" | "uninitialized" | "modified" | "conflict" | "empty"

    @property
    def populated(self) -> bool:
        return self.state == "ok"


def parse_submodule_status(text: str) -> List[SubmoduleState]:
    """Parse ``git submodule status --recursive`` (first column: ' ', '-', '+', 'U')."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        flag, rest = line[0], line[1:]
        parts = rest.split()
        if len(parts) < 2:
            continue
        state = {" ": "ok", "-": "uninitialized", "+": "modified", "U": "conflict"}.get(flag, "ok")
        out.append(SubmoduleState(parts[1], parts[0], state))
    return out


class Git:
    """The git executable, with the verbs build-android needs."""

    def __init__(self, exe: str, log_path: Optional[Path] = None):
        self.exe = exe
        self.log_path = log_path

    @classmethod
    def locate(cls, log_path: Optional[Path] = None) -> "Git":
        exe = shutil.which("git")
        if not exe:
            raise ToolNotFound("git is not installed", remedy="sudo apt-get install git (or your system's equivalent)")
        return cls(exe, log_path)

    def version(self) -> str:
        return self.run(["--version"], what="`git --version`").output.strip()

    def run(self, args: List[str], cwd: Optional[Path] = None, what: Optional[str] = None,
            check: bool = True, hint: Optional[Callable[[str], Optional[str]]] = None) -> RunResult:
        return run([self.exe, *args], cwd=cwd, log_path=self.log_path, check=check,
                   what=what or f"`git {args[0]}`", hint=hint,
                   env={"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})

    # ------------------------------------------------------------------ queries

    def head(self, repo: Path) -> Optional[str]:
        res = self.run(["rev-parse", "--verify", "-q", "HEAD"], cwd=repo, check=False)
        return res.output.strip() if res.returncode == 0 else None

    def is_repo(self, path: Path) -> bool:
        if not path.is_dir():
            return False
        res = self.run(["rev-parse", "--show-toplevel"], cwd=path, check=False)
        return res.returncode == 0 and Path(res.output.strip()).resolve() == path.resolve()

    def local_changes(self, repo: Path) -> List[str]:
        """Modified tracked files (also inside submodules).  Untracked files are not "changes": the AAR build
        and code generators leave some in the source tree, and they do not alter the pinned sources."""
        res = self.run(["status", "--porcelain", "--untracked-files=no", "--ignore-submodules=none"], cwd=repo)
        return [line for line in res.lines if line.strip()]

    def submodule_status(self, repo: Path) -> List[SubmoduleState]:
        res = self.run(["submodule", "status", "--recursive"], cwd=repo)
        states = parse_submodule_status(res.output)
        out = []
        for s in states:
            if s.state == "ok":
                d = repo / s.path
                if not d.is_dir() or not any(p.name != ".git" for p in d.iterdir()):
                    s = SubmoduleState(s.path, s.sha, "empty")
            out.append(s)
        return out

    def commit_date(self, repo: Path, rev: str = "HEAD") -> str:
        return self.run(["show", "-s", "--format=%cI", rev], cwd=repo).output.strip()

    def resolve_ref(self, url: str, ref: str) -> Tuple[str, str]:
        """The commit a tag (or branch) names on the server, by `git ls-remote`: (sha, full ref name).

        Annotated tags are peeled to their commit.  Nothing is fetched.
        """
        if not REF_RE.fullmatch(ref):
            raise UsageError(f"{ref!r} is neither a full commit SHA nor a tag or branch name",
                             remedy="pass a full 40-character SHA or a tag such as v2.8.0 (--commit / pytorch.commit)")
        res = self.run(["ls-remote", url, f"refs/tags/{ref}", f"refs/tags/{ref}^{{}}", f"refs/heads/{ref}"],
                       check=False, what="`git ls-remote`")
        if res.returncode != 0:
            raise ToolFailed(
                f"`git ls-remote {url}` failed (exit code {res.returncode}) while resolving {ref!r}",
                cause="the repository could not be reached",
                tail=res.lines[-15:],
                log_path=self.log_path,
                remedy="check --repo-url / pytorch.repo_url and your network, or pass the full SHA with --commit",
            )
        refs = {}
        for line in res.lines:
            parts = line.split()
            if len(parts) == 2 and SHA_RE.fullmatch(parts[0]):
                refs[parts[1]] = parts[0]
        for name in (f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}"):
            if name in refs:
                return refs[name], name.replace("^{}", "")
        raise UsageError(
            f"{url} has no tag or branch {ref!r}",
            remedy=f"list its tags with `git ls-remote --tags {url}`, or pass a full commit SHA with --commit",
        )

    # ------------------------------------------------------------------ verbs

    def fetch_commit(self, repo: Path, url: str, commit: str) -> bool:
        """Fetch only ``commit`` (shallow); fall back to a full fetch if the server refuses. True if shallow."""
        res = self.run(["fetch", "--depth", "1", "--no-tags", url, commit], cwd=repo, check=False,
                       what="`git fetch` of the pinned commit")
        if res.returncode == 0:
            return True
        if not any(p.lower() in res.output.lower() for p in REFUSED_SHA_PATTERNS):
            raise ToolFailed(
                f"`git fetch {url} {commit}` failed (exit code {res.returncode})",
                cause="the repository could not be reached, or it does not have that commit",
                tail=res.lines[-15:],
                log_path=self.log_path,
                remedy="check --repo-url / pytorch.repo_url and your network; a custom --commit must be a full "
                       "SHA present in that repository",
            )
        log.warning("the server refused a shallow fetch of one commit; fetching the whole history (slower)")
        self.run(["fetch", "--no-tags", url, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"],
                 cwd=repo, what="`git fetch` (full history)")
        if self.run(["cat-file", "-e", f"{commit}^{{commit}}"], cwd=repo, check=False).returncode != 0:
            raise ToolFailed(
                f"commit {commit} is not in {url}",
                cause="neither a fetch of that commit nor the repository's branches and tags have it",
                log_path=self.log_path,
                remedy="check --commit (a full SHA of that repository) and --repo-url / pytorch.repo_url",
            )
        return False

    def update_submodules(self, repo: Path, jobs: int) -> bool:
        """Init and fetch every submodule, shallow and in parallel (full if a server refuses). True if shallow."""
        self.run(["submodule", "sync", "--recursive"], cwd=repo, what="`git submodule sync`")
        base = ["submodule", "update", "--init", "--recursive", "--jobs", str(max(1, jobs))]
        res = self.run([*base, "--depth", "1"], cwd=repo, check=False, what="`git submodule update --depth 1`")
        if res.returncode == 0:
            return True
        log.warning("shallow submodule fetch failed (the server may not allow fetching by SHA); retrying in full")
        for state in parse_submodule_status(self.run(["submodule", "status", "--recursive"], cwd=repo).output):
            sub = repo / state.path
            if (sub / ".git").exists():
                shallow = self.run(["rev-parse", "--is-shallow-repository"], cwd=sub, check=False).output.strip()
                if shallow == "true":
                    self.run(["fetch", "--unshallow", "--no-tags", "origin"], cwd=sub, check=False,
                             what=f"`git fetch --unshallow` in {state.path}")
        self.run(base, cwd=repo, what="`git submodule update`", hint=_submodule_hint)
        return False


def _submodule_hint(output: str) -> Optional[str]:
    if "transport 'file' not allowed" in output:
        return ("git refuses file:// submodules by default: set `git config --global protocol.file.allow user` "
                "for local mirrors")
    if "Could not resolve host" in output or "unable to access" in output:
        return ("a submodule's server could not be reached: check the network "
                "(or a mirror in .gitmodules / url.<base>.insteadOf)")
    return "run `git submodule update --init --recursive` inside the checkout to see which submodule fails"
