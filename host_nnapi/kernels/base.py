"""Reference kernels for every operation torch's NNAPI serializer emits.

:class:`Plan` turns a :class:`~host_nnapi.graph.Graph` into a list of closures
(one per operation, constants pre-transformed once) and runs them on torch
tensors holding the operands in NNAPI's layout and element type: float32,
int32, uint8 (TENSOR_QUANT8_ASYMM) and int16 (TENSOR_QUANT16_*).  Image
operations honour the NCHW/NHWC flag (an NHWC operand viewed as NCHW is a
channels_last tensor, so no copy is made), explicit padding in (left, right,
top, bottom) order, strides in (w, h) order and fused activations.

Quantized arithmetic is integer-exact: accumulators are computed in float64
(exact for the 8-bit products and sums involved) and then requantized with one
of two roundings:

* ``nnapi``   -- NNAPI's reference integer arithmetic (Q31 fixed-point
  multipliers, rounding right shifts), what a conformant device computes;
* ``qnnpack`` -- QNNPACK's arithmetic as PyTorch's CPU quantized operators use
  it (float32 requantization scale with round-half-to-even, QNNPACK's
  fixed-point ADD and average pooling), to match the CPU model.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Sequence, Tuple

from .. import nnapi_defs as nn
from ..graph import Graph, Operand, Operation
from .shared import memoized, operation_key

ROUNDING_MODES = ("nnapi", "qnnpack")
DEFAULT_ROUNDING = "nnapi"


class BadModel(ValueError):
    """The model violates an NNAPI rule (the runtime reports ANEURALNETWORKS_BAD_DATA)."""


Step = Callable[[list], None]

# --------------------------------------------------------------------------- helpers


def _f32(x: float) -> float:
    import numpy as np

    return float(np.float32(x))


def quantize_multiplier(real: float) -> Tuple[int, int]:
    """NNAPI/TFLite ``QuantizeMultiplier``: real = q / 2^31 * 2^shift, q in [2^30, 2^31)."""
    if real <= 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = int(math.floor(q * (1 << 31) + 0.5))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def multiply_by_quantized_multiplier(x, q: int, shift: int):
    """``MultiplyByQuantizedMultiplier`` on an int64 tensor (values in int32 range)."""
    import torch

    left = max(shift, 0)
    right = max(-shift, 0)
    x = x.to(torch.int64)
    if left:
        x = (x * (1 << left)).clamp(-(1 << 31), (1 << 31) - 1)
    ab = x * q
    nudge = torch.where(ab >= 0, torch.full_like(ab, 1 << 30), torch.full_like(ab, 1 - (1 << 30)))
    high = torch.div(ab + nudge, 1 << 31, rounding_mode="trunc")
    if right == 0:
        return high
    mask = (1 << right) - 1
    remainder = torch.bitwise_and(high, mask)
    threshold = (mask >> 1) + (high < 0).to(torch.int64)
    return torch.bitwise_right_shift(high, right) + (remainder > threshold).to(torch.int64)


def _round_half_away(x):
    import torch

    return torch.sign(x) * torch.floor(torch.abs(x) + 0.5)


def _qrange(o: Operand) -> Tuple[int, int]:
    if o.type == nn.TENSOR_QUANT8_ASYMM:
        return 0, 255
    if o.type == nn.TENSOR_QUANT16_SYMM:
        return -32768, 32767
    return 0, 65535


def _act_range_q(fuse: int, o: Operand) -> Tuple[int, int]:
    lo, hi = _qrange(o)
    zp, s = o.zero_point, o.scale

    def q(v: float) -> int:
        return zp + int(round(v / s))

    if fuse == nn.FUSED_RELU:
        return max(lo, zp), hi
    if fuse == nn.FUSED_RELU1:
        return max(lo, q(-1.0)), min(hi, q(1.0))
    if fuse == nn.FUSED_RELU6:
        return max(lo, zp), min(hi, q(6.0))
    return lo, hi


def _act_float(x, fuse: int):
    if fuse == nn.FUSED_RELU:
        return x.clamp_min(0.0)
    if fuse == nn.FUSED_RELU1:
        return x.clamp(-1.0, 1.0)
    if fuse == nn.FUSED_RELU6:
        return x.clamp(0.0, 6.0)
    if fuse != nn.FUSED_NONE:
        raise BadModel(f"unknown fused activation {fuse}")
    return x


def dequantize(x, o: Operand):
    """Raw quantized values -> float32 real values."""
    import torch

    return (x.to(torch.float32) - o.zero_point) * _f32(o.scale)


def quantize(v, o: Operand, rounding: str):
    """float real values -> raw values of operand ``o`` (NNAPI: half away from zero; torch: half to even)."""
    import torch

    if rounding == "qnnpack":
        r = torch.round(v.to(torch.float32) * _f32(1.0 / _f32(o.scale)))
    else:
        r = _round_half_away(v.to(torch.float64) / o.scale)
    lo, hi = _qrange(o)
    return (r + o.zero_point).clamp(lo, hi).to(_torch_dtype(o.type))


def _torch_dtype(t: int):
    import torch

    return {
        nn.TENSOR_FLOAT32: torch.float32, nn.TENSOR_INT32: torch.int32, nn.TENSOR_QUANT8_ASYMM: torch.uint8,
        nn.TENSOR_QUANT16_SYMM: torch.int16, nn.TENSOR_QUANT16_ASYMM: torch.int16, nn.TENSOR_BOOL8: torch.bool,
    }[t]


def torch_dtype(t: int):
    try:
        return _torch_dtype(t)
    except KeyError:
        raise BadModel(f"operand type {nn.type_name(t)} is not supported by the host NNAPI") from None


def constant_tensor(o: Operand):
    """A constant operand's value as a torch tensor of its NNAPI shape and type (a private copy)."""
    import torch

    if o.value is None:
        raise BadModel(f"operand {o.describe()} has no value")
    dtype = torch_dtype(o.type)
    if not o.value:
        return torch.empty(tuple(o.dims), dtype=dtype)
    return torch.frombuffer(bytearray(o.value), dtype=dtype).reshape(tuple(o.dims))


