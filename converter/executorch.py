"""``invoke convert --format executorch``: the model as ExecuTorch ``.pte`` programs.

Variants: float with XNNPACK, int8 with XNNPACK (PT2E: ``torch.export`` -> ``prepare_pt2e`` with the XNNPACK quantizer
-> calibration on the TorchScript modes' calibration set -> ``convert_pt2e``, whose graph is also the int8 reference),
portable kernels without a delegate, and the accelerator delegates whose partitioners run without a vendor SDK
(Vulkan); the vendor-SDK delegates are skipped with the reason.  What is up to date, the manifest and the pins are
the TorchScript format's (converter/reuse.py, toolchain/records.py, toolchain/pins.py).  torch and executorch are
imported only when a program is made: validation fails in milliseconds.
"""

from __future__ import annotations

import importlib
import io
import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from toolchain import pins
from toolchain.errors import ConversionError, PartlyConverted, RecordError, UsageError
from toolchain.fsutil import atomic_write_bytes, claim_output_dir, output_lock, sha256_file
from toolchain.progress import progress, time_left
from toolchain.records import (BASELINE, ConvertManifest, PteFile, load_method, manifest_owner, now_iso, program_args,
                               pte_name, reference_path)
from toolchain.variants import DELEGATES, MODE_OF_PRECISION, MODES, PRECISION_OF_MODE, precisions

from .calibration import CalibrationSpec, declared_samples, load_batch, record_for
from .finite import output_tensors, refuse_non_finite_output
from .models import (ModelSpec, WeightsSpec, build_float_model, calibrate_batchnorm, check_stem_free, declared_inputs,
                     declared_origin)
from .pipeline import ModelRequest, parse_request, writable_out
from .reuse import code_digest, conversion_key, made_with, read_existing, up_to_date
from .samples import CALIBRATION_CHUNK, stacked

log = logging.getLogger(__name__)

# The code that keys the programs: every converter module the export runs (this one's imports, theirs...), but the
# request's parsing (pipeline.py) and the key's own code (reuse.py); tests/unit/test_executorch_lane.py derives it.
CODE = ("executorch.py", "calibration.py", "finite.py", "host_check.py", "input_specs.py", "models.py", "prepared.py",
        "samples.py", "torch_state.py", "worker.py")
QUANT_SCHEME = ("PT2E static int8: XNNPACKQuantizer with get_symmetric_quantization_config(is_per_channel=True) "
                "(per-channel symmetric weights, per-tensor affine activations)")
RUNTIME_BACKEND = {"xnnpack": "XnnpackBackend", "vulkan": "VulkanBackend", "portable": None}
HELD_OUT_SEED_OFFSET = 1_000_003  # the reference inputs' seed: calibration seed + this (never a calibration input)
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
SDK_PROBES = {"mediatek": "executorch.backends.mediatek.partitioner",
              "samsung": "executorch.backends.samsung.partition.enn_partitioner"}  # safe to import (QNN is not)


@dataclass(frozen=True)
class PteVariant:
    precision: str  # fp32 | int8
    delegate: str  # xnnpack | portable | vulkan

    @property
    def name(self) -> str:
        return f"{self.precision}-{self.delegate}"

    def files(self, stem: str) -> List[str]:
        """The files the program is written as: the .pte and its ETRecord."""
        name = pte_name(stem, self.precision, self.delegate)
        return [name, name[: -len(".pte")] + ".etrecord"]


VARIANTS = (PteVariant("fp32", "xnnpack"), PteVariant("int8", "xnnpack"), PteVariant("fp32", "portable"),
            PteVariant("fp32", "vulkan"))


@dataclass(frozen=True)
class ExecutorchSettings(ModelRequest):
    delegates: Tuple[str, ...] = DELEGATES
    quant: Tuple[str, ...] = MODES  # --quant: its precisions (none -> fp32, core/full -> int8; PRECISION_OF_MODE)
    check_inputs: int = 4  # calibration inputs whose reference outputs are recorded for the host check


@dataclass
class ExecutorchResult:
    manifest_path: Path
    files: List[PteFile]
    built: List[str]
    skipped: Dict[str, str]
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0
    not_made: Dict[str, str] = field(default_factory=dict)  # variant -> why it was refused (as the manifest says)


