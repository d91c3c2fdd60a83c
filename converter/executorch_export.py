"""The torch-heavy half of the ExecuTorch lane: torch.export -> edge -> delegate -> ``.pte``.

Imported only when a program must be (re)built.  Float programs lower the eager model; the int8 program
goes through PT2E (export -> ``prepare_pt2e`` with the XNNPACK quantizer -> calibration on the same
inputs as the legacy modes -> ``convert_pt2e``), whose converted graph is also the int8 reference.
"""

from __future__ import annotations

import io
import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from toolchain.errors import ConversionError
from toolchain.fsutil import atomic_write_bytes, sha256_file
from toolchain.progress import progress, time_left
from toolchain.pte_records import PteVariant, load_method, program_args, pte_name

from .finite import output_tensors, refuse_non_finite_output
from .host_check import spec_of
from .calibration import CalibrationSpec, declared_samples, load_batch, record_for
from .models import ModelSpec, WeightsSpec, build_float_model, calibrate_batchnorm, declared_inputs, declared_origin

log = logging.getLogger(__name__)

QUANT_SCHEME = ("PT2E static int8: XNNPACKQuantizer with get_symmetric_quantization_config(is_per_channel=True) "
                "(per-channel symmetric weights, per-tensor affine activations)")


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


RUNTIME_BACKEND = {"xnnpack": "XnnpackBackend", "vulkan": "VulkanBackend", "portable": None}


def lower(exported, delegate: str, label: str, example) -> tuple:
    """An ExportedProgram -> (the .pte bytes, the ETRecord with a representative input)."""
    from executorch.exir import to_edge_transform_and_lower

    try:
        edge = to_edge_transform_and_lower(exported, partitioner=partitioners(delegate), generate_etrecord=True)
        program = edge.to_executorch()
        etrecord = program.get_etrecord()
        etrecord.update_representative_inputs(program_args(example))
    except Exception as e:  # torch.export / lowering raise many types; they all mean "cannot lower"
        raise ConversionError(
            f"{label}: lowering to ExecuTorch with the {delegate} delegate failed",
            cause=f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}",
            remedy="run with --debug for the traceback; leave the delegate out with --delegates",
        ) from e
    return program.buffer, etrecord


def export(model, example, label: str):
    """``example``: one input tensor, or a tuple of them (one per ``forward`` argument)."""
    try:
        return torch.export.export(model, tuple(program_args(example)))
    except Exception as e:
        raise ConversionError(
            f"{label}: torch.export cannot capture the model",
            cause=f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}",
            remedy="the ExecuTorch lane needs a model torch.export can trace (no data-dependent Python control "
                   "flow); run with --debug, or leave executorch out of --format",
        ) from e


def quantize_pt2e(model, exported, batch) -> tuple:
    """PT2E int8 with the XNNPACK quantizer, calibrated on ``batch``: ``(the converted GraphModule, inputs per
    calibration call)``.

    The observers' work per call (a histogram of every activation) does not depend on how many inputs the call
    holds, so the calibration runs CALIBRATION_CHUNK inputs per call as the legacy modes' does, on the float model
    captured with a free batch dimension (32 one-image calls took 50 s of CPU here, two calls of 16 take 19 s).  A
    model torch.export cannot capture that way (a batch of one fixed inside it) is calibrated on ``exported``, the
    float model's ExportedProgram captured on ``batch[0]``, one input per call."""
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
            prepared(*_stacked(batch[i:i + chunk]))
    return convert_pt2e(prepared), chunk


def _stacked(samples) -> List[Any]:
    """Inputs (tensors, or tuples of them) joined along the batch dimension: one argument list."""
    args = [program_args(x) for x in samples]
    return [torch.cat([a[i] for a in args], 0) for i in range(len(args[0]))]


