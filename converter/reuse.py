"""What is already converted: per-mode keys from the inputs, checked against the manifest and the files' hashes.

No torch here: an unchanged ``invoke convert`` decides from hashes and records alone.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from toolchain import pins
from toolchain.errors import RecordError, UsageError
from toolchain.fsutil import digest_of, sha256_file
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


def made_with(executorch: bool = False) -> Dict[str, Any]:
    """The versions a conversion is made with (recorded beside it and part of its key): torch's, and ExecuTorch's
    for a ``.pte`` program."""
    return {"torch": torch_identity(), **({"executorch": pins.identity()} if executorch else {})}


def conversion_key(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, code: str, **what: Any) -> str:
    """The one key of a converted artefact (a TorchScript mode's two models, an ExecuTorch program): the model, its
    weights and calibration, the converter ``code`` that makes it and ``what`` else it depends on (its mode or
    variant, :func:`made_with`...)."""
    body = {"model": spec.key(), "weights": weights.key(), "calibration": calib.key(), "code": code, **what}
    return digest_of(body)


def mode_key(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, mode: str,
             versions: Dict[str, Any], quantized: Optional[WeightsSpec] = None) -> str:
    """What a mode's two files depend on; the pre-quantized weights (when given) only for core and full."""
    extra = {"quantized_weights": quantized.key()} if quantized is not None and mode != "none" else {}
    return conversion_key(spec, weights, calib, code_digest(), mode=mode, format="torchscript", versions=versions,
                          **extra)


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


def up_to_date(keys: Any, name: str, key: str, files: Sequence[Any]) -> bool:
    """The one reuse rule: ``name``'s key recorded in ``keys`` is ``key`` and each of its ``files`` (a ModelFile or
    PteFile: at least one) is there with its recorded size and sha256."""
    return isinstance(keys, dict) and keys.get(name) == key and bool(files) and all(
        f.path.is_file() and f.path.stat().st_size == f.size and sha256_file(f.path) == f.sha256 for f in files)


def mode_up_to_date(manifest: ConvertManifest, stem: str, mode: str, key: str) -> bool:
    """Both files of ``mode`` (its CPU file alone when NNAPI refused it) are :func:`up_to_date` with this key."""
    conv = manifest.conversions.get(stem, {})
    files = manifest.files_of(stem, mode)
    wanted = ["cpu"] if manifest.refusal(stem, mode) is not None else ["cpu", "nnapi"]
    return sorted(f.backend for f in files) == wanted and up_to_date(
        conv.get("mode_keys") if isinstance(conv, dict) else None, mode, key, files)