@dataclass
class BuiltPrograms:
    entries: List[Dict[str, Any]] = field(default_factory=list)
    built_variants: List[str] = field(default_factory=list)
    skipped: Dict[str, str] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    refused: Dict[str, ConversionError] = field(default_factory=dict)  # variant name -> why it was not made
    weights_record: Dict[str, Any] = field(default_factory=dict)
    reference: Dict[str, Any] = field(default_factory=dict)
    calibration: Dict[str, Any] = field(default_factory=dict)  # what the manifest records of the calibration inputs
    asked: Dict[str, Any] = field(default_factory=dict)  # --quant, its precisions and the delegates (the manifest's)


# --------------------------------------------------------------------------- what is asked for (no torch)


def probe_sdk_delegates() -> Dict[str, str]:
    """Why each vendor-SDK delegate is skipped (an import probe where one is safe; QNN is never lowered)."""
    skipped = dict(SDK_DELEGATES)
    for name, module in SDK_PROBES.items():
        try:
            importlib.import_module(module)
        except ImportError as e:
            skipped[name] = f"{skipped[name]} (import here: {type(e).__name__}: {e})"
    return skipped


def parse_delegates(value: Any) -> Tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else [value]
    out = list(dict.fromkeys(p.strip().lower() for item in items for p in str(item or "").split(",") if p.strip()))
    for d in out:
        if d in SDK_DELEGATES:
            raise UsageError(f"the {d} delegate cannot be lowered on this machine", cause=SDK_DELEGATES[d],
                             remedy=f"use the delegates that need no vendor SDK: {', '.join(DELEGATES)}")
        if d not in DELEGATES:
            raise UsageError(f"unknown ExecuTorch delegate {d!r}", remedy=f"use one or more of: {', '.join(DELEGATES)}")
    return tuple(d for d in DELEGATES if d in out) if out else DELEGATES


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
        raise _none_asked(quant, delegates, wanted, made_by)
    return variants, _unmade(quant, delegates, variants, made_by)


def _none_asked(quant: Tuple[str, ...], delegates: Tuple[str, ...], wanted: Tuple[str, ...],
                made_by: Dict[str, List[str]]) -> UsageError:
    other = [m for m in MODES if PRECISION_OF_MODE[m] not in wanted][:1]
    return UsageError(f"--quant {','.join(quant)} with --delegates {','.join(delegates)} asks for no ExecuTorch "
                      "program", cause="; ".join(f"{p} programs are made by the {', '.join(ds)} delegate(s)"
                                                 for p, ds in made_by.items()),
                      remedy=f"add --delegates {','.join(sorted({d for ds in made_by.values() for d in ds}))}"
                             + (f", or ask for other programs with --quant {other[0]}" if other else ""))


def _unmade(quant: Tuple[str, ...], delegates: Tuple[str, ...], variants: List[PteVariant],
            made_by: Dict[str, List[str]]) -> List[str]:
    """A note for an asked precision that no asked delegate makes, and one for the asked delegates that make none
    of the asked precisions."""
    notes = [f"--quant {','.join(m for m in quant if PRECISION_OF_MODE[m] == p)} asks for {p} programs, which the "
             f"{', '.join(made_by[p])} delegate(s) make, not --delegates {','.join(delegates)}: no {p} program is made"
             for p in made_by if not any(v.precision == p for v in variants)]
    idle = [d for d in delegates if not any(v.delegate == d for v in variants)]
    if idle:
        notes.append(f"--quant {','.join(quant)} asks for {' and '.join(made_by)} programs only, which the "
                     f"{', '.join(idle)} delegate(s) do not make: no {', '.join(idle)} program is made")
    return notes


def validate(settings: ExecutorchSettings) -> tuple:
    """Everything that can be checked without torch: (spec, weights, calibration, variants, notes)."""
    variants, said = asked_variants(tuple(settings.quant), parse_delegates(list(settings.delegates)))
    spec, weights, calib = parse_request(settings)
    version = pins.require_executorch()
    writable_out(settings)
    return spec, weights, calib, variants, [n for n in [pins.version_note(version)] if n] + said


# --------------------------------------------------------------------------- convert: plan, make, record


