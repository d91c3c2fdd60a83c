"""`invoke clean`: remove build outputs, caches and old logs, only inside the build directory.

Only names torchdroid itself writes under the build directory are candidates (never a file found by
a pattern elsewhere); a symlink is removed as a link, never followed.  ``dry_run`` lists without
removing.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Sequence, Tuple

from toolchain.errors import UsageError

# what each kind names, relative to the build directory
KINDS = {
    "logs": (),  # logs/*.log older than the limit
    "outputs": ("models", "bench", "app", "android", "all.json"),
    "caches": ("src", "cache"),  # PyTorch checkouts of build-android, remembered facts (cache/)
    "results": ("results",),  # the benchmark history: only when asked for by name
}
DEFAULT_KINDS = ("logs",)


@dataclass
class CleanPlan:
    build_dir: Path
    targets: List[Tuple[Path, int]] = field(default_factory=list)  # (path, bytes)

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.targets)


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except OSError:
                pass
    return total


def _check_build_dir(build_dir: Path) -> Path:
    resolved = build_dir.resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve() or resolved == Path.cwd().resolve():
        raise UsageError(f"refusing to clean {build_dir}: it is {resolved}, not a build directory of its own",
                         remedy="set build_dir (INVOKE_BUILD_DIR or invoke.yaml) to a directory only torchdroid "
                                "writes, e.g. build")
    return resolved


def plan_clean(build_dir: Path, kinds: Sequence[str] = DEFAULT_KINDS, log_days: float = 14.0) -> CleanPlan:
    """What ``clean`` would remove: only existing known names inside ``build_dir``."""
    root = _check_build_dir(Path(build_dir))
    plan = CleanPlan(Path(build_dir))
    for kind in kinds:
        for name in KINDS[kind]:
            target = root / name
            if target.exists() or target.is_symlink():
                plan.targets.append((target, _size(target)))
    if "logs" in kinds and (root / "logs").is_dir():
        limit = time.time() - log_days * 86400
        for log in sorted((root / "logs").glob("*.log")):
            if log.is_file() and log.stat().st_mtime < limit:
                plan.targets.append((log, log.stat().st_size))
    return plan


def execute(plan: CleanPlan) -> None:
    root = plan.build_dir.resolve()
    for target, _ in plan.targets:
        if root not in target.parents:  # pragma: no cover - plan_clean only names paths inside it
            raise UsageError(f"refusing to remove {target}: outside {root}")
        if target.is_symlink() or target.is_file():
            target.unlink(missing_ok=True)
        elif target.is_dir():
            shutil.rmtree(target)
