"""Static checks on a decoded NNAPI model: what a device would reject or compute differently from PyTorch."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, List

from . import nnapi_defs as nn
from .graph import Graph, f32
from .nnapi_defs import Op

# A quantization scale outside this range is almost certainly an artefact of calibration
# (a constant activation gives scale ~1e-7; an exploding one gives huge scales).
MIN_SANE_SCALE = 1e-6
MAX_SANE_SCALE = 1e4
_LAYOUT_OPS = (Op.AVERAGE_POOL_2D, Op.CONV_2D, Op.DEPTHWISE_CONV_2D, Op.MAX_POOL_2D)


@dataclass(frozen=True)
class Finding:
    check: str  # "op-list" | "feature-level" | "avg-pool-padding" | "degenerate-scale" | "fixed-input-quantization" | ...
    severity: str  # "info" | "warning" | "error"
    message: str
    operation: int = -1  # index of the operation concerned, -1 for the model
    operand: int = -1

    def to_dict(self) -> Dict:
        return asdict(self)


def static_checks(graph: Graph, api_level: int = 29) -> List[Finding]:
    out: List[Finding] = []
    ops = graph.operation_summary()
    out.append(Finding("op-list", "info", "operations: " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items()))))
    out.append(Finding("operand-types", "info",
                       "operand types: " + ", ".join(f"{k} x{v}" for k, v in sorted(graph.operand_type_summary().items()))))
    for op in graph.operations:
        level = nn.operation_api_level(op.type)
        if level > api_level:
            out.append(Finding("feature-level", "error",
                               f"operation {op.index} {op.name} needs API level {level} (NNAPI feature level "
                               f"{level - 26}); the target is API level {api_level}", op.index))
        if op.type in _LAYOUT_OPS and len(op.inputs) in (8, 11, 12, 14) and api_level < 29:
            out.append(Finding("feature-level", "error",
                               f"operation {op.index} {op.name} passes a data-layout (NCHW/NHWC) argument, "
                               f"which needs API level 29; the target is {api_level}", op.index))
    for o in graph.operands:
        level = nn.OPERAND_API_LEVEL.get(o.type, 30)
        if level > api_level:
            out.append(Finding("feature-level", "error",
                               f"operand {o.describe()} has a type that needs API level {level}; the target is {api_level}",
                               operand=o.index))
    out.extend(_avg_pool_padding(graph))
    out.extend(_degenerate_scales(graph))
    for idx in graph.inputs:
        o = graph.operands[idx]
        if o.is_quant:
            out.append(Finding("fixed-input-quantization", "warning",
                               f"input {o.describe()}: its scale {o.scale:.6g} and zero point {o.zero_point} were fixed "
                               "at conversion time; inputs must be quantized with exactly these (NNAPI rejects others)",
                               operand=idx))
    for note in graph.notes:
        out.append(Finding("decode", "warning", note))
    return out


def _avg_pool_padding(graph: Graph) -> List[Finding]:
    out = []
    for op in graph.operations:
        if op.type != Op.AVERAGE_POOL_2D or len(op.inputs) < 10:
            continue
        pads = []
        for k in range(1, 5):
            o = graph.operands[op.inputs[k]]
            pads.append(o.scalar() if o.value is not None else 0)
        if any(pads):
            out.append(Finding(
                "avg-pool-padding", "error",
                f"operation {op.index} AVERAGE_POOL_2D has padding (left, right, top, bottom) = {tuple(pads)}: NNAPI "
                "averages over the valid elements only, PyTorch's avg_pool2d (count_include_pad=True) divides by the "
                "full window, so border outputs differ; pad explicitly or avoid padding in average pooling",
                op.index))
    return out


def _degenerate_scales(graph: Graph) -> List[Finding]:
    out = []
    for o in graph.operands:
        if not o.is_quant:
            continue
        if not (MIN_SANE_SCALE <= o.scale <= MAX_SANE_SCALE):
            out.append(_scale_finding(graph, o))
        lo, hi = (0, 255) if o.type == nn.TENSOR_QUANT8_ASYMM else (-32768, 65535)
        if not lo <= o.zero_point <= hi:
            out.append(Finding("degenerate-scale", "error", f"operand {o.describe()} has zero point outside [{lo}, {hi}]",
                               operand=o.index))
    return out


def _scale_finding(graph: Graph, o) -> Finding:
    """Activations: a calibration problem (error).  Weights: a property of the trained weights (a warning): NNAPI
    computes them exactly like the CPU does, so the end-to-end comparison decides, not this check."""
    if o.lifetime == "constant":
        user = next((op for op in graph.operations if o.index in op.inputs), None)
        where = f" (weights of operation {user.index} {user.name})" if user else ""
        return Finding("weight-scale", "warning",
                       f"constant {o.describe()}{where} has an unusual quantization scale {o.scale:.3g}: the weights are "
                       "(almost) constant or huge; this is not a calibration problem, and the model is judged by its "
                       "outputs", user.index if user else -1, o.index)
    producer = next((op for op in graph.operations if o.index in op.outputs), None)
    where = f" (output of operation {producer.index} {producer.name})" if producer else ""
    return Finding("degenerate-scale", "error",
                   f"activation {o.describe()}{where} has a degenerate quantization scale {o.scale:.3g}: calibration saw "
                   "(almost) constant values there; recalibrate with representative inputs (--calibration DIR)",
                   producer.index if producer else -1, o.index)


def wrapper_checks(scripted, graph: Graph) -> List[Finding]:
    """quant_core: the Quantize module in front of the NNAPI model must quantize exactly as its input operand says."""
    out = _relaxed(scripted)
    first = graph.inputs[0] if graph.inputs else None
    if first is None or not graph.operands[first].is_quant:
        return out
    o = graph.operands[first]
    for name, mod in scripted.named_modules():
        if getattr(mod, "original_name", "") != "Quantize" or not hasattr(mod, "scale"):
            continue
        scale, zp = float(mod.scale), int(mod.zero_point)
        if f32(scale) != f32(o.scale) or zp != o.zero_point:
            out.append(Finding("input-quantization", "error",
                               f"the Quantize step {name!r} before the NNAPI model quantizes with scale {scale:.9g} / zero "
                               f"point {zp}, but the model's input {o.describe()} expects {o.scale:.9g} / {o.zero_point}",
                               0, first))
    return out


def _relaxed(scripted) -> List[Finding]:
    from .graph import find_nnapi_module

    mod = find_nnapi_module(scripted)
    if mod is not None and bool(getattr(mod, "relax_f32_to_f16", False)):
        return [Finding("relaxed-float", "error", "the NNAPI module asks for relax_f32_to_f16: a device may compute "
                        "float32 operations in float16, which `invoke convert` never asks for", 0)]
    return []


def errors(findings: List[Finding]) -> List[Finding]:
    return [f for f in findings if f.severity == "error"]