def convert_executorch(settings: ExecutorchSettings) -> ExecutorchResult:
    t0 = time.monotonic()
    spec, weights, calib, variants, notes = validate(settings)
    out = Path(settings.out)
    versions = made_with(executorch=True)
    keys = {v.name: conversion_key(spec, weights, calib, code_digest(only=CODE), variant=v.name,
                                   check_inputs=settings.check_inputs, versions=versions) for v in variants}
    manifest, todo, reference = _plan(out, spec, variants, keys, settings.force)
    refused: Dict[str, ConversionError] = {}
    if todo or not reference:
        manifest, refused = _make(settings, (spec, weights, calib), variants, todo, keys, versions, notes)
    else:
        log.info("all %d requested .pte programs of %s are up to date in %s (use --force to rebuild)",
                 len(variants), spec.stem, out)
    names = {v.files(spec.stem)[0] for v in variants}
    conv = manifest.executorch.get("conversions", {}).get(spec.stem, {})
    result = ExecutorchResult(manifest.path, [f for f in manifest.programs() if f.file in names],
                              [v.name for v in todo if v.name not in refused], dict(conv.get("skipped", {})), notes,
                              time.monotonic() - t0, {name: e.one_line() for name, e in refused.items()})
    if refused:  # exit 10 after the manifest records what was made
        raise PartlyConverted.of("ExecuTorch", spec.stem, [v.name for v in variants if v.name not in refused],
                                 result.not_made, out, next(iter(refused.values())).remedy or "", result)
    return result


def _plan(out: Path, spec: ModelSpec, variants: List[PteVariant], keys: Dict[str, str],
          force: bool) -> Tuple[ConvertManifest, List[PteVariant], bool]:
    """(the manifest, the programs to make: those not :func:`converter.reuse.up_to_date`, is the reference current)"""
    manifest, section, made = _existing(out)
    check_stem_free(spec, out)
    recorded = ((section.get("conversions") or {}).get(spec.stem) or {}).get("keys")
    todo = [v for v in variants if force or not up_to_date(
        recorded, v.name, keys[v.name], [f for f in made if f.file == v.files(spec.stem)[0]])]
    return manifest, todo, _reference_current(section, out, spec.stem)


def _existing(out: Path, warn: bool = True) -> Tuple[ConvertManifest, Dict[str, Any], List[PteFile]]:
    """The manifest in ``out`` as the TorchScript format reads it (converter.reuse.read_existing), its ExecuTorch
    section and programs; a damaged section is ignored with a warning (its programs are made again)."""
    manifest = read_existing(out)
    try:
        return manifest, manifest.executorch, manifest.programs()
    except RecordError as e:
        if warn:
            log.warning("ignoring the unreadable ExecuTorch section of %s (%s); its programs will be rebuilt",
                        manifest.path, e.what)
        return manifest, {}, []


def _reference_current(section: Dict[str, Any], out: Path, stem: str) -> bool:
    try:
        return reference_path(out, stem, section).is_file()
    except RecordError:
        return False


def _make(settings: ExecutorchSettings, model: tuple, variants: List[PteVariant], todo: List[PteVariant],
          keys: Dict[str, str], versions: Dict[str, Any], notes: List[str]) -> Tuple[ConvertManifest, dict]:
    """Make ``todo`` (and the reference) under the output directory's lock and record them: (the manifest written,
    the programs refused)."""
    spec, weights, calib = model
    out = Path(settings.out)
    with output_lock(out, "invoke convert"):  # the TorchScript writer's lock: one writer per models directory
        claim_output_dir(out, "convert", force=settings.force, adopt=lambda d: manifest_owner(d) == "ours",
                         inputs=[weights.path, spec.factory_file, settings.calibration])
        check_stem_free(spec, out)  # again under the lock: another convert may have written that name since
        from toolchain.logs import native_output_to_log

        from .torch_state import for_conversion

        manifest, section, _ = _existing(out, warn=False)  # again under the lock: another convert may have written
        # the quantized engine and threads as they were before, whatever export changes; upstream C++ lines
        # (ExecuTorch, cpuinfo) in the run log, not over the progress
        with for_conversion(), native_output_to_log():
            programs = build_programs(spec, weights, calib, todo, out, settings.check_inputs,
                                      alone=len(todo) == len(variants),
                                      int8_reference=_int8_reference(section, spec.stem, todo))
        programs.skipped = probe_sdk_delegates()
        programs.refused = naming_the_made(programs.refused, variants)
        programs.asked = {"quant": list(settings.quant), "precisions": sorted({v.precision for v in variants}),
                          "delegates": sorted({v.delegate for v in variants})}
        notes.extend(programs.notes + _few_inputs(programs.calibration, calib, todo))
        manifest.write_executorch(_merge(section, spec, calib, programs, keys, versions))
    return manifest, programs.refused


