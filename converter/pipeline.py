"""``invoke convert``: validate → plan (what is up to date?) → convert the rest → record each mode.

Everything up to the decision is torch-free (:mod:`converter.reuse`); torch is imported only when a
mode must be built (:mod:`converter.convert_modes`).  Writing happens under the output directory's
lock, in a directory torchdroid owns, and the manifest is rewritten after every finished mode, so a
killed run keeps what it finished and the next run converts only the rest.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from toolchain import __version__ as TORCHDROID_VERSION
from toolchain.errors import ConversionError, PartlyConverted, UsageError
from toolchain.fsutil import claim_output_dir, ensure_writable_dir, output_lock, remove_stale_partials
from toolchain.progress import progress
from toolchain.records import (ConvertManifest, ModelFile, NnapiRefusal, manifest_owner, manifest_path,
                               model_file_names, now_iso)
from toolchain.settings import default
from toolchain.variants import MODES

from .calibration import CalibrationSpec, parse_calibration, record_for
from .models import ModelSpec, WeightsSpec, check_stem_free, parse_model, parse_weights
from .prequantized import parse_quantized_weights
from .reuse import made_with, mode_key, mode_up_to_date, read_existing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelRequest:
    """What every format converts from: the model, its weights and calibration inputs, and where its files go."""

    out: Path = Path(default("convert.out"))
    model: str = default("convert.model")
    weights: str = default("convert.weights")
    calibration: Optional[Path] = None
    calibration_count: int = default("convert.calibration_count")
    seed: int = default("convert.seed")
    factory_timeout: float = default("convert.factory_timeout")  # seconds for a user's model file
    inputs: Optional[str] = None  # --inputs: the model file's inputs (converter/input_specs.py)
    force: bool = False


def parse_request(settings: ModelRequest) -> Tuple[ModelSpec, WeightsSpec, CalibrationSpec]:
    """The model, weights and calibration asked for, checked without torch (each format's ``validate`` makes sure of
    the output directory after its own checks: :func:`writable_out`)."""
    spec = parse_model(settings.model, settings.factory_timeout, settings.inputs)
    weights = parse_weights(settings.weights, settings.seed)
    calib = parse_calibration(settings.calibration, settings.calibration_count, settings.seed, warn=False)  # said once the inputs are known
    return spec, weights, calib


def writable_out(settings: ModelRequest) -> None:
    """The output directory usable (made if missing): the last check, so a bad value leaves nothing behind."""
    ensure_writable_dir(Path(settings.out), "output directory (--out)")


@dataclass(frozen=True)
class ConvertSettings(ModelRequest):
    modes: Tuple[str, ...] = MODES
    quantized_weights: str = default("convert.quantized_weights")  # calibrate | pretrained | PATH
    build_dir: Path = Path(default("build_dir"))


@dataclass
class ConvertResult:
    manifest_path: Path
    files: List[ModelFile]
    reused: bool
    built_modes: List[str]
    notes: List[str] = field(default_factory=list)
    host_check: Dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    refused: List[NnapiRefusal] = field(default_factory=list)  # NNAPI models not written (their CPU models are)
    not_made: Dict[str, str] = field(default_factory=dict)  # quant_<mode> -> why: neither its CPU nor NNAPI model
    stem: str = ""

    def not_made_files(self) -> List[Tuple[str, str, str]]:
        """``(file, backend, mode)`` of each file asked for and not made: a refused mode's two, a refused NNAPI model."""
        rows = [(name, backend, m) for m in MODES if f"quant_{m}" in self.not_made
                for name, backend in zip(model_file_names(self.stem, m), ("cpu", "nnapi"))]
        return rows + [(r.file, "nnapi", r.mode) for r in self.refused]

    def host_check_lines(self) -> List[str]:
        """One line: the models whose output varies as it should (the usual case) and each quantized mode's top-1
        agreement with the float model; a line of its own per CONSTANT output."""
        models = self.host_check.get("models", [])
        fine = [f"{f['file']} {f['output_shape']} {f['output_dtype']} ({f['ms']:.0f} ms)" for f in models
                if not f["constant"]]
        agree = [f"quant_{mode} {a['agree']}/{a['total']} ({100.0 * a['agree'] / max(1, a['total']):.0f}%"
                 + (f", the same quantized core as {a['measured_on']}" if a.get("measured_on") else "") + ")"
                 for mode, a in sorted(self.host_check.get("top1_agreement", {}).items())]
        parts = ([f"{len(fine)} CPU model(s) run here, outputs vary: {', '.join(fine)}"] if fine else []) + \
            ([f"top-1 agreement with the float model on the calibration inputs: {', '.join(agree)}"] if agree else [])
        lines = ["host check: " + "; ".join(parts)] if parts else []
        return lines + [f"host check: {f['file']}: output {f['output_shape']} {f['output_dtype']}, CONSTANT "
                        f"({f['ms']:.1f} ms)" for f in models if f["constant"]]