def _calibration_graph(model, exported, batch) -> tuple:
    """``(a GraphModule of the float model to calibrate, inputs per call)``; never the ExportedProgram the float
    programs lower (``module()`` gives a graph of its own)."""
    from torch.export import Dim

    from .export import CALIBRATION_CHUNK

    chunk = min(CALIBRATION_CHUNK, len(batch))
    if chunk > 1:
        try:
            stacked = _stacked(batch[:chunk])
            batch_dim = Dim("batch", min=1, max=chunk)
            free = torch.export.export(model, tuple(stacked), dynamic_shapes=tuple({0: batch_dim} for _ in stacked))
            return free.module(), chunk
        except Exception as e:  # torch.export raises many types; each means "not with a free batch dimension"
            log.info("the int8 program is calibrated one input per call: torch.export cannot capture the model with "
                     "a free batch dimension (%s: %s)", type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")
    return exported.module(), 1


# ops that only move or select values: an output they produce from a dequantize is still on its int8 grid
GRID_KEEPING = frozenset({"view", "_unsafe_view", "reshape", "flatten", "permute", "transpose", "t", "squeeze",
                          "unsqueeze", "clone", "contiguous", "alias", "detach", "expand", "select", "slice"})
DEQUANTIZE = "dequantize_per_tensor"


def _op_name(node) -> str:
    """``aten.upsample_bilinear2d.vec`` -> ``upsample_bilinear2d`` (the operator's name, no namespace/overload)."""
    target = getattr(node, "target", None)
    name = getattr(target, "__name__", str(target))
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
    args = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
    return [output_rule(a) for a in args]


def output_qparams(graph_module) -> Optional[Dict[str, Any]]:
    """The first output's :func:`output_rule` (the int8 output the checks judge first)."""
    rules = output_rules(graph_module)
    return rules[0] if rules else None


def _etrecord_bytes(etrecord, tmp_dir: Path) -> bytes:
    tmp = tmp_dir / ".etrecord.partial"
    try:
        etrecord.save(str(tmp))
        return tmp.read_bytes()
    finally:
        tmp.unlink(missing_ok=True)


def build_programs(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, todo: List[PteVariant], out: Path,
                   check_inputs: int, alone: bool = True, int8_reference: bool = True) -> BuiltPrograms:
    """The programs of ``todo``, each made or refused on its own (``BuiltPrograms.refused``); when none is made and
    ``alone`` (no other program of the model is up to date in ``out``) the model is refused as a whole: the first
    program's ConversionError, nothing written.  ``int8_reference``: quantize with PT2E for the int8 programs'
    reference (False: fp32 programs only, no calibration)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=UserWarning)
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
        outputs = _reference_outputs({"fp32": model, "int8": quantized}, checks)
        for precision, ys in outputs.items():
            refuse_non_finite_output(ys, f"{spec.stem} ({precision})", f"its {len(ys)} reference inputs")
        # every output tensor, in the order the program returns them (a dict's values, lists and tuples flattened)
        expected = {k: [_as_recorded(output_tensors(y)) for y in ys] for k, ys in outputs.items()}
        built.calibration = calibration_record(spec, calib)
        built.reference = _write_reference(out, spec.stem, checks, expected,
                                           output_rules(quantized) if quantized is not None else [], example)
        written.append(out / built.reference["file"])
        bar.advance()
        spent: List[float] = []
        for i, variant in enumerate(todo):
            # no earlier times to go by: from the second program on, the ones done so far say how long the rest take
            left = len(todo) - i
            eta = time_left(spent, left, f"{left} program{'s' * (left > 1)}")
            bar.describe(f"{spec.stem}: {variant.name}: lowering to ExecuTorch{eta}")
            t0 = time.monotonic()
            exported = float_exported if variant.precision == "fp32" else export(quantized, example, f"{spec.stem} int8")
            first = program_args(expected[variant.precision][0])[0]
            entry = _program_or_refusal(spec, variant, exported, example, out, (checks[0], first), registered,
                                        written, built)
            if entry is not None and variant.precision == "int8":
                entry["quantization"] = {"scheme": QUANT_SCHEME, "calibration": calibration_record(spec, calib),
                                         "inputs_per_call": per_call, "output": output_qparams(quantized)}
            spent.append(time.monotonic() - t0)
            bar.advance()
    if "VulkanBackend" not in registered and any(v.delegate == "vulkan" for v in todo):
        built.notes.append("the Vulkan program is lowered but not run here: this host runtime registers "
                           f"{', '.join(registered)}, not VulkanBackend; it runs on a phone with a Vulkan GPU")
    return built


def _reference_outputs(models: Dict[str, Any], checks: List[Any]) -> Dict[str, List[Any]]:
    """``{precision: its reference model's outputs on the check inputs}`` for each model there is (no int8
    reference when only fp32 programs are asked for)."""
    with torch.no_grad():
        return {precision: [m(*program_args(x)) for x in checks] for precision, m in models.items() if m is not None}


def _float_model(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec):
    """``(float model, weights record, calibration batch, notes)``: what the TorchScript lane of this convert
    prepared from the same inputs (converter/prepared.py; its notes are that lane's), else built here the same way,
    BatchNorm statistics of untrained weights estimated as that lane does (models.calibrate_batchnorm)."""
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
    said = calibrate_batchnorm(spec, weights, model, batch, record)  # the same statistics the legacy modes get
    model.eval()
    return model, record, batch, [said] if said else []


def _program_or_refusal(spec, variant: PteVariant, exported, example, out: Path, check, registered,
                        written: List[Path], built: BuiltPrograms) -> Optional[Dict[str, Any]]:
    """One program written and recorded in ``built``, or refused on its own: a program that cannot be lowered or
    fails its host check (an int8 program whose quantization collapsed) is not written, its reason is kept in
    ``built.refused``, and the other programs of the model go on (issue 35 item 1)."""
    mine = [out / name for name in _program_files(spec.stem, variant)]
    try:
        entry = _write_program(spec, variant, exported, example, out, check, registered, written)
    except ConversionError as e:
        for path in mine:
            path.unlink(missing_ok=True)
        written[:] = [p for p in written if p not in mine]
        built.refused[variant.name] = e
        log.info("%s not made: %s", variant.name, e.what)  # said once, by the lane's PartlyConverted
        return None
    built.entries.append(entry)
    built.built_variants.append(variant.name)
    return entry


def _program_files(stem: str, variant: PteVariant) -> List[str]:
    """The files one program is written as: the .pte and its ETRecord."""
    name = pte_name(stem, variant.precision, variant.delegate)
    return [name, name[: -len(".pte")] + ".etrecord"]


def _write_program(spec, variant: PteVariant, exported, example, out: Path, check, registered,
                   written: List[Path]) -> Dict[str, Any]:
    """Lower, write the program and its ETRecord, run it once on ``check`` = (reference input #0, its expected output)."""
    label = f"{spec.stem} {variant.name}"
    data, etrecord = lower(exported, variant.delegate, label, example)
    name, etrecord_name = _program_files(spec.stem, variant)
    written.append(out / etrecord_name)
    atomic_write_bytes(out / etrecord_name, _etrecord_bytes(etrecord, out))
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
        raise ConversionError(f"{label}: the written program {path.name} does not run in ExecuTorch's host runtime",
                              cause=_runtime_said(e),
                              remedy="to see why, run with --debug (the traceback is in the run's log) and report it; "
                                     "the program is not kept") from e
    if float(y.max() - y.min()) == 0.0:
        raise ConversionError(f"{label}: {path.name} gives a constant output on reference input #0",
                              cause="the program (or its quantization) has collapsed",
                              remedy="check the weights (--weights) and the calibration images (--calibration)")
    return {"ran": True, "max_abs_diff": float((y - expected).abs().max()), "against": "reference output on input #0"}


def _runtime_said(e: Exception) -> str:
    """An error's first line, with what the runtime itself said when the error carries it (a RecordError's cause:
    ExecuTorch's own message when a program's method does not load)."""
    said = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    cause = getattr(e, "cause", None)
    return f"{said}: {cause}" if cause else said


HELD_OUT_SEED_OFFSET = 1_000_003  # the reference inputs' seed: calibration seed + this (never a calibration input)


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


def _as_recorded(tensors: List[Any]):
    """Outputs as the reference records them: one tensor, or a tuple for several (converter.executorch_check.per_output)."""
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


def _write_reference(out: Path, stem: str, inputs, expected, rules, example) -> Dict[str, Any]:
    """Inputs and expected outputs (fp32: eager model; int8: the PT2E reference) for the host check, each int8
    output's rule (:func:`output_rule`; ``int8_output``: the first's, as deploy reads it), and the lowering's
    example input (the ETRecord's representative input: what the per-operator comparison runs)."""
    buf = io.BytesIO()
    torch.save({"inputs": inputs, "expected": expected, "int8_output": rules[0] if rules else None,
                "int8_outputs": rules, "held_out": True, "example": example}, buf)
    name = f"{stem}-executorch-reference.pt"
    path = atomic_write_bytes(out / name, buf.getvalue())
    return {"file": name, "sha256": sha256_file(path), "inputs": len(inputs),
            "what": "held-out synthetic inputs (calibration seed + 1000003, not calibrated on); fp32 expected = eager "
                    "model, int8 expected = PT2E converted graph"}