def naming_the_made(refused: Dict[str, ConversionError], asked: List[PteVariant]) -> Dict[str, ConversionError]:
    """Each refused program's error, its fix naming first the model's programs of another precision that exist (the
    ``asked`` ones not refused: made now or up to date) and the --quant that asks for those alone (``--quant none``:
    the fp32 programs, no int8 tried), so the user keeps what works instead of reporting a bug to get anything."""
    made = [v for v in asked if v.name not in refused]
    named = {}
    for name, e in refused.items():
        others = [v for v in made if v.precision != name.split("-", 1)[0]]
        if not others:
            named[name] = e
            continue
        kind = others[0].precision
        fix = (f"the {kind} program(s) of this model were made ({', '.join(v.name for v in others)}): `--quant "
               f"{MODE_OF_PRECISION[kind]}` asks for the {kind} programs alone")
        named[name] = ConversionError(e.what, cause=e.cause, remedy=f"{fix}; {e.remedy}" if e.remedy else fix)
    return named


def _int8_reference(section: Dict[str, Any], stem: str, todo: List[PteVariant]) -> bool:
    """Does the reference need the int8 (PT2E) expectations: an int8 program to make, or one of the model's listed
    from before (its check reads them)?  Without, no PT2E quantization runs (``--quant none``: fp32 programs only)."""
    return any(v.precision == "int8" for v in todo) or any(
        e.get("stem") == stem and e.get("precision") == "int8" for e in section.get("files", []))


def _few_inputs(calibration: Optional[Dict[str, Any]], calib: CalibrationSpec, todo) -> List[str]:
    """The calibration record's warning (too few inputs, naming where they came from: images or the model's declared
    inputs) when an int8 program was calibrated on them."""
    calibration = calibration or calib.record()
    return [calibration["warning"]] if calibration.get("warning") and any(v.precision == "int8" for v in todo) else []


def _merge(section: Dict[str, Any], spec: ModelSpec, calib: CalibrationSpec, built: BuiltPrograms,
           keys: Dict[str, str], versions: Dict[str, Any]) -> Dict[str, Any]:
    """The ExecuTorch section with this run's programs, refusals and reference (the on-disk shape in
    toolchain/records.py)."""
    section = dict(section)
    rebuilt = {e["file"] for e in built.entries} | {pte_name(spec.stem, *name.split("-", 1)) for name in built.refused}
    files = [e for e in section.get("files", []) if e.get("file") not in rebuilt]
    for e in built.entries:
        e.update(executorch=versions["executorch"], torch=versions["torch"], baseline=BASELINE[e["precision"]])
        files.append(e)
    files.sort(key=lambda e: (e["stem"], [v.name for v in VARIANTS].index(f"{e['precision']}-{e['delegate']}")))
    conversions = dict(section.get("conversions") or {})
    conv = dict(conversions.get(spec.stem, {}))
    conv.update(model=spec.name, model_id=spec.identity(), source=spec.source, weights=built.weights_record,
                calibration=built.calibration or calib.record(), executorch=versions["executorch"],
                torch=versions["torch"], keys={**conv.get("keys", {}), **{n: keys[n] for n in built.built_variants}},
                skipped=built.skipped, notes=built.notes, converted=now_iso(), asked=built.asked,
                refused={name: e.one_line() for name, e in built.refused.items()})
    conversions[spec.stem] = conv
    section.update(conversions=conversions, files=files,
                   reference={**(section.get("reference") or {}), spec.stem: built.reference})
    return section


# --------------------------------------------------------------------------- the export itself (torch, executorch)


def host_backends() -> List[str]:
    """The delegates the installed host runtime has registered (e.g. XnnpackBackend)."""
    from executorch.runtime import Runtime

    return list(Runtime.get().backend_registry.registered_backend_names)


