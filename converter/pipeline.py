"""``invoke convert``: validate, reuse what is up to date, export the rest, check, record."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from toolchain import __version__ as TORCHDROID_VERSION
from toolchain.errors import RecordError, UsageError
from toolchain.fsutil import ensure_writable_dir, sha256_file
from toolchain.progress import progress
from toolchain.records import (
    MANIFEST_KIND,
    MANIFEST_NAME,
    MANIFEST_SCHEMA,
    MODES,
    ConvertManifest,
    ModelFile,
    TensorSpec,
    now_iso,
    read_record,
    write_record,
)

from .calibration import CalibrationSpec, parse_calibration
from .models import ModelSpec, WeightsSpec, parse_model, parse_weights

log = logging.getLogger(__name__)
FORMATS = ("torchscript", "lite")


@dataclass(frozen=True)
class ConvertSettings:
    out: Path = Path("build/models")
    model: str = "mobilenet_v2"
    modes: Tuple[str, ...] = MODES
    weights: str = "pretrained"
    calibration: Optional[Path] = None
    calibration_count: int = 32
    seed: int = 0
    fmt: str = "torchscript"
    build_dir: Path = Path("build")
    force: bool = False


@dataclass
class ConvertResult:
    manifest_path: Path
    files: List[ModelFile]
    reused: bool
    built_modes: List[str]
    notes: List[str] = field(default_factory=list)
    host_check: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def host_check_lines(self) -> List[str]:
        lines = []
        for f in self.host_check.get("models", []):
            lines.append(f"host check: {f['file']}: output {f['output_shape']} {f['output_dtype']}, "
                         f"{'varies' if not f['constant'] else 'CONSTANT'} ({f['ms']:.1f} ms)")
        for mode, agr in sorted(self.host_check.get("top1_agreement", {}).items()):
            lines.append(f"host check: quant_{mode} top-1 agrees with quant_none on {agr['agree']}/{agr['total']} "
                         f"calibration inputs ({100.0 * agr['agree'] / max(1, agr['total']):.0f}%)")
        return lines


def validate(settings: ConvertSettings) -> Tuple[ModelSpec, WeightsSpec, CalibrationSpec, Tuple[str, ...]]:
    """Everything that can be checked without torch, so bad input fails at once."""
    modes = tuple(dict.fromkeys(m.strip().lower() for m in settings.modes if m and m.strip()))
    if not modes:
        raise UsageError("no quantization mode given", remedy=f"use --quant with one or more of: {', '.join(MODES)}")
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise UsageError(
            f"unknown quantization mode {bad[0]!r}",
            cause="none: float; core: quantized core, float interface; full: quantized tensors in and out",
            remedy=f"use --quant with one or more of: {', '.join(MODES)}",
        )
    if settings.fmt not in FORMATS:
        raise UsageError(f"unknown model format {settings.fmt!r}", remedy=f"set convert.format to one of {FORMATS}")
    spec = parse_model(settings.model)
    weights = parse_weights(settings.weights, settings.seed)
    calib = parse_calibration(settings.calibration, settings.calibration_count, settings.seed)
    ensure_writable_dir(settings.out)
    return spec, weights, calib, tuple(m for m in MODES if m in modes)


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
    return out


def _code_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(Path(__file__).parent.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def mode_key(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, mode: str, fmt: str,
             torch_id: Dict[str, Any]) -> str:
    body = {
        "model": spec.key(),
        "weights": weights.key(),
        "calibration": calib.key(),
        "mode": mode,
        "format": fmt,
        "torch": [torch_id.get("version"), torch_id.get("git_version"), torch_id.get("torchvision")],
        "converter": _code_digest(),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def file_names(stem: str, mode: str) -> Tuple[str, str]:
    return f"{stem}-quant_{mode}-cpu.pt", f"{stem}-quant_{mode}-nnapi.pt"


def _load_existing(out: Path) -> Dict[str, Any]:
    path = out / MANIFEST_NAME
    if not path.exists():
        return {"conversions": {}, "files": []}
    try:
        return read_record(path, MANIFEST_KIND, MANIFEST_SCHEMA, ConvertManifest.REMEDY)
    except RecordError as e:
        log.warning("ignoring the unreadable manifest %s (%s); everything will be rebuilt", path, e.what)
        return {"conversions": {}, "files": []}


def _up_to_date(existing: Dict[str, Any], out: Path, stem: str, mode: str, key: str) -> bool:
    conv = existing.get("conversions", {}).get(stem, {})
    if conv.get("mode_keys", {}).get(mode) != key:
        return False
    entries = [e for e in existing.get("files", []) if e.get("stem") == stem and e.get("mode") == mode]
    if len(entries) != 2:
        return False
    for e in entries:
        p = out / e["file"]
        if not p.is_file() or p.stat().st_size != e.get("size"):
            return False
        if sha256_file(p) != e.get("sha256"):
            return False
    return True


def convert(settings: ConvertSettings) -> ConvertResult:
    t0 = time.monotonic()
    spec, weights, calib, modes = validate(settings)
    out = Path(settings.out)
    torch_id = torch_identity()
    keys = {m: mode_key(spec, weights, calib, m, settings.fmt, torch_id) for m in modes}
    existing = _load_existing(out)
    todo = [m for m in modes if settings.force or not _up_to_date(existing, out, spec.stem, m, keys[m])]

    if not todo:
        log.info("all %d requested %s variants are up to date in %s (use --force to rebuild)", len(modes), spec.stem, out)
        man = ConvertManifest.load(out)
        files = [f for f in man.files if f.stem == spec.stem and f.mode in modes]
        conv = man.conversions.get(spec.stem, {})
        return ConvertResult(man.path, files, True, [], list(conv.get("notes", [])),
                             conv.get("host_check", {}), time.monotonic() - t0)

    from . import build  # torch is imported only from here on

    built = build.build_modes(spec, weights, calib, todo, out, settings.fmt)
    conv = dict(existing.get("conversions", {}).get(spec.stem, {}))
    mode_keys = dict(conv.get("mode_keys", {}))
    mode_keys.update({m: keys[m] for m in todo})
    host_check = dict(conv.get("host_check", {}))
    host_check["models"] = [m for m in host_check.get("models", []) if m["mode"] not in todo] + built.host_models
    agreement = dict(host_check.get("top1_agreement", {}))
    agreement.update(built.agreement)
    host_check["top1_agreement"] = agreement
    conv.update(
        model=spec.name,
        source=spec.source,
        factory_file=str(spec.factory_file) if spec.factory_file else None,
        weights=built.weights_record,
        calibration=calib.record(),
        torch={**torch_id, "xnnpack": built.xnnpack},
        mobile_optimization=built.mobile_optimization,
        format=settings.fmt,
        bundled_input=built.bundled_input,
        mode_keys=mode_keys,
        host_check=host_check,
        notes=built.notes,
        converted=now_iso(),
        torchdroid=TORCHDROID_VERSION,
    )
    entries = [e for e in existing.get("files", []) if not (e.get("stem") == spec.stem and e.get("mode") in todo)]
    entries.extend(built.entries)
    entries.sort(key=lambda e: (e["stem"], MODES.index(e["mode"]), e["backend"]))
    conversions = dict(existing.get("conversions", {}))
    conversions[spec.stem] = conv
    kept = {k: v for k, v in existing.items() if k == "executorch"}  # the .pte section (toolchain/pte_records.py)
    path = write_record(out / MANIFEST_NAME, MANIFEST_KIND, MANIFEST_SCHEMA,
                        {"conversions": conversions, "files": entries, **kept})
    man = ConvertManifest.load(out)
    files = [f for f in man.files if f.stem == spec.stem and f.mode in modes]
    log.info("wrote %s", path)
    return ConvertResult(path, files, False, todo, built.notes, host_check, time.monotonic() - t0)


def file_entry(path: Path, spec: ModelSpec, mode: str, backend: str, inp: TensorSpec, outp: TensorSpec,
               extra: Dict[str, Any]) -> Dict[str, Any]:
    entry = {
        "file": path.name,
        "sha256": sha256_file(path),
        "size": path.stat().st_size,
        "model": spec.name,
        "stem": spec.stem,
        "mode": mode,
        "variant": f"quant_{mode}",
        "backend": backend,
        "input": inp.to_dict(),
        "output": outp.to_dict(),
    }
    entry.update(extra)
    return entry


__all__ = ["ConvertSettings", "ConvertResult", "convert", "validate", "file_names", "progress"]