@dataclass
class Plan:
    """The validated request and what of it is already converted."""

    settings: ConvertSettings
    spec: ModelSpec
    weights: WeightsSpec
    calib: CalibrationSpec
    modes: Tuple[str, ...]
    keys: Dict[str, str]
    manifest: ConvertManifest
    todo: List[str]
    quantized: Optional[WeightsSpec] = None  # pre-quantized weights of core/full (None: calibrated here)

    @property
    def out(self) -> Path:
        return Path(self.settings.out)


def _check_modes(requested) -> Tuple[str, ...]:
    if isinstance(requested, str):  # "none,full" from a config scalar: never split into characters
        requested = requested.split(",")
    modes = tuple(dict.fromkeys(str(m).strip().lower() for m in requested if m and str(m).strip()))
    if not modes:
        raise UsageError("no quantization mode given", remedy=f"use --quant with one or more of: {', '.join(MODES)}")
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise UsageError(
            f"unknown quantization mode {bad[0]!r}",
            cause="none: float; core: quantized core, float interface; full: quantized tensors in and out",
            remedy=f"use --quant with one or more of: {', '.join(MODES)}",
        )
    return tuple(m for m in MODES if m in modes)


def _check_inputs_not_overwritten(out: Path, spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec,
                                  modes, quantized: Optional[WeightsSpec] = None) -> None:
    """None of the files convert writes may be one of its inputs (a weights file named like a model...)."""
    written = {manifest_path(out).resolve()}
    for mode in modes:
        written.update((out / name).resolve() for name in model_file_names(spec.stem, mode))
    inputs = [weights.path, spec.factory_file, quantized.path if quantized else None, *calib.files]
    for item in inputs:
        if item is not None and Path(item).resolve() in written:
            raise UsageError(
                f"convert would overwrite its own input {item}",
                cause="that input has the name and place of a file convert writes",
                remedy="choose another --out, or move/rename that input",
            )


def validate(settings: ConvertSettings) -> Tuple[ModelSpec, WeightsSpec, CalibrationSpec, Tuple[str, ...],
                                                Optional[WeightsSpec]]:
    """Everything that can be checked without torch, so bad input fails at once: ``(model, weights, calibration,
    modes, pre-quantized weights or None)``."""
    modes = _check_modes(settings.modes)
    spec, weights, calib = parse_request(settings)
    quantized = parse_quantized_weights(settings.quantized_weights, spec)
    _check_inputs_not_overwritten(Path(settings.out), spec, weights, calib, modes, quantized)
    writable_out(settings)
    return spec, weights, calib, modes, quantized


def plan(settings: ConvertSettings, spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec,
         modes: Tuple[str, ...], quantized: Optional[WeightsSpec] = None) -> Plan:
    """Which requested modes must be (re)built: from keys, the manifest and the files' hashes (no torch)."""
    versions = made_with()
    keys = {m: mode_key(spec, weights, calib, m, versions, quantized) for m in modes}
    manifest = read_existing(Path(settings.out))
    check_stem_free(spec, Path(settings.out))
    todo = [m for m in modes if settings.force or not mode_up_to_date(manifest, spec.stem, m, keys[m])]
    return Plan(settings, spec, weights, calib, modes, keys, manifest, todo, quantized)