def partitioners(delegate: str) -> list:
    if delegate == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        return [XnnpackPartitioner()]
    if delegate == "vulkan":
        from executorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner

        return [VulkanPartitioner()]
    return []  # portable: no delegate, every operator runs on the portable kernels


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


def lower(exported, delegate: str, label: str, example) -> tuple:
    """An ExportedProgram -> (the .pte bytes, the ETRecord with a representative input)."""
    from executorch.exir import to_edge_transform_and_lower

    try:
        edge = to_edge_transform_and_lower(exported, partitioner=partitioners(delegate), generate_etrecord=True)
        program = edge.to_executorch()
        etrecord = program.get_etrecord()
        etrecord.update_representative_inputs(list(program_args(example)))
    except Exception as e:  # torch.export / lowering raise many types; they all mean "cannot lower"
        raise ConversionError(f"{label}: lowering to ExecuTorch with the {delegate} delegate failed",
                              cause=_first_line(e),
                              remedy="run with --debug for the traceback; leave the delegate out with --delegates") from e
    return program.buffer, etrecord


def export(model, example, label: str):
    """``example``: one input tensor, or a tuple of them (one per ``forward`` argument)."""
    import torch

    try:
        return torch.export.export(model, program_args(example))
    except Exception as e:
        raise ConversionError(
            f"{label}: torch.export cannot capture the model", cause=_first_line(e),
            remedy="the ExecuTorch lane needs a model torch.export can trace (no data-dependent Python control "
                   "flow); run with --debug, or leave executorch out of --format") from e


def quantize_pt2e(model, exported, batch) -> tuple:
    """PT2E int8 with the XNNPACK quantizer, calibrated on ``batch``: ``(the converted GraphModule, inputs per
    calibration call)``.

    The observers' work per call (a histogram of every activation) does not depend on how many inputs the call
    holds, so the calibration runs CALIBRATION_CHUNK inputs per call as the TorchScript modes' does, on the float
    model captured with a free batch dimension (32 one-image calls took 50 s of CPU here, two calls of 16 take 19 s).
    A model torch.export cannot capture that way (a batch of one fixed inside it) is calibrated on ``exported``, the
    float model's ExportedProgram captured on ``batch[0]``, one input per call."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer()
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    graph, chunk = _calibration_graph(model, exported, batch)
    prepared = prepare_pt2e(graph, quantizer)
    with torch.no_grad():
        for i in range(0, len(batch), chunk):
            prepared(*stacked(batch[i:i + chunk]))
    return convert_pt2e(prepared), chunk


def _calibration_graph(model, exported, batch) -> tuple:
    """``(a GraphModule of the float model to calibrate, inputs per call)``; never the ExportedProgram the float
    programs lower (``module()`` gives a graph of its own)."""
    import torch
    from torch.export import Dim

    chunk = min(CALIBRATION_CHUNK, len(batch))
    if chunk > 1:
        try:
            args = stacked(batch[:chunk])
            batch_dim = Dim("batch", min=1, max=chunk)
            free = torch.export.export(model, args, dynamic_shapes=tuple({0: batch_dim} for _ in args))
            return free.module(), chunk
        except Exception as e:  # torch.export raises many types; each means "not with a free batch dimension"
            log.info("the int8 program is calibrated one input per call: torch.export cannot capture the model with "
                     "a free batch dimension (%s)", _first_line(e)[:250])
    return exported.module(), 1


# ops that only move or select values: an output they produce from a dequantize is still on its int8 grid
GRID_KEEPING = frozenset({"view", "_unsafe_view", "reshape", "flatten", "permute", "transpose", "t", "squeeze",
                          "unsqueeze", "clone", "contiguous", "alias", "detach", "expand", "select", "slice"})
DEQUANTIZE = "dequantize_per_tensor"


def _op_name(node) -> str:
    """``aten.upsample_bilinear2d.vec`` -> ``upsample_bilinear2d`` (the operator's name, no namespace/overload)."""
    name = getattr(getattr(node, "target", None), "__name__", str(getattr(node, "target", None)))
    return name.split(".")[0] if "." in name else name


def _nearest_dequantize(node):
    """The closest dequantize_per_tensor upstream of ``node`` (breadth first over its inputs), or None."""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop(0)
        if id(n) in seen or not hasattr(n, "op"):
            continue
        seen.add(id(n))
        if _op_name(n) == DEQUANTIZE:
            return n
        todo.extend(a for a in n.args if hasattr(a, "op"))
    return None


def output_rule(node) -> Dict[str, Any]:
    """How an int8 program's output ``node`` can be judged: ``on_grid`` when a dequantize produces it (through
    ops that only move values), its ``scale``/``zero_point`` then the output's LSB; otherwise ``after`` names the
    float operation that produces it and ``scale``/``zero_point`` are the nearest dequantize's upstream (the LSB
    the error is measured in), None when no dequantize feeds it."""
    n = node
    while getattr(n, "op", None) == "call_function" and _op_name(n) in GRID_KEEPING:
        n = n.args[0]
    if getattr(n, "op", None) == "call_function" and _op_name(n) == DEQUANTIZE:
        return {"scale": float(n.args[1]), "zero_point": int(n.args[2]), "on_grid": True}
    source = _nearest_dequantize(n)
    return {"scale": float(source.args[1]) if source is not None else None,
            "zero_point": int(source.args[2]) if source is not None else None,
            "on_grid": False, "after": str(getattr(n, "target", n))}


def output_rules(graph_module) -> List[Dict[str, Any]]:
    """:func:`output_rule` of every output of the converted graph, in the order the program returns them."""
    out = next(n for n in graph_module.graph.nodes if n.op == "output")
    return [output_rule(a) for a in (out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]])]


