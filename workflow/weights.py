"""Can `invoke all` have pretrained weights?  Asked on every run, so the torchvision facts are kept.

Where a model's default weights live (their URL and torch hub's cache path) needs torchvision to
find out, a few seconds of imports.  They only change with the torchvision version and the hub
directory, so the answer is kept in ``<build_dir>/cache/pretrained-weights.json`` under that key;
whether the file is cached or the server answers is checked every time.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
from pathlib import Path
from typing import Optional, Tuple

from toolchain.layout import Layout

log = logging.getLogger(__name__)

MEMO_NAME = "pretrained-weights.json"


def _memo_key(model: str) -> str:
    try:
        tv = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        tv = None
    env = [os.environ.get(k) for k in ("TORCH_HOME", "XDG_CACHE_HOME", "HOME")]
    return json.dumps([model, tv, env])


def location(model: str, build_dir: Path) -> Optional[Tuple[str, Path]]:
    """(url, cache path) of the model's default weights, from the memo or torchvision (then remembered)."""
    from converter.models import pretrained_location
    from toolchain.errors import UsageError
    from toolchain.fsutil import atomic_write_json, own_dir

    memo_path = Layout(build_dir).cache / MEMO_NAME
    try:
        memo = json.loads(memo_path.read_text(encoding="utf-8"))
        if not isinstance(memo, dict):
            memo = {}
    except (OSError, ValueError):
        memo = {}
    key = _memo_key(model)
    if key not in memo:
        where = pretrained_location(model)
        memo[key] = [where[0], str(where[1])] if where else None
        try:
            own_dir(memo_path.parent, "cache")  # listed in its manifest: clean --what caches keeps the user's files
            atomic_write_json(memo_path, memo)
        except (OSError, UsageError) as e:  # a read-only build dir, or a file of the user's where cache/ goes, only
            log.debug("pretrained weights: location not remembered (%s)", e)  # costs the next run the imports
    entry = memo[key]
    return (str(entry[0]), Path(entry[1])) if isinstance(entry, list) and len(entry) == 2 else None


def pretrained_status(model: str, build_dir: Path) -> Tuple[bool, str]:
    from converter.models import pretrained_status as status

    where = location(model, build_dir)
    if where is None:
        return status(model)  # a user's factory: no torchvision weights, answered without imports
    return status(model, location=where)
