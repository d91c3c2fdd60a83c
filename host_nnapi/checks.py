"""Static checks on a decoded NNAPI model: what a device would reject or compute differently from PyTorch."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, List

from . import nnapi_defs as nn
from .graph import Graph

# A quantization scale outside this range is almost certainly an artefact of calibration
# (a constant activation gives scale ~1e-7; an exploding one gives huge scales).
MIN_SANE_SCALE = 1e-6
MAX_SANE_SCALE = 1e4


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
        if op.type in (1, 3, 4, 17) and len(op.inputs) in (8, 11, 12, 14) and api_level < 29:
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
        if op.type != 1 or len(op.inputs) < 10:
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
            producer = next((op for op in graph.operations if o.index in op.outputs), None)
            where = f" (output of operation {producer.index} {producer.name})" if producer else ""
            out.append(Finding(
                "degenerate-scale", "error",
                f"operand {o.describe()}{where} has a degenerate quantization scale {o.scale:.3g}: calibration saw "
                "(almost) constant values there; recalibrate with representative inputs",
                producer.index if producer else -1, o.index))
        lo, hi = (0, 255) if o.type == nn.TENSOR_QUANT8_ASYMM else (-32768, 65535)
        if not lo <= o.zero_point <= hi:
            out.append(Finding("degenerate-scale", "error", f"operand {o.describe()} has zero point outside [{lo}, {hi}]",
                               operand=o.index))
    return out


def errors(findings: List[Finding]) -> List[Finding]:
    return [f for f in findings if f.severity == "error"]