def build_programs(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, todo: List[PteVariant], out: Path,
                   check_inputs: int, alone: bool = True, int8_reference: bool = True) -> BuiltPrograms:
    """The programs of ``todo``, each made or refused on its own (``BuiltPrograms.refused``); when none is made and
    ``alone`` (no other program of the model is up to date in ``out``) the model is refused as a whole: the first
    program's ConversionError, nothing written.  ``int8_reference``: quantize with PT2E for the int8 programs'
    reference (False: fp32 programs only, no calibration)."""
    with warnings.catch_warnings():
        for category in (FutureWarning, DeprecationWarning, UserWarning):
            warnings.filterwarnings("ignore", category=category)
        written: List[Path] = []
        try:
            built = _build_programs(spec, weights, calib, todo, out, check_inputs, written, int8_reference)
            if built.refused and not built.entries and alone:  # nothing of the model made: refused as a whole
                raise next(iter(built.refused.values()))
            return built
        except BaseException:  # nothing half-written: what this run wrote is recorded only when every program is
            for path in written:
                path.unlink(missing_ok=True)
            raise


def _build_programs(spec, weights, calib, todo, out, check_inputs, written: List[Path],
                    int8_reference: bool = True) -> BuiltPrograms:
    built = BuiltPrograms()
    registered = host_backends()
    with progress(f"ExecuTorch programs of {spec.stem}", total=2 + len(todo)) as bar:
        bar.describe(f"{spec.stem}: loading the float model and {calib.count} calibration inputs")
        model, built.weights_record, batch, said = _float_model(spec, weights, calib)
        built.notes.extend(said)
        bar.advance()
        bar.describe(f"{spec.stem}: torch.export" + (" and the int8 (PT2E) reference" if int8_reference else ""))
        example = batch[0]
        float_exported = export(model, example, f"{spec.stem} fp32")
        quantized, per_call = quantize_pt2e(model, float_exported, batch) if int8_reference else (None, 0)
        checks = held_out_inputs(calib, spec, max(1, check_inputs))
        expected = _expected({"fp32": model, "int8": quantized}, checks, spec.stem)
        built.calibration = calibration_record(spec, calib)
        rules = output_rules(quantized) if quantized is not None else []
        built.reference = _write_reference(out, spec.stem, checks, expected, rules, example)
        written.append(out / built.reference["file"])
        bar.advance()
        spent: List[float] = []
        for i, variant in enumerate(todo):
            # no earlier times to go by: from the second program on, the ones done so far say how long the rest take
            left = len(todo) - i
            bar.describe(f"{spec.stem}: {variant.name}: lowering to ExecuTorch"
                         f"{time_left(spent, left, f'{left} program' + 's' * (left > 1))}")
            t0 = time.monotonic()
            exported = float_exported if variant.precision == "fp32" else export(quantized, example, f"{spec.stem} int8")
            first = program_args(expected[variant.precision][0])[0]
            entry = _program_or_refusal(spec, variant, exported, example, out, (checks[0], first), registered,
                                        written, built)
            if entry is not None and variant.precision == "int8":
                entry["quantization"] = {"scheme": QUANT_SCHEME, "calibration": built.calibration,
                                         "inputs_per_call": per_call, "output": rules[0] if rules else None}
            spent.append(time.monotonic() - t0)
            bar.advance()
    if "VulkanBackend" not in registered and any(v.delegate == "vulkan" for v in todo):
        built.notes.append("the Vulkan program is lowered but not run here: this host runtime registers "
                           f"{', '.join(registered)}, not VulkanBackend; it runs on a phone with a Vulkan GPU")
    return built


