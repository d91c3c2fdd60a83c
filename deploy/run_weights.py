"""Which weights the run's models had (pretrained, random, a file), from the convert manifest the run names
(deploy records its models directory with the run): one line the report puts on every page, or "unknown" and why."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Optional, Sequence

from .results import ResultRow


def _origin(weights: object) -> str:
    """``random (seed 0; <the converter's note>)``, ``pretrained (<tag>)``, ``file <path> (sha256 …)``."""
    if not isinstance(weights, dict) or not weights.get("origin"):
        return "unknown (the manifest does not say)"
    origin = str(weights["origin"])
    if origin == "random":
        details = [f"seed {weights['seed']}" if weights.get("seed") is not None else "", str(weights.get("note") or "")]
        return "random (" + "; ".join(d for d in details if d) + ")" if any(details) else "random"
    if origin == "pretrained":
        return f"pretrained ({weights['tag']})" if weights.get("tag") else "pretrained"
    if origin == "file":
        sha = f" (sha256 {str(weights['sha256'])[:12]}…)" if weights.get("sha256") else ""
        return f"file {weights.get('path') or '?'}{sha}"
    return origin


def _after(converted: object, started: str) -> bool:
    """The manifest's conversion was written after the run started (the files may have changed since)."""
    try:
        return datetime.fromisoformat(str(converted)) > datetime.fromisoformat(started)
    except (TypeError, ValueError):
        return False


def weights_line(models: Optional[str], rows: Sequence[ResultRow], started: str = "") -> str:
    """``weights: mobilenetv2: random (seed 0; …) (from <manifest>)``, or ``weights: unknown (why)``."""
    from toolchain.errors import TorchdroidError
    from toolchain.records import ConvertManifest, manifest_path

    stems = sorted({r.stem for r in rows if r.stem})
    if not models:
        return "weights: unknown (the run recorded no models directory, so there is no convert manifest to read)"
    path = manifest_path(Path(models))
    try:
        manifest = ConvertManifest.load(Path(models))
    except TorchdroidError as e:
        return f"weights: unknown ({path}: {e.what})"
    conversions = manifest.conversions
    stems = stems or sorted(conversions)
    parts = []
    for stem in stems:
        conv = conversions.get(stem)
        if not isinstance(conv, dict):
            parts.append(f"{stem}: unknown (not in the manifest)")
            continue
        later = " [converted again after this run: the run's files may have had other weights]" \
            if started and _after(conv.get("converted"), started) else ""
        parts.append(f"{stem}: {_origin(conv.get('weights'))}{later}")
    return "weights: " + ("; ".join(parts) or "unknown (the manifest lists no model)") + f" (from {path})"


def is_random(line: str) -> bool:
    return ": random" in line
