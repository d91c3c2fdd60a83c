"""What is already converted: per-mode keys from the inputs, checked against the manifest and the files' hashes.

No torch here: an unchanged ``invoke convert`` decides from hashes and records alone.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from toolchain.errors import RecordError, UsageError
from toolchain.fsutil import sha256_file
from toolchain.records import ConvertManifest, manifest_owner, manifest_path

from .calibration import CalibrationSpec
from .models import ModelSpec, WeightsSpec

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def torch_identity() -> Dict[str, Any]:
    """torch's version and git commit, read without importing torch (keeps warm re-runs fast)."""
    out: Dict[str, Any] = {"version": None, "git_version": None, "torchvision": None}
    try:
        out["version"] = importlib.metadata.version("torch")
        out["torchvision"] = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec("torch")
    if spec and spec.origin:
        vfile = Path(spec.origin).parent / "version.py"
        if vfile.is_file():
            m = re.search(r"^git_version\s*=\s*['\"]([0-9a-f]+)['\"]", vfile.read_text(), re.M)
            if m:
                out["git_version"] = m.group(1)
    return dict(out)


# The ExecuTorch format's modules (converter/executorch*.py: executorch.py, executorch_check.py, ...) key its own
# programs and checks (executorch_check.CHECK_CODE); a change to them must not rebuild the TorchScript models.
OTHER_LANE_PREFIXES = ("executorch",)


def code_digest(directory: Optional[Path] = None, only: Sequence[str] = ()) -> str:
    """The converter's own code (``only``: those files, the ExecuTorch lane's): a change to it invalidates every
    earlier conversion."""
    h = hashlib.sha256()
    for p in sorted(Path(directory or Path(__file__).parent).glob("*.py")):
        if (p.name not in only) if only else p.name.startswith(OTHER_LANE_PREFIXES):
            continue
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def mode_key(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, mode: str,
             torch_id: Dict[str, Any], quantized: Optional[WeightsSpec] = None) -> str:
    """What a mode's two files depend on; the pre-quantized weights (when given) only for core and full."""
    body = {
        "model": spec.key(),
        "weights": weights.key(),
        "calibration": calib.key(),
        "mode": mode,
        "format": "torchscript",
        "torch": [torch_id.get("version"), torch_id.get("git_version"), torch_id.get("torchvision")],
        "converter": code_digest(),
    }
    if quantized is not None and mode != "none":
        body["quantized_weights"] = quantized.key()
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def read_existing(out: Path) -> ConvertManifest:
    """The manifest already in ``out`` (empty when none).

    A manifest.json torchdroid did not write is refused, never overwritten; a damaged torchdroid manifest is
    ignored with a warning (its files are rebuilt and it is rewritten).
    """
    owner = manifest_owner(out)
    if owner == "absent":
        return ConvertManifest.empty(out)
    if owner == "foreign":
        raise UsageError(
            f"{manifest_path(out)} was not written by torchdroid",
            cause="it is not a torchdroid convert manifest (no kind 'torchdroid.convert-manifest'); "
                  "torchdroid never overwrites a file it did not write",
            remedy="choose another output directory (--out DIR), or move that manifest.json away",
        )
    try:
        return ConvertManifest.load(out)
    except RecordError as e:
        log.warning("ignoring the unreadable manifest %s (%s); its models will be rebuilt", manifest_path(out), e.what)
        return ConvertManifest.empty(out)


def up_to_date(manifest: ConvertManifest, stem: str, mode: str, key: str) -> bool:
    """Both files of ``mode`` are recorded with this key and their bytes still match the recorded sha256."""
    conv = manifest.conversions.get(stem, {})
    if not isinstance(conv, dict) or (conv.get("mode_keys") or {}).get(mode) != key:
        return False
    files = manifest.files_of(stem, mode)
    wanted = ["cpu"] if manifest.refusal(stem, mode) is not None else ["cpu", "nnapi"]  # NNAPI refused: CPU only
    if sorted(f.backend for f in files) != wanted:
        return False
    for f in files:
        if not f.path.is_file() or f.path.stat().st_size != f.size or sha256_file(f.path) != f.sha256:
            return False
    return True