def _expected(models: Dict[str, Any], checks: List[Any], stem: str) -> Dict[str, List[Any]]:
    """``{precision: its reference model's outputs on the check inputs}`` for each model there is (no int8
    reference when only fp32 programs are asked for), each output as the reference records it: every output tensor
    in the order the program returns them (a dict's values, lists and tuples flattened), one tensor or a tuple."""
    import torch

    with torch.no_grad():
        outputs = {p: [m(*program_args(x)) for x in checks] for p, m in models.items() if m is not None}
    for precision, ys in outputs.items():
        refuse_non_finite_output(ys, f"{stem} ({precision})", f"its {len(ys)} reference inputs")
    return {p: [ts[0] if len(ts) == 1 else tuple(ts) for ts in map(output_tensors, ys)] for p, ys in outputs.items()}


def _float_model(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec):
    """``(float model, weights record, calibration batch, notes)``: what the TorchScript format of this convert
    prepared from the same inputs (converter/prepared.py; its notes are that format's), else built here the same way,
    BatchNorm statistics of untrained weights estimated as that format does (models.calibrate_batchnorm)."""
    from .prepared import take

    prepared = take(spec, weights, calib)
    if prepared is not None:
        return prepared.model, prepared.weights_record, prepared.batch, []
    model, record = build_float_model(spec, weights)
    declared = declared_inputs(spec)
    if declared is not None:  # the model's own inputs (tokens, audio, several): one tensor stays a tensor
        batch = [x if len(x) > 1 else x[0] for x in declared_samples(declared, calib.count, calib.seed, spec.stem)]
    else:
        batch = load_batch(calib, spec.input_hw)
    said = calibrate_batchnorm(spec, weights, model, batch, record)  # the same statistics the TorchScript modes get
    model.eval()
    return model, record, batch, [said] if said else []


def _program_or_refusal(spec, variant: PteVariant, exported, example, out: Path, check, registered,
                        written: List[Path], built: BuiltPrograms) -> Optional[Dict[str, Any]]:
    """One program written and recorded in ``built``, or refused on its own: a program that cannot be lowered or
    fails its host check (an int8 program whose quantization collapsed) is not written, its reason is kept in
    ``built.refused``, and the other programs of the model go on (issue 35 item 1)."""
    mine = [out / name for name in variant.files(spec.stem)]
    try:
        entry = _write_program(spec, variant, exported, example, out, check, registered, written)
    except ConversionError as e:
        for path in mine:
            path.unlink(missing_ok=True)
        written[:] = [p for p in written if p not in mine]
        built.refused[variant.name] = e
        log.info("%s not made: %s", variant.name, e.what)  # said once, by the format's PartlyConverted
        return None
    built.entries.append(entry)
    built.built_variants.append(variant.name)
    return entry


