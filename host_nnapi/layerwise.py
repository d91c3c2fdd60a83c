"""Run every operation of the shipped NNAPI model on the CPU model's own input values; compare its output.

An operation that differs from the CPU model is checked once more against a float reference of the same
operation (dequantized CPU inputs, computed in float, quantized with the CPU model's output parameters): when
the CPU output is far from it and the NNAPI output is not, the CPU kernel is the one that is wrong (e.g.
PyTorch's quantized hardtanh on a channels_last input returns wrongly ordered data), and that is reported
as such instead of failing the NNAPI model.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

from . import nnapi_defs as nn
from . import rules
from .align import Alignment
from .graph import Graph, Operand, Operation
from .kernels import BadModel, Plan, dequantize
from .nnapi_defs import Op
from .reference import Reference

log = logging.getLogger(__name__)


@dataclass
class LayerResult:
    operation: int
    name: str
    output: str
    max_abs: float
    max_lsb: Optional[int]
    ok: bool
    bound: Optional[int] = None
    cpu_vs_float_lsb: Optional[float] = None  # only computed when the operation differs from the CPU model
    nnapi_vs_float_lsb: Optional[float] = None
    cpu_kernel_suspect: bool = False
    note: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return f"operation {self.operation} {self.name} (output {self.output})"


@dataclass(frozen=True)
class FloatTolerance:
    atol: float
    rtol: float


def compare_operations(shipped: Graph, al: Alignment, ref: Reference, rounding: str, tol: FloatTolerance,
                       nnapi_bound: int = rules.OP_LSB_BOUND["nnapi"]) -> List[LayerResult]:
    plan = Plan(shipped, rounding, lenient=True)
    results = []
    for op, step in plan.steps:
        inputs = _cpu_inputs(shipped, op, al, ref)
        ref_out = ref.values.get(al.operands.get(op.outputs[0], -1))
        if inputs is None or ref_out is None:
            continue
        results.append(_compare_one(plan, op, step, inputs, ref_out, al, ref, tol, nnapi_bound))
    return results


def _cpu_inputs(g: Graph, op: Operation, al: Alignment, ref: Reference) -> Optional[Dict[int, Any]]:
    out = {}
    for i in op.inputs:
        if g.operands[i].lifetime in ("constant", "no_value"):
            continue
        v = ref.values.get(al.operands.get(i, -1))
        if v is None:
            return None
        out[i] = v
    return out


def _compare_one(plan: Plan, op: Operation, step, inputs, ref_out, al: Alignment, ref: Reference,
                 tol: FloatTolerance, nnapi_bound: int) -> LayerResult:
    g = plan.graph
    o = g.operands[op.outputs[0]]
    res = LayerResult(op.index, op.name, o.describe(), math.inf, None, False)
    if step is None:
        res.note = f"NNAPI rejects it: {plan.rejected.get(op.index, '')}"
        return res
    env = list(plan.env_template)
    for i, v in inputs.items():
        env[i] = v
    try:
        step(env)
    except (BadModel, RuntimeError, ValueError, IndexError) as e:
        res.note = f"fails on the CPU model's values: {e}"
        return res
    got = env[op.outputs[0]]
    if tuple(got.shape) != tuple(ref_out.shape):
        res.note = f"output shape {list(got.shape)}; the CPU model's is {list(ref_out.shape)}"
        return res
    bound = rules.op_bound(op.type, plan.rounding, nnapi_bound)
    return _judge(res, op, o, got, ref_out, bound, tol, al, ref)


def _judge(res: LayerResult, op: Operation, o: Operand, got, ref_out, bound: int, tol: FloatTolerance,
           al: Alignment, ref: Reference) -> LayerResult:
    import torch

    if got.dtype == ref_out.dtype and torch.equal(got, ref_out):
        max_abs = 0.0  # the same values: no difference to measure (most operations under qnnpack rounding)
    else:
        diff = (got.to(torch.float64) - ref_out.to(torch.float64)).abs()
        max_abs = float(diff.max()) if diff.numel() else 0.0
    if not o.is_quant:
        mag = _magnitude(ref_out) if ref_out.numel() and ref_out.dtype.is_floating_point else 0.0
        res.max_abs, res.ok = max_abs, max_abs <= tol.atol + tol.rtol * max(mag, 1.0)
        return res
    res.max_lsb, res.max_abs, res.bound = int(max_abs), max_abs * o.scale, bound
    res.ok = res.max_lsb <= res.bound
    if not res.ok:
        _float_reference(res, op, got, ref_out, al, ref)
    return res


def _magnitude(t) -> float:
    """``max |t|`` in one pass, without a tensor of absolute values (NaN stays NaN)."""
    import torch

    lo, hi = torch.aminmax(t)
    return float(torch.maximum(hi, -lo))


def _float_reference(res: LayerResult, op: Operation, got, cpu_out, al: Alignment, ref: Reference) -> None:
    """Judge the CPU model's and the NNAPI output against the operation computed in float."""
    import torch

    rop = ref.graph.operations[al.offset + op.index]
    try:
        want = float_reference(ref.graph, rop, ref.values)
    except (BadModel, RuntimeError, ValueError, KeyError) as e:
        log.debug("no float reference for operation %d: %s", op.index, e)
        return
    if want is None:
        return
    res.cpu_vs_float_lsb = float((cpu_out.to(torch.float64) - want).abs().max())
    res.nnapi_vs_float_lsb = float((got.to(torch.float64) - want).abs().max())
    if res.cpu_vs_float_lsb > rules.FLOAT_REFERENCE_LSB >= res.nnapi_vs_float_lsb:
        res.cpu_kernel_suspect, res.ok = True, True
        res.note = (f"the CPU model's output is {res.cpu_vs_float_lsb:.0f} LSB from this operation computed in float, "
                    f"the NNAPI output {res.nnapi_vs_float_lsb:.0f} LSB: a PyTorch CPU kernel bug, not a conversion bug")