# --------------------------------------------------------------------------- plan


class Plan:
    """A model ready to run: ``run(inputs) -> outputs`` on raw NNAPI-layout tensors."""

    def __init__(self, graph: Graph, rounding: str = DEFAULT_ROUNDING, lenient: bool = False):
        """``lenient``: record an operation NNAPI would reject in ``rejected`` (index -> reason) instead of raising,
        so each of the other operations can still be run on its own (verify's layer-by-layer comparison)."""
        if rounding not in ROUNDING_MODES:
            raise ValueError(f"rounding must be one of {ROUNDING_MODES}, not {rounding!r}")
        self.graph = graph
        self.rounding = rounding
        self.rejected: Dict[int, str] = {}
        self._keys: Dict[int, bytes] = {}  # per operation, what host_nnapi.kernels.shared keys its results by
        self.env_template: list = [None] * len(graph.operands)
        for o in graph.operands:
            if o.lifetime == "constant" and not o.is_scalar:
                try:
                    self.env_template[o.index] = constant_tensor(o)
                except (BadModel, ValueError, RuntimeError) as e:
                    if not lenient:
                        raise BadModel(f"constant {o.describe()}: {e}") from None
        self.steps: List[Tuple[Operation, Step]] = []
        produced = {i for i in graph.inputs} | {o.index for o in graph.operands if o.lifetime == "constant"}
        for op in graph.operations:
            try:
                step = self._build(op, produced)
            except BadModel as e:
                if not lenient:
                    raise
                self.rejected[op.index] = str(e)
                step = None
            self.steps.append((op, step))
            produced.update(op.outputs)

    def _build(self, op: Operation, produced: set) -> Step:
        graph = self.graph
        builder = _BUILDERS.get(op.type)
        if builder is None:
            raise BadModel(f"operation {op.index} {op.name} is not supported by the host NNAPI")
        for i in op.inputs:
            if i not in produced and graph.operands[i].lifetime != "no_value":
                raise BadModel(f"operation {op.index} {op.name} reads operand #{i} before it is computed "
                               "(NNAPI models list operations in execution order here)")
        try:
            step = builder(_Ctx(self, op))
        except (BadModel, ValueError, KeyError, IndexError) as e:
            raise BadModel(f"operation {op.index} {op.name}: {e}") from None
        reads = tuple(i for i in op.inputs if graph.operands[i].lifetime not in ("constant", "no_value"))
        return memoized(step, lambda: self._key(op), reads, tuple(op.outputs))

    def _key(self, op: Operation) -> bytes:
        key = self._keys.get(op.index)
        if key is None:
            key = self._keys[op.index] = operation_key(self.graph, op, self.rounding)
        return key

    def run(self, inputs: Sequence, keep: bool = False):
        """Run the model; ``keep=True`` also returns every operand's value (for layer-by-layer comparison)."""
        g = self.graph
        if len(inputs) != len(g.inputs):
            raise BadModel(f"the model has {len(g.inputs)} inputs, {len(inputs)} given")
        env = list(self.env_template)
        for idx, t in zip(g.inputs, inputs):
            o = g.operands[idx]
            if t.dtype != torch_dtype(o.type):
                raise BadModel(f"input {o.describe()} given as {t.dtype}")
            if o.dims and 0 not in o.dims and tuple(t.shape) != tuple(o.dims):
                raise BadModel(f"input {o.describe()} given with shape {tuple(t.shape)}")
            env[idx] = t
        for op, step in self.steps:
            if step is None:
                raise BadModel(f"operation {op.index} {op.name}: {self.rejected[op.index]}")
            step(env)
        outs = [env[i] for i in g.outputs]
        return (outs, env) if keep else outs