def _write_program(spec, variant: PteVariant, exported, example, out: Path, check, registered,
                   written: List[Path]) -> Dict[str, Any]:
    """Lower, write the program and its ETRecord, run it once on ``check`` = (reference input #0, its expected output)."""
    from .host_check import spec_of

    label = f"{spec.stem} {variant.name}"
    data, etrecord = lower(exported, variant.delegate, label, example)
    name, etrecord_name = variant.files(spec.stem)
    written.append(out / etrecord_name)
    tmp = out / ".etrecord.partial"
    try:
        etrecord.save(str(tmp))
        atomic_write_bytes(out / etrecord_name, tmp.read_bytes())
    finally:
        tmp.unlink(missing_ok=True)
    written.append(out / name)
    path = atomic_write_bytes(out / name, bytes(data))
    backend = RUNTIME_BACKEND[variant.delegate]
    runs_here = backend is None or backend in registered
    expected = check[1]
    check = _host_check(path, check[0], expected, label) if runs_here else {"ran": False,
        "reason": f"{backend} is not registered in this host runtime (it has: {', '.join(registered)})"}
    return {"file": name, "sha256": sha256_file(path), "size": path.stat().st_size, "model": spec.name,
            "stem": spec.stem, "format": "executorch", "precision": variant.precision, "delegate": variant.delegate,
            "input": spec_of(program_args(example)[0]).to_dict(), "output": spec_of(expected).to_dict(),
            "inputs": [spec_of(t).to_dict() for t in program_args(example)], "runs_on_host": runs_here,
            "etrecord": {"file": etrecord_name, "sha256": sha256_file(out / etrecord_name)}, "host_check": check}


def _host_check(path: Path, example, expected, label: str) -> Dict[str, Any]:
    """Load the written .pte back with the host runtime and run it once (the convert-time smoke check)."""
    try:
        y = load_method(path).execute(program_args(example))[0]
        refuse_non_finite_output(y, f"{label}: {path.name}", "reference input #0")
    except ConversionError:
        raise
    except Exception as e:
        # with what the runtime itself said when the error carries it (a RecordError's cause: ExecuTorch's own
        # message when a program's method does not load)
        said = f"{_first_line(e)}: {e.cause}" if getattr(e, "cause", None) else _first_line(e)
        raise ConversionError(f"{label}: the written program {path.name} does not run in ExecuTorch's host runtime",
                              cause=said,
                              remedy="to see why, run with --debug (the traceback is in the run's log) and report it; "
                                     "the program is not kept") from e
    if float(y.max() - y.min()) == 0.0:
        raise ConversionError(f"{label}: {path.name} gives a constant output on reference input #0",
                              cause="the program (or its quantization) has collapsed",
                              remedy="check the weights (--weights) and the calibration images (--calibration)")
    return {"ran": True, "max_abs_diff": float((y - expected).abs().max()), "against": "reference output on input #0"}


def held_out_inputs(calib: CalibrationSpec, spec: ModelSpec, count: int) -> List[Any]:
    """The host check's inputs: synthetic images the calibration never saw (another seed), whatever the calibration
    source, so the int8 program is judged out of sample; a model declaring its inputs gets its own function's
    (another seed too).  One tensor per input, or a tuple for a model of several inputs."""
    from .calibration import synthetic_images

    declared = declared_inputs(spec)
    if declared is not None:
        samples = declared_samples(declared, count, calib.seed + HELD_OUT_SEED_OFFSET, spec.stem)
        return [x if len(x) > 1 else x[0] for x in samples]
    return [x.contiguous() for x in synthetic_images(count, calib.seed + HELD_OUT_SEED_OFFSET, spec.input_hw)]


def calibration_record(spec: ModelSpec, calib: CalibrationSpec) -> Dict[str, Any]:
    """The calibration inputs as the manifest records them: the declared example inputs' function, or ``calib``'s."""
    return record_for(calib, declared_origin(spec) if declared_inputs(spec) is not None else None)


def _write_reference(out: Path, stem: str, inputs, expected, rules, example) -> Dict[str, Any]:
    """Inputs and expected outputs (fp32: eager model; int8: the PT2E reference) for the host check, each int8
    output's rule (:func:`output_rule`; ``int8_output``: the first's, as deploy reads it), and the lowering's
    example input (the ETRecord's representative input: what the per-operator comparison runs)."""
    import torch

    buf = io.BytesIO()
    torch.save({"inputs": inputs, "expected": expected, "int8_output": rules[0] if rules else None,
                "int8_outputs": rules, "held_out": True, "example": example}, buf)
    name = f"{stem}-executorch-reference.pt"
    path = atomic_write_bytes(out / name, buf.getvalue())
    return {"file": name, "sha256": sha256_file(path), "inputs": len(inputs),
            "what": "held-out synthetic inputs (calibration seed + 1000003, not calibrated on); fp32 expected = eager "
                    "model, int8 expected = PT2E converted graph"}


__all__ = ["ExecutorchSettings", "ExecutorchResult", "convert_executorch", "parse_delegates", "VARIANTS",
           "SDK_DELEGATES"]