def float_reference(g: Graph, op: Operation, values: Dict[int, Any]):
    """``op`` of a quantized graph computed in float on ``values``; raw values in its output's quantization."""
    import torch

    if op.type in (Op.QUANTIZE, Op.DEQUANTIZE):
        return None
    ids = list(dict.fromkeys(list(op.inputs) + list(op.outputs)))
    local = {orig: k for k, orig in enumerate(ids)}
    operands = [_float_operand(g.operands[orig], k) for k, orig in enumerate(ids)]
    twin_inputs = [local[i] for i in op.inputs if g.operands[i].lifetime not in ("constant", "no_value")]
    for k in twin_inputs:
        operands[k].lifetime = "input"
    twin = Graph(operands, [Operation(0, op.type, tuple(local[i] for i in op.inputs), tuple(local[i] for i in op.outputs))],
                 twin_inputs, [local[op.outputs[0]]])
    args = [_dequantized(g.operands[ids[k]], values[ids[k]]) for k in twin_inputs]
    (y,) = Plan(twin, "nnapi").run(args)
    out = g.operands[op.outputs[0]]
    q = torch.round(y.to(torch.float64) / out.scale) + out.zero_point
    return q.clamp(0, 255) if out.type == nn.TENSOR_QUANT8_ASYMM else q


def _dequantized(o: Operand, v):
    return dequantize(v, o) if o.is_quant else v


def _float_operand(o: Operand, k: int) -> Operand:
    import torch

    from .kernels import constant_tensor

    quant_bias = o.type == nn.TENSOR_INT32 and o.scale and not o.is_scalar
    if not (o.is_quant or quant_bias):
        return Operand(k, o.type, o.dims, o.scale, o.zero_point, o.lifetime, o.value)
    value = None
    if o.lifetime == "constant":
        t = constant_tensor(o)
        real = dequantize(t, o) if o.is_quant else t.to(torch.float64) * o.scale
        value = real.to(torch.float32).contiguous().numpy().tobytes()
    return Operand(k, nn.TENSOR_FLOAT32, o.dims, 0.0, 0, "temporary" if o.lifetime != "constant" else "constant", value)