def _result(p: Plan, manifest: ConvertManifest, built: List[str], notes: Optional[List[str]], t0: float) -> ConvertResult:
    files = [f for f in manifest.files_of(p.spec.stem) if f.mode in p.modes]
    conv = manifest.conversions.get(p.spec.stem, {})
    not_made = {f"quant_{m}": (conv.get("refused") or {})[f"quant_{m}"] for m in p.modes
                if f"quant_{m}" in (conv.get("refused") or {})}
    return ConvertResult(manifest.path, files, not built, [m for m in built if f"quant_{m}" not in not_made],
                         list(conv.get("notes", []) if notes is None else notes), conv.get("host_check", {}),
                         time.monotonic() - t0,
                         [r for r in manifest.refused if r.stem == p.spec.stem and r.mode in p.modes], not_made,
                         p.spec.stem)


def _adopt(out: Path) -> bool:
    """A directory an older torchdroid wrote (before ownership markers): it holds our manifest."""
    return manifest_owner(out) == "ours"


def convert(settings: ConvertSettings) -> ConvertResult:
    t0 = time.monotonic()
    spec, weights, calib, modes, quantized = validate(settings)
    p = plan(settings, spec, weights, calib, modes, quantized)
    if not p.todo:
        log.debug("all %d requested %s variants are up to date in %s (use --force to rebuild)", len(modes), spec.stem,
                 settings.out)
        remove_stale_partials(settings.out)  # a dead run's temporaries go even when nothing is rebuilt
        return _result(p, p.manifest, [], None, t0)
    out = Path(settings.out)
    with output_lock(out, "invoke convert"):
        claim_output_dir(out, "convert", force=settings.force, adopt=_adopt)
        p = plan(settings, spec, weights, calib, modes, quantized)  # again under the lock: another run may have finished
        if not p.todo:
            return _result(p, p.manifest, [], None, t0)
        manifest, notes = _convert_and_record(p)
    log.debug("wrote %s", manifest.path)  # the task prints the manifest's path
    return _partly(p, _result(p, manifest, p.todo, notes, t0))


def _partly(p: Plan, result: ConvertResult) -> ConvertResult:
    """``result``, or exit 10 (PartlyConverted, carrying it) when some modes asked for were refused: each mode's CPU
    and NNAPI models are made or refused on its own, the reasons are in ``conversions.<stem>.refused``."""
    if not result.not_made:
        return result
    made = [f"quant_{m}" for m in p.modes if f"quant_{m}" not in result.not_made]
    fix = (f"each one's fix is in the cause; `--quant {','.join(m.split('_', 1)[1] for m in made)}` asks only for "
           "what converts (exit 0)")
    raise PartlyConverted.of("TorchScript", p.spec.stem, made, result.not_made, p.out, fix, result)


def _conversion_record(p: Plan, facts, previous: Dict[str, Any]) -> Dict[str, Any]:
    """The per-model record shared by its files (mode keys and host check are carried over per mode)."""
    conv = dict(previous) if isinstance(previous, dict) else {}
    host_check = dict(conv.get("host_check") or {})
    host_check["models"] = [m for m in host_check.get("models", []) if m.get("mode") not in p.todo]
    host_check["top1_agreement"] = {k: v for k, v in (host_check.get("top1_agreement") or {}).items()
                                    if k not in p.todo}
    if facts.quantization:  # a run of quant_none alone keeps what the quantized modes were made with
        conv["quantization"] = facts.quantization
    conv.update(
        model=p.spec.name,
        model_id=p.spec.identity(),
        source=p.spec.source,
        factory_file=str(p.spec.factory_file) if p.spec.factory_file else None,
        weights=facts.weights_record,
        calibration=record_for(p.calib, facts.declared_inputs),
        torch={**made_with()["torch"], "xnnpack": facts.xnnpack},
        mobile_optimization=facts.mobile_optimization,
        batchnorm=facts.batchnorm,
        format="torchscript",
        bundled_input=facts.bundled_input,
        mode_keys={k: v for k, v in (conv.get("mode_keys") or {}).items() if k not in p.todo},
        host_check=host_check,
        notes=list(facts.notes),
        converted=now_iso(),
        torchdroid=TORCHDROID_VERSION,
    )
    return conv