class _Ctx:
    """What a builder sees: the operation, its operands and the plan's rounding."""

    def __init__(self, plan: Plan, op: Operation):
        self.plan = plan
        self.op = op
        self.g = plan.graph
        self.rounding = plan.rounding

    def operand(self, k: int) -> Operand:
        return self.g.operands[self.op.inputs[k]]

    @property
    def n_in(self) -> int:
        return len(self.op.inputs)

    @property
    def out(self) -> Operand:
        return self.g.operands[self.op.outputs[0]]

    def scalar(self, k: int, types=(nn.INT32,)):
        o = self.operand(k)
        if o.type not in types:
            raise BadModel(f"input {k} must be {'/'.join(nn.type_name(t) for t in types)}, got {o.describe()}")
        if o.lifetime != "constant":
            raise BadModel(f"input {k} ({o.describe()}) must be a constant for the host NNAPI")
        return o.scalar()

    def ints(self, k: int) -> List[int]:
        o = self.operand(k)
        if o.type != nn.TENSOR_INT32 or o.lifetime != "constant":
            raise BadModel(f"input {k} must be a constant TENSOR_INT32, got {o.describe()}")
        return o.ints()

    def const(self, k: int):
        o = self.operand(k)
        if o.lifetime != "constant":
            raise BadModel(f"input {k} ({o.describe()}) must be a constant for the host NNAPI")
        return self.plan.env_template[o.index]

    def expect_type(self, k: int, types: Sequence[int]) -> Operand:
        o = self.operand(k)
        if o.type not in types:
            raise BadModel(f"input {k} is {o.describe()}; expected {'/'.join(nn.type_name(t) for t in types)}")
        return o

    def io(self) -> Tuple[int, int]:
        return self.op.inputs[0], self.op.outputs[0]


_BUILDERS: Dict[int, Callable[[_Ctx], Step]] = {}


def _builder(*codes: int):
    def deco(fn):
        for c in codes:
            _BUILDERS[c] = fn
        return fn

    return deco


_DATA = (nn.TENSOR_FLOAT32, nn.TENSOR_QUANT8_ASYMM)
_ANY = (nn.TENSOR_FLOAT32, nn.TENSOR_QUANT8_ASYMM, nn.TENSOR_INT32, nn.TENSOR_QUANT16_ASYMM, nn.TENSOR_QUANT16_SYMM)


def _same_q(a: Operand, b: Operand) -> bool:
    return a.type == b.type and (not a.is_quant or (a.scale == b.scale and a.zero_point == b.zero_point))
