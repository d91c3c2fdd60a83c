"""``invoke convert --format executorch``: the same model as ExecuTorch ``.pte`` programs.

Variants: float with XNNPACK, int8 with XNNPACK (PT2E quantization with the XNNPACK quantizer, calibrated
on the legacy modes' calibration set), portable kernels without a delegate, and the accelerator delegates
whose partitioners run without a vendor SDK (Vulkan).  Delegates that need a vendor SDK are skipped with
the reason.  No torch (nor executorch) at import time: validation fails in milliseconds.
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from toolchain import pins
from toolchain.errors import ConversionError, PartlyConverted, RecordError, UsageError
from toolchain.fsutil import claim_output_dir, ensure_writable_dir, output_lock, sha256_file
from toolchain.pte_records import BASELINE, PteFile, PteVariant, load_section, pte_name, write_section
from toolchain.records import ConvertManifest, manifest_owner, now_iso
from toolchain.settings import default
from toolchain.variants import DELEGATES, MODE_OF_PRECISION, MODES, PRECISION_OF_MODE, precisions

from .calibration import CalibrationSpec, parse_calibration
from .models import ModelSpec, check_stem_free, parse_model, parse_weights
from .reuse import code_digest, conversion_key, made_with, up_to_date

log = logging.getLogger(__name__)


CODE = ("executorch_lane.py", "executorch_export.py", "models.py", "calibration.py", "prepared.py")  # keys the programs
VARIANTS = (PteVariant("fp32", "xnnpack"), PteVariant("int8", "xnnpack"), PteVariant("fp32", "portable"),
            PteVariant("fp32", "vulkan"))

# Accelerator delegates whose lowering needs a vendor SDK that is not on PyPI: skipped, with the reason.
SDK_DELEGATES: Dict[str, str] = {
    "qnn": "Qualcomm AI Engine Direct: QnnPartitioner imports here, but lowering runs the QNN SDK's compiler "
           "(QNN_SDK_ROOT); executorch 1.5.1 tries to download that SDK from Qualcomm when it is absent, "
           "so torchdroid does not attempt it",
    "mediatek": "MediaTek NeuroPilot: executorch.backends.mediatek.partitioner imports mtk_converter, "
                "a vendor package shipped with the NeuroPilot SDK",
    "samsung": "Samsung Exynos (ENN): the partitioner imports executorch.backends.samsung.python, "
               "bindings built with the Exynos AI LiteCore SDK",
}


def probe_sdk_delegates() -> Dict[str, str]:
    """Why each vendor-SDK delegate is skipped (an import probe where one is safe; QNN is never lowered)."""
    skipped = {}
    for name, reason in SDK_DELEGATES.items():
        module = {"mediatek": "executorch.backends.mediatek.partitioner",
                  "samsung": "executorch.backends.samsung.partition.enn_partitioner"}.get(name)
        if module:
            try:
                importlib.import_module(module)
            except ImportError as e:
                reason = f"{reason} (import here: {type(e).__name__}: {e})"
        skipped[name] = reason
    return skipped


def parse_delegates(value: Any) -> Tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else [value]
    out = list(dict.fromkeys(p.strip().lower() for item in items for p in str(item or "").split(",") if p.strip()))
    if not out:
        return DELEGATES
    for d in out:
        if d in SDK_DELEGATES:
            raise UsageError(f"the {d} delegate cannot be lowered on this machine", cause=SDK_DELEGATES[d],
                             remedy=f"use the delegates that need no vendor SDK: {', '.join(DELEGATES)}")
        if d not in DELEGATES:
            raise UsageError(f"unknown ExecuTorch delegate {d!r}", remedy=f"use one or more of: {', '.join(DELEGATES)}")
    return tuple(d for d in DELEGATES if d in out)


def asked_variants(quant: Tuple[str, ...], delegates: Tuple[str, ...]) -> Tuple[List[PteVariant], List[str]]:
    """The programs ``--quant`` (its precisions: none -> fp32, core/full -> int8) and ``--delegates`` ask for, and a
    note for a value of either that makes no program here (said once, in the run's notes); a UsageError (exit 2)
    when together they make none."""
    unknown = [m for m in quant if m not in PRECISION_OF_MODE]
    if unknown or not quant:
        raise UsageError(f"unknown quantization mode(s) {', '.join(map(repr, unknown)) or '(none given)'}",
                         remedy=f"use one or more of: {', '.join(MODES)}")
    wanted = precisions(quant)
    variants = [v for v in VARIANTS if v.delegate in delegates and v.precision in wanted]
    made_by = {p: [v.delegate for v in VARIANTS if v.precision == p] for p in wanted}
    if not variants:
        raise UsageError(f"--quant {','.join(quant)} with --delegates {','.join(delegates)} asks for no ExecuTorch "
                         "program", cause=_which_make(made_by),
                         remedy=_remedy(wanted, made_by))
    return variants, _unmade(quant, delegates, variants, made_by)


def _unmade(quant: Tuple[str, ...], delegates: Tuple[str, ...], variants: List[PteVariant],
            made_by: Dict[str, List[str]]) -> List[str]:
    """A note for an asked precision that no asked delegate makes, and one for the asked delegates that make none
    of the asked precisions."""
    notes = [f"--quant {','.join(_modes_of(p, quant))} asks for {p} programs, which the {', '.join(made_by[p])} "
             f"delegate(s) make, not --delegates {','.join(delegates)}: no {p} program is made"
             for p in made_by if not any(v.precision == p for v in variants)]
    idle = [d for d in delegates if not any(v.delegate == d for v in variants)]
    if idle:
        notes.append(f"--quant {','.join(quant)} asks for {' and '.join(made_by)} programs only, which the "
                     f"{', '.join(idle)} delegate(s) do not make: no {', '.join(idle)} program is made")
    return notes


def _modes_of(precision: str, quant: Tuple[str, ...]) -> List[str]:
    return [m for m in quant if PRECISION_OF_MODE[m] == precision]


def _which_make(made_by: Dict[str, List[str]]) -> str:
    return "; ".join(f"{p} programs are made by the {', '.join(ds)} delegate(s)" for p, ds in made_by.items())


def _remedy(wanted: Tuple[str, ...], made_by: Dict[str, List[str]]) -> str:
    other = [m for m in MODES if PRECISION_OF_MODE[m] not in wanted][:1]
    delegates = sorted({d for ds in made_by.values() for d in ds})
    return (f"add --delegates {','.join(delegates)}" + (f", or ask for other programs with --quant {other[0]}"
                                                        if other else ""))


@dataclass(frozen=True)
class ExecutorchSettings:
    out: Path = Path(default("convert.out"))
    model: str = "mobilenet_v2"
    weights: str = "pretrained"
    calibration: Optional[Path] = None
    calibration_count: int = 32
    seed: int = 0
    factory_timeout: float = 600.0  # seconds for a user's model file (convert.factory_timeout)
    inputs: Optional[str] = None  # --inputs: the model file's inputs (converter/input_specs.py)
    delegates: Tuple[str, ...] = DELEGATES
    quant: Tuple[str, ...] = MODES  # --quant: its precisions (none -> fp32, core/full -> int8; PRECISION_OF_MODE)
    check_inputs: int = 4  # calibration inputs whose reference outputs are recorded for the host check
    force: bool = False


@dataclass
class ExecutorchResult:
    manifest_path: Path
    files: List[PteFile]
    built: List[str]
    skipped: Dict[str, str]
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0
    not_made: Dict[str, str] = field(default_factory=dict)  # variant -> why it was refused (as the manifest says)


def _current(section: Dict[str, Any], out: Path, stem: str, variant: PteVariant, key: str) -> bool:
    """The program is :func:`converter.reuse.up_to_date` (the rule of every converted file) with ``key``."""
    name = pte_name(stem, variant.precision, variant.delegate)
    try:
        files = [PteFile.from_entry(out.resolve(), e) for e in section.get("files", []) if e.get("file") == name]
    except RecordError:  # an entry edited by hand: the program is made again
        return False
    return up_to_date(((section.get("conversions") or {}).get(stem) or {}).get("keys"), variant.name, key, files)


def _existing_section(out: Path) -> Dict[str, Any]:
    if not ConvertManifest.exists(out):
        return {}
    try:
        return load_section(out)
    except RecordError as e:
        log.warning("ignoring the unreadable manifest in %s (%s); the .pte programs will be rebuilt", out, e.what)
        return {}


def _reference_current(section: Dict[str, Any], out: Path, stem: str) -> bool:
    ref = (section.get("reference") or {}).get(stem)
    return bool(ref) and (out / ref["file"]).is_file() and sha256_file(out / ref["file"]) == ref.get("sha256")


def validate(settings: ExecutorchSettings) -> tuple:
    """Everything that can be checked without torch: (spec, weights, calibration, variants, notes)."""
    spec = parse_model(settings.model, settings.factory_timeout, settings.inputs)
    weights = parse_weights(settings.weights, settings.seed)
    calib = parse_calibration(settings.calibration, settings.calibration_count, settings.seed, warn=False)  # said once the inputs are known
    variants, said = asked_variants(tuple(settings.quant), parse_delegates(list(settings.delegates)))
    ensure_writable_dir(Path(settings.out), "output directory (--out)")
    version = pins.require_executorch()
    notes = [n for n in [pins.version_note(version)] if n] + said
    return spec, weights, calib, variants, notes


def convert_executorch(settings: ExecutorchSettings) -> ExecutorchResult:
    t0 = time.monotonic()
    spec, weights, calib, variants, notes = validate(settings)
    out = Path(settings.out)
    versions = made_with(executorch=True)
    keys = {v.name: conversion_key(spec, weights, calib, code_digest(only=CODE), variant=v.name,
                                   check_inputs=settings.check_inputs, versions=versions) for v in variants}
    section = _existing_section(out)
    check_stem_free(spec, out)
    todo = [v for v in variants if settings.force or not _current(section, out, spec.stem, v, keys[v.name])]
    built: List[str] = []
    refused: Dict[str, ConversionError] = {}
    if todo or not _reference_current(section, out, spec.stem):
        with output_lock(out, "invoke convert"):  # the legacy writer's lock: one writer per models directory
            claim_output_dir(out, "convert", force=settings.force, adopt=lambda d: manifest_owner(d) == "ours",
                             inputs=[weights.path, spec.factory_file, settings.calibration])
            check_stem_free(spec, out)  # again under the lock: another convert may have written that name since
            from . import executorch_export  # torch and executorch are imported only from here on
            from toolchain.logs import native_output_to_log

            from .torch_state import for_conversion

            # the quantized engine and threads as they were before, whatever export changes; upstream C++ lines
            # (ExecuTorch, cpuinfo) in the run log, not over the progress
            with for_conversion(), native_output_to_log():
                programs = executorch_export.build_programs(spec, weights, calib, todo, out, settings.check_inputs,
                                                            alone=len(todo) == len(variants),
                                                            int8_reference=_int8_reference(section, spec.stem, todo))
            programs.skipped = probe_sdk_delegates()
            programs.refused = naming_the_made(programs.refused, variants)
            programs.asked = _asked_record(settings.quant, variants)
            section = _merge(_existing_section(out), spec, calib, programs, keys, versions)
            notes.extend(programs.notes + _few_inputs(programs.calibration, calib, todo))
            path = write_section(out, section)
            refused = programs.refused
        built = [v.name for v in todo if v.name not in programs.refused]
    else:
        log.info("all %d requested .pte programs of %s are up to date in %s (use --force to rebuild)",
                 len(variants), spec.stem, out)
        path = ConvertManifest.load(out).path
    result = ExecutorchResult(path, _files(section, out, spec.stem, variants), built,
                              dict((section.get("conversions") or {}).get(spec.stem, {}).get("skipped", {})), notes,
                              time.monotonic() - t0, {name: e.one_line() for name, e in refused.items()})
    if refused:  # exit 10 after the manifest records what was made
        raise PartlyConverted.of("ExecuTorch", spec.stem, [v.name for v in variants if v.name not in refused],
                                 result.not_made, out, next(iter(refused.values())).remedy or "", result)
    return result


def naming_the_made(refused: Dict[str, ConversionError], asked: List[PteVariant]) -> Dict[str, ConversionError]:
    """Each refused program's error, its fix naming first the model's programs of another precision that exist (the
    ``asked`` ones not refused: made now or up to date) and the --quant that asks for those alone (``--quant none``:
    the fp32 programs, no int8 tried), so the user keeps what works instead of reporting a bug to get anything."""
    made = [v for v in asked if v.name not in refused]
    named = {}
    for name, e in refused.items():
        precision = name.split("-", 1)[0]
        others = [v for v in made if v.precision != precision]
        if not others:
            named[name] = e
            continue
        kind = others[0].precision
        fix = (f"the {kind} program(s) of this model were made ({', '.join(v.name for v in others)}): `--quant "
               f"{MODE_OF_PRECISION[kind]}` asks for the {kind} programs alone")
        named[name] = ConversionError(e.what, cause=e.cause, remedy=f"{fix}; {e.remedy}" if e.remedy else fix)
    return named


def _asked_record(quant: Tuple[str, ...], variants: List[PteVariant]) -> Dict[str, Any]:
    """What the manifest records of the programs asked for: --quant, its precisions, the delegates."""
    return {"quant": list(quant), "precisions": sorted({v.precision for v in variants}),
            "delegates": sorted({v.delegate for v in variants})}


def _int8_reference(section: Dict[str, Any], stem: str, todo: List[PteVariant]) -> bool:
    """Does the reference need the int8 (PT2E) expectations: an int8 program to make, or one of the model's listed
    from before (its check reads them)?  Without, no PT2E quantization runs (``--quant none``: fp32 programs only)."""
    return any(v.precision == "int8" for v in todo) or any(
        e.get("stem") == stem and e.get("precision") == "int8" for e in section.get("files", []))


def _files(section: Dict[str, Any], out: Path, stem: str, variants: List[PteVariant]) -> List[PteFile]:
    names = {pte_name(stem, v.precision, v.delegate) for v in variants}
    return [PteFile.from_entry(out.resolve(), e) for e in section.get("files", []) if e["file"] in names]


def _few_inputs(calibration: Optional[Dict[str, Any]], calib: CalibrationSpec, todo) -> List[str]:
    """The calibration record's warning (too few inputs, naming where they came from: images or the model's declared
    inputs) when an int8 program was calibrated on them."""
    calibration = calibration or calib.record()
    return [calibration["warning"]] if calibration.get("warning") and any(v.precision == "int8" for v in todo) else []


def _merge(section: Dict[str, Any], spec: ModelSpec, calib: CalibrationSpec, built, keys: Dict[str, str],
           versions: Dict[str, Any]) -> Dict[str, Any]:
    section = dict(section)
    rebuilt = {e["file"] for e in built.entries} | {pte_name(spec.stem, *name.split("-", 1)) for name in built.refused}
    files = [e for e in section.get("files", []) if e.get("file") not in rebuilt]
    for e in built.entries:
        e.update(executorch=versions["executorch"], torch=versions["torch"], baseline=BASELINE[e["precision"]])
        files.append(e)
    files.sort(key=lambda e: (e["stem"], [v.name for v in VARIANTS].index(f"{e['precision']}-{e['delegate']}")))
    conversions = dict(section.get("conversions") or {})
    conv = dict(conversions.get(spec.stem, {}))
    conv_keys = dict(conv.get("keys", {}))
    conv_keys.update({name: keys[name] for name in built.built_variants})
    conv.update(model=spec.name, model_id=spec.identity(), source=spec.source, weights=built.weights_record, calibration=built.calibration or calib.record(),
                executorch=versions["executorch"], torch=versions["torch"], keys=conv_keys,
                skipped=built.skipped, notes=built.notes, converted=now_iso(), asked=built.asked,
                refused={name: e.one_line() for name, e in built.refused.items()})
    conversions[spec.stem] = conv
    reference = dict(section.get("reference") or {})
    reference[spec.stem] = built.reference
    section.update(conversions=conversions, files=files, reference=reference)
    return section


__all__ = ["ExecutorchSettings", "ExecutorchResult", "convert_executorch", "parse_delegates", "VARIANTS",
           "SDK_DELEGATES"]