def _with_mode(conv: Dict[str, Any], done, key: str) -> Dict[str, Any]:
    conv = dict(conv)
    name = f"quant_{done.mode}"
    refused = {k: v for k, v in (conv.get("refused") or {}).items() if k != name}
    if done.error is not None:  # no key: the next run tries it again
        conv["refused"] = {**refused, name: done.error.one_line()}
        return conv
    conv["refused"] = refused
    conv["mode_keys"] = {**conv["mode_keys"], done.mode: key}
    host_check = dict(conv["host_check"])
    host_check["models"] = sorted(host_check["models"] + [done.host_model], key=lambda m: MODES.index(m["mode"]))
    if done.agreement is not None:
        host_check["top1_agreement"] = {**host_check["top1_agreement"], done.mode: done.agreement}
    conv["host_check"] = host_check
    conv["notes"] = conv["notes"] + done.notes
    return conv


def _convert_and_record(p: Plan) -> Tuple[ConvertManifest, List[str]]:
    """Convert the modes still to do; rewrite the manifest after each one."""
    from .convert_modes import ModeConverter  # torch is imported only from here on

    converter = ModeConverter(p.spec, p.weights, p.calib, p.out, p.quantized)
    manifest = p.manifest
    try:
        return _convert_modes(p, converter, manifest)
    except BaseException:  # nothing half-written: a mode that failed leaves no file its manifest does not list
        _remove_unrecorded(p, _recorded(p.out, manifest))
        raise


def _recorded(out: Path, fallback: ConvertManifest) -> ConvertManifest:
    try:
        return ConvertManifest.load(out) if manifest_path(out).is_file() else fallback
    except Exception:  # noqa: BLE001 - an unreadable manifest lists nothing of this run
        log.debug("manifest unreadable while cleaning up", exc_info=True)
        return fallback


def _remove_unrecorded(p: Plan, manifest: ConvertManifest) -> None:
    """Remove the files of the modes this run was converting that the manifest does not list with their hash."""
    from toolchain.fsutil import sha256_file

    recorded = {f.file: f.sha256 for f in manifest.files_of(p.spec.stem)}
    for mode in p.todo:
        for name in model_file_names(p.spec.stem, mode):
            path = p.out / name
            try:
                if path.is_file() and recorded.get(name) != sha256_file(path):
                    path.unlink()
                    log.info("removed %s: its mode failed before it was recorded", path)
            except OSError:
                log.debug("could not remove the unrecorded %s", path, exc_info=True)


def _convert_modes(p: Plan, converter, manifest: ConvertManifest) -> Tuple[ConvertManifest, List[str]]:
    from .convert_modes import quiet_torch
    from .torch_state import for_conversion

    # quantizing switches the process to QNNPACK: engine, threads and oneDNN are put back afterwards
    with quiet_torch(), for_conversion(), progress(f"converting {p.spec.stem}", total=1 + len(p.todo)) as bar:
        facts = converter.prepare(bar.describe, p.todo)
        conv = _conversion_record(p, facts, manifest.conversions.get(p.spec.stem, {}))
        bar.advance()
        bar.describe(f"{p.spec.stem}: {', '.join('quant_' + m for m in p.todo)}: quantize, trace, convert, save, check")
        exists = set(p.modes) - set(p.todo)  # the modes asked for that are made: up to date, then this run's
        errors = []
        for done in converter.run(p.todo):
            conv = _with_mode(conv, done, p.keys[done.mode])
            manifest = manifest.replace_modes(p.spec.stem, conv, done.files, done.refused, cleared=(done.mode,))
            if done.error is None:
                exists.add(done.mode)
            errors += [done.error] if done.error is not None else []
            if exists:  # a refusal is recorded with the first mode made: none made, nothing written
                manifest.write()
            log.debug("quant_%s of %s recorded", done.mode, p.spec.stem)  # the bar advances
            bar.advance()
    if not exists:  # no mode asked for is made: the first error, as when one mode was asked for
        raise errors[0] if errors else ConversionError(f"{p.spec.stem}: no mode could be made")
    if conv.get("refused"):  # an earlier run's files of a mode refused now: never left to pass for this run's
        _remove_unrecorded(p, manifest)
    return manifest, conv["notes"]


__all__ = ["ConvertSettings", "ConvertResult", "Plan", "convert", "validate", "plan", "progress"]
