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

from . import nnapi_defs as nn
from .graph import Graph, Operand, Operation

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

    def __init__(self, graph: Graph, rounding: str = DEFAULT_ROUNDING):
        if rounding not in ROUNDING_MODES:
            raise ValueError(f"rounding must be one of {ROUNDING_MODES}, not {rounding!r}")
        self.graph = graph
        self.rounding = rounding
        self.env_template: list = [None] * len(graph.operands)
        for o in graph.operands:
            if o.lifetime == "constant" and not o.is_scalar:
                self.env_template[o.index] = constant_tensor(o)
        self.steps: List[Tuple[Operation, Step]] = []
        produced = {i for i in graph.inputs} | {o.index for o in graph.operands if o.lifetime == "constant"}
        for op in graph.operations:
            builder = _BUILDERS.get(op.type)
            if builder is None:
                raise BadModel(f"operation {op.index} {op.name} is not supported by the host NNAPI")
            for i in op.inputs:
                if i not in produced and graph.operands[i].lifetime != "no_value":
                    raise BadModel(f"operation {op.index} {op.name} reads operand #{i} before it is computed "
                                   "(NNAPI models list operations in execution order here)")
            try:
                step = builder(_Ctx(self, op))
            except BadModel as e:
                raise BadModel(f"operation {op.index} {op.name}: {e}") from None
            self.steps.append((op, step))
            produced.update(op.outputs)

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


# --------------------------------------------------------------------------- convolution family


def _padding(ctx: _Ctx, first: int) -> Tuple[int, int, int, int]:
    return tuple(ctx.scalar(first + i) for i in range(4))  # left, right, top, bottom


def _to_nchw(x, nchw: bool):
    return x if nchw else x.permute(0, 3, 1, 2)


def _from_nchw(y, nchw: bool):
    return y if nchw else y.permute(0, 2, 3, 1)


def _pad(x, pads, value=0.0):
    import torch.nn.functional as F

    l, r, t, b = pads
    if l or r or t or b:
        return F.pad(x, (l, r, t, b), value=value)
    return x


def _conv_args(ctx: _Ctx, kind: str):
    """Parse CONV_2D / DEPTHWISE_CONV_2D / TRANSPOSE_CONV_2D explicit-padding forms."""
    n = ctx.n_in
    explicit = {"conv": (10, 11, 13), "depthwise": (11, 12, 14), "transpose": (11,)}[kind]
    if n not in explicit:
        raise BadModel(f"only the explicit-padding forms ({'/'.join(map(str, explicit))} inputs) are supported, got {n}")
    pads = _padding(ctx, 3)
    sw, sh = ctx.scalar(7), ctx.scalar(8)
    k = 9
    mult = None
    if kind == "depthwise":
        mult = ctx.scalar(9)
        k = 10
    fuse = ctx.scalar(k)
    nchw = ctx.scalar(k + 1, (nn.BOOL,)) if n > k + 1 else False
    dil = (ctx.scalar(k + 2), ctx.scalar(k + 3)) if n > k + 3 else (1, 1)  # (w, h)
    if min(pads) < 0 or sw < 1 or sh < 1 or min(dil) < 1:
        raise BadModel(f"bad padding {pads} / strides ({sw}, {sh}) / dilation {dil}")
    return pads, (sw, sh), mult, fuse, nchw, dil


def _check_conv_types(ctx: _Ctx, w: Operand, b: Operand, x: Operand):
    out = ctx.out
    if x.type == nn.TENSOR_FLOAT32:
        if w.type != nn.TENSOR_FLOAT32 or b.type != nn.TENSOR_FLOAT32 or out.type != nn.TENSOR_FLOAT32:
            raise BadModel(f"float input needs float filter, bias and output: {w.describe()}, {b.describe()}, {out.describe()}")
    elif x.type == nn.TENSOR_QUANT8_ASYMM:
        if w.type != nn.TENSOR_QUANT8_ASYMM or b.type != nn.TENSOR_INT32 or out.type != nn.TENSOR_QUANT8_ASYMM:
            raise BadModel(f"quant8 input needs quant8 filter, int32 bias and quant8 output: "
                           f"{w.describe()}, {b.describe()}, {out.describe()}")
        want = x.scale * w.scale
        if b.zero_point != 0 or abs(b.scale - want) > 1e-6 * want + 1e-12:
            raise BadModel(f"bias scale must be input scale x filter scale = {want:.9g} with zero point 0, got {b.describe()}")
    else:
        raise BadModel(f"input must be TENSOR_FLOAT32 or TENSOR_QUANT8_ASYMM, got {x.describe()}")
    if len(w.dims) != 4 or len(b.dims) != 1 or len(x.dims) != 4:
        raise BadModel(f"input and filter must be 4-D and bias 1-D: {x.describe()}, {w.describe()}, {b.describe()}")


def _exact_acc_dtype(weight, w: Operand, bias, x: Operand, reduce_dims):
    """float32 when every partial sum of the integer accumulation stays below 2^24 (then float32 is exact), else float64."""
    import torch

    dev = (weight.to(torch.int64) - w.zero_point).abs().sum(dim=reduce_dims)
    bound = int(dev.max()) * max(x.zero_point, 255 - x.zero_point) + int(bias.to(torch.int64).abs().max())
    return torch.float32 if bound < (1 << 24) else torch.float64


def _requant(acc, x: Operand, w: Operand, out: Operand, lo: int, hi: int, rounding: str):
    """int32 accumulator (as float64/int64 tensor) -> raw quant8 output."""
    import torch

    if rounding == "qnnpack":
        s = _f32(_f32(_f32(w.scale) * _f32(x.scale)) * _f32(1.0 / _f32(out.scale)))
        y = torch.round(acc.to(torch.float32) * s) + out.zero_point
    else:
        q, shift = quantize_multiplier(float(x.scale) * float(w.scale) / float(out.scale))
        y = multiply_by_quantized_multiplier(acc.to(torch.int64), q, shift) + out.zero_point
    return y.clamp(lo, hi).to(torch.uint8)


@_builder(3, 4, 91)  # CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV_2D
def _conv(ctx: _Ctx) -> Step:
    import torch
    import torch.nn.functional as F

    kind = {3: "conv", 4: "depthwise", 91: "transpose"}[ctx.op.type]
    x, w, b = ctx.operand(0), ctx.operand(1), ctx.operand(2)
    _check_conv_types(ctx, w, b, x)
    pads, (sw, sh), mult, fuse, nchw, (dw, dh) = _conv_args(ctx, kind)
    wt, bt = ctx.const(1), ctx.const(2)
    in_c = x.dims[1] if nchw else x.dims[3]
    if kind == "depthwise":
        if w.dims[0] != 1 or w.dims[3] != in_c * mult:
            raise BadModel(f"depthwise filter must be [1, kh, kw, C x multiplier = {in_c * mult}], got {w.describe()}")
        weight = wt.permute(3, 0, 1, 2)  # [C*m, 1, kh, kw]
        groups = in_c
    elif kind == "transpose":
        if w.dims[3] != in_c:
            raise BadModel(f"filter depth {w.dims[3]} != input depth {in_c}")
        weight = wt.permute(3, 0, 1, 2)  # [in, out, kh, kw]
        groups = 1
    else:
        if w.dims[3] != in_c:
            raise BadModel(f"filter depth {w.dims[3]} != input depth {in_c}")
        weight = wt.permute(0, 3, 1, 2)  # [out, in, kh, kw]
        groups = 1
    if b.dims[0] != w.dims[0 if kind != "depthwise" else 3]:
        raise BadModel(f"bias has {b.dims[0]} elements for {w.describe()}")
    quant = x.type == nn.TENSOR_QUANT8_ASYMM
    fmt = torch.contiguous_format if nchw else torch.channels_last
    if quant:
        acc_dtype = _exact_acc_dtype(weight, w, bt, x, reduce_dims=(1, 2, 3) if kind != "transpose" else (0, 2, 3))
        weight = (weight.to(acc_dtype) - w.zero_point).contiguous(memory_format=fmt)
        bias = bt.to(acc_dtype)
        lo, hi = _act_range_q(fuse, ctx.out)
    else:
        weight = weight.contiguous(memory_format=fmt)
        bias = bt
    symmetric = pads[0] == pads[1] and pads[2] == pads[3]
    rounding = ctx.rounding
    out_q, i, o = ctx.out, *ctx.io()

    def conv(v):
        if kind == "transpose":
            y = F.conv_transpose2d(v, weight, bias, stride=(sh, sw), dilation=(dh, dw))
            l, r, t, bo = pads
            return y[:, :, t:y.shape[2] - bo, l:y.shape[3] - r]
        if symmetric:
            return F.conv2d(v, weight, bias, stride=(sh, sw), padding=(pads[2], pads[0]), dilation=(dh, dw), groups=groups)
        return F.conv2d(_pad(v, pads), weight, bias, stride=(sh, sw), dilation=(dh, dw), groups=groups)

    if quant:
        def step(env):
            v = _to_nchw(env[i], nchw).to(acc_dtype) - x.zero_point
            acc = conv(v)
            env[o] = _from_nchw(_requant(acc, x, w, out_q, lo, hi, rounding), nchw)
    else:
        def step(env):
            env[o] = _from_nchw(_act_float(conv(_to_nchw(env[i], nchw)), fuse), nchw)
    return step


@_builder(9)  # FULLY_CONNECTED
def _fully_connected(ctx: _Ctx) -> Step:
    import torch.nn.functional as F

    x, w, b = ctx.operand(0), ctx.operand(1), ctx.operand(2)
    fuse = ctx.scalar(3)
    out_q = ctx.out
    if x.type == nn.TENSOR_QUANT8_ASYMM:
        if w.type != nn.TENSOR_QUANT8_ASYMM or b.type != nn.TENSOR_INT32 or out_q.type != nn.TENSOR_QUANT8_ASYMM:
            raise BadModel(f"quant8 input needs quant8 weights, int32 bias, quant8 output: {w.describe()}, {b.describe()}")
        want = x.scale * w.scale
        if b.zero_point != 0 or abs(b.scale - want) > 1e-6 * want + 1e-12:
            raise BadModel(f"bias scale must be input scale x weight scale = {want:.9g}, got {b.describe()}")
    elif x.type != nn.TENSOR_FLOAT32 or w.type != nn.TENSOR_FLOAT32 or b.type != nn.TENSOR_FLOAT32:
        raise BadModel(f"types {x.describe()}, {w.describe()}, {b.describe()} are not a valid FULLY_CONNECTED")
    if len(w.dims) != 2 or len(b.dims) != 1 or b.dims[0] != w.dims[0]:
        raise BadModel(f"weights must be [units, input size] and bias [units]: {w.describe()}, {b.describe()}")
    in_size = w.dims[1]
    wt, bt = ctx.const(1), ctx.const(2)
    i, o = ctx.io()
    rounding = ctx.rounding
    if x.type == nn.TENSOR_QUANT8_ASYMM:
        acc_dtype = _exact_acc_dtype(wt, w, bt, x, reduce_dims=(1,))
        wd = wt.to(acc_dtype) - w.zero_point
        bd = bt.to(acc_dtype)
        lo, hi = _act_range_q(fuse, out_q)

        def step(env):
            v = env[i].reshape(-1, in_size).to(acc_dtype) - x.zero_point
            env[o] = _requant(F.linear(v, wd, bd), x, w, out_q, lo, hi, rounding)
    else:
        def step(env):
            env[o] = _act_float(F.linear(env[i].reshape(-1, in_size), wt, bt), fuse)
    return step


# --------------------------------------------------------------------------- pooling


def _pool_args(ctx: _Ctx):
    n = ctx.n_in
    if n not in (10, 11):
        raise BadModel(f"only the explicit-padding forms (10/11 inputs) are supported, got {n}")
    pads = _padding(ctx, 1)
    sw, sh, kw, kh = ctx.scalar(5), ctx.scalar(6), ctx.scalar(7), ctx.scalar(8)
    fuse = ctx.scalar(9)
    nchw = ctx.scalar(10, (nn.BOOL,)) if n > 10 else False
    if min(pads) < 0 or min(sw, sh, kw, kh) < 1:
        raise BadModel(f"bad padding {pads} / strides ({sw}, {sh}) / filter ({kw}, {kh})")
    return pads, (sw, sh), (kw, kh), fuse, nchw


@_builder(1)  # AVERAGE_POOL_2D
def _average_pool(ctx: _Ctx) -> Step:
    import torch
    import torch.nn.functional as F

    x = ctx.expect_type(0, _DATA)
    out_q = ctx.out
    pads, (sw, sh), (kw, kh), fuse, nchw = _pool_args(ctx)
    padded = any(pads)
    i, o = ctx.io()
    rounding = ctx.rounding

    def sums(v):  # float64 window sums and counts of valid (unpadded) elements
        s = F.avg_pool2d(_pad(v, pads), (kh, kw), (sh, sw), divisor_override=1)
        if padded:
            ones = torch.ones((1, 1) + tuple(v.shape[2:]), dtype=v.dtype)
            c = F.avg_pool2d(_pad(ones, pads), (kh, kw), (sh, sw), divisor_override=1)
        else:
            c = torch.full((1, 1, 1, 1), float(kh * kw), dtype=v.dtype)
        return s, c

    if x.type == nn.TENSOR_FLOAT32:
        def step(env):
            v = _to_nchw(env[i], nchw)
            if not padded:
                y = F.avg_pool2d(v, (kh, kw), (sh, sw))
            else:
                s, c = sums(v)
                y = s / c  # NNAPI averages over the valid elements only
            env[o] = _from_nchw(_act_float(y, fuse), nchw)
        return step
    if not _same_q(x, out_q):
        raise BadModel(f"quant8 AVERAGE_POOL_2D needs the same scale and zero point in and out: {x.describe()} -> {out_q.describe()}")
    lo, hi = _act_range_q(fuse, out_q)
    zp = x.zero_point

    def step(env):
        v = _to_nchw(env[i], nchw).to(torch.float64)
        s, c = sums(v)
        if rounding == "qnnpack":
            y = _qnnpack_avgpool(s, c, x.scale, out_q.scale, zp, out_q.zero_point)
        else:
            y = torch.div(s + torch.div(c, 2, rounding_mode="floor"), c, rounding_mode="floor")
        env[o] = _from_nchw(y.clamp(lo, hi).to(torch.uint8), nchw)
    return step


def _qnnpack_avgpool(sums, counts, in_scale: float, out_scale: float, in_zp: int, out_zp: int):
    """QNNPACK's average-pooling requantization: 24-bit multiplier, rounding shift."""
    import struct

    import torch

    out = torch.empty_like(sums)
    for c in torch.unique(counts).tolist():
        scale = _f32(_f32(in_scale) / _f32(_f32(out_scale) * _f32(c)))
        bits = struct.unpack("<I", struct.pack("<f", scale))[0]
        multiplier = (bits & 0x007FFFFF) | 0x00800000
        shift = 127 + 23 - (bits >> 23)
        acc = (sums.to(torch.int64) - int(in_zp) * int(c))
        product = acc * multiplier - (acc < 0).to(torch.int64)
        n = torch.bitwise_right_shift(product + (1 << (shift - 1)), shift) + out_zp
        mask = counts == c
        out = torch.where(mask, n.to(out.dtype), out)
    return out


@_builder(17)  # MAX_POOL_2D
def _max_pool(ctx: _Ctx) -> Step:
    import torch
    import torch.nn.functional as F

    x = ctx.expect_type(0, _DATA)
    out_q = ctx.out
    pads, (sw, sh), (kw, kh), fuse, nchw = _pool_args(ctx)
    i, o = ctx.io()
    if x.type == nn.TENSOR_FLOAT32:
        def step(env):
            v = _pad(_to_nchw(env[i], nchw), pads, float("-inf"))
            env[o] = _from_nchw(_act_float(F.max_pool2d(v, (kh, kw), (sh, sw)), fuse), nchw)
        return step
    if not _same_q(x, out_q):
        raise BadModel(f"quant8 MAX_POOL_2D needs the same scale and zero point in and out: {x.describe()} -> {out_q.describe()}")
    lo, hi = _act_range_q(fuse, out_q)

    def step(env):
        v = _pad(_to_nchw(env[i], nchw).to(torch.float32), pads, -1.0)
        env[o] = _from_nchw(F.max_pool2d(v, (kh, kw), (sh, sw)).clamp(lo, hi).to(torch.uint8), nchw)
    return step


# --------------------------------------------------------------------------- elementwise


def _binary_shapes(a: Operand, b: Operand) -> None:
    if a.dims and b.dims:
        ra, rb = list(a.dims), list(b.dims)
        for da, db in zip(reversed(ra), reversed(rb)):
            if da != db and 1 not in (da, db) and 0 not in (da, db):
                raise BadModel(f"shapes {a.describe()} and {b.describe()} do not broadcast")


@_builder(0, 36, 18, 30)  # ADD, SUB, MUL, DIV
def _binary(ctx: _Ctx) -> Step:
    import torch

    code = ctx.op.type
    a, b = ctx.operand(0), ctx.operand(1)
    out_q = ctx.out
    if a.type != b.type or a.type != out_q.type:
        raise BadModel(f"inputs and output must share a type: {a.describe()}, {b.describe()}, {out_q.describe()}")
    if a.type not in (nn.TENSOR_FLOAT32, nn.TENSOR_QUANT8_ASYMM, nn.TENSOR_INT32):
        raise BadModel(f"type {a.describe()} is not supported")
    if code == 30 and a.type == nn.TENSOR_QUANT8_ASYMM:
        raise BadModel("NNAPI DIV has no TENSOR_QUANT8_ASYMM form")
    _binary_shapes(a, b)
    fuse = ctx.scalar(2)
    ia, ib, o = ctx.op.inputs[0], ctx.op.inputs[1], ctx.op.outputs[0]
    fn = {0: torch.add, 36: torch.sub, 18: torch.mul, 30: torch.div}[code]
    if a.type != nn.TENSOR_QUANT8_ASYMM:
        def step(env):
            env[o] = _act_float(fn(env[ia], env[ib]), fuse)
        return step
    lo, hi = _act_range_q(fuse, out_q)
    if code in (0, 36):
        requant = _qnnpack_add(a, b, out_q, code == 36) if ctx.rounding == "qnnpack" and code == 0 else _nnapi_add(a, b, out_q, code == 36)
    else:
        requant = _mul_requant(a, b, out_q, ctx.rounding)

    def step(env):
        env[o] = requant(env[ia], env[ib]).clamp(lo, hi).to(torch.uint8)
    return step


def _nnapi_add(a: Operand, b: Operand, out: Operand, subtract: bool):
    """NNAPI reference quant8 ADD/SUB: inputs shifted left by 20 and rescaled in Q31."""
    left_shift = 20
    twice_max = 2.0 * max(a.scale, b.scale)
    qa, sa = quantize_multiplier(a.scale / twice_max)
    qb, sb = quantize_multiplier(b.scale / twice_max)
    qo, so = quantize_multiplier(twice_max / ((1 << left_shift) * out.scale))

    def f(x, y):
        import torch

        xa = multiply_by_quantized_multiplier((x.to(torch.int64) - a.zero_point) * (1 << left_shift), qa, sa)
        yb = multiply_by_quantized_multiplier((y.to(torch.int64) - b.zero_point) * (1 << left_shift), qb, sb)
        return multiply_by_quantized_multiplier(xa - yb if subtract else xa + yb, qo, so) + out.zero_point
    return f


def _qnnpack_add(a: Operand, b: Operand, out: Operand, subtract: bool):
    """QNNPACK's quant8 ADD (pytorch_qnnp_compute_add_quantization_params + q8vadd)."""
    import struct

    a_out = _f32(_f32(a.scale) / _f32(out.scale))
    b_out = _f32(_f32(b.scale) / _f32(out.scale))
    max_out = max(a_out, b_out)
    bits = struct.unpack("<I", struct.pack("<f", max_out))[0]
    exponent = (bits >> 23) - 127
    shift = 21 - exponent
    if not 13 <= shift < 32:
        return _nnapi_add(a, b, out, subtract)  # outside QNNPACK's supported range: fall back to the spec
    mult_scale = _f32(2.0 ** shift)
    am = int(round(_f32(a_out * mult_scale)))  # lrintf: half to even
    bm = int(round(_f32(b_out * mult_scale)))
    zpp = -(am * a.zero_point + bm * b.zero_point)
    mask = (1 << shift) - 1
    threshold = mask >> 1

    def f(x, y):
        import torch

        acc = zpp + x.to(torch.int64) * am + y.to(torch.int64) * bm
        acc = ((acc + (1 << 31)) % (1 << 32)) - (1 << 31)  # int32 wrap-around, as in the C kernel
        rem = torch.bitwise_and(acc, mask) - (acc < 0).to(torch.int64)
        return torch.bitwise_right_shift(acc, shift) + (rem > threshold).to(torch.int64) + out.zero_point
    return f


def _mul_requant(a: Operand, b: Operand, out: Operand, rounding: str):
    import torch

    if rounding == "qnnpack":  # torch's quantized::mul: lrintf(float(product) * float(multiplier))
        m = _f32(float(a.scale) * float(b.scale) / float(out.scale))

        def f(x, y):
            p = (x.to(torch.int64) - a.zero_point) * (y.to(torch.int64) - b.zero_point)
            return torch.round(p.to(torch.float32) * m).to(torch.int64) + out.zero_point
        return f
    q, shift = quantize_multiplier(a.scale * b.scale / out.scale)

    def g(x, y):
        p = (x.to(torch.int64) - a.zero_point) * (y.to(torch.int64) - b.zero_point)
        return multiply_by_quantized_multiplier(p, q, shift) + out.zero_point
    return g


@_builder(19, 20, 21)  # RELU, RELU1, RELU6
def _relu(ctx: _Ctx) -> Step:

    x = ctx.expect_type(0, _DATA)
    out_q = ctx.out
    lo_f, hi_f = {19: (0.0, None), 20: (-1.0, 1.0), 21: (0.0, 6.0)}[ctx.op.type]
    i, o = ctx.io()
    if x.type == nn.TENSOR_FLOAT32:
        def step(env):
            env[o] = env[i].clamp(lo_f, hi_f) if hi_f is not None else env[i].clamp_min(lo_f)
        return step
    if _same_q(x, out_q):
        lo, hi = _act_range_q({19: nn.FUSED_RELU, 20: nn.FUSED_RELU1, 21: nn.FUSED_RELU6}[ctx.op.type], out_q)

        def step(env):
            env[o] = env[i].clamp(lo, hi)
        return step
    rounding = ctx.rounding

    def step(env):
        v = dequantize(env[i], x)
        v = v.clamp(lo_f, hi_f) if hi_f is not None else v.clamp_min(lo_f)
        env[o] = quantize(v, out_q, rounding)
    return step


@_builder(14)  # LOGISTIC
def _logistic(ctx: _Ctx) -> Step:
    import torch

    x = ctx.expect_type(0, _DATA)
    out_q = ctx.out
    i, o = ctx.io()
    if x.type == nn.TENSOR_QUANT8_ASYMM and (out_q.scale != 1.0 / 256 or out_q.zero_point != 0):
        raise BadModel(f"quant8 LOGISTIC output must have scale 1/256 and zero point 0, got {out_q.describe()}")
    rounding = ctx.rounding

    def step(env):
        if x.type == nn.TENSOR_FLOAT32:
            env[o] = torch.sigmoid(env[i])
        else:
            env[o] = quantize(torch.sigmoid(dequantize(env[i], x)), out_q, rounding)
    return step


@_builder(25, 64)  # SOFTMAX, LOG_SOFTMAX
def _softmax(ctx: _Ctx) -> Step:
    import torch

    log = ctx.op.type == 64
    x = ctx.expect_type(0, (nn.TENSOR_FLOAT32,) if log else _DATA)
    beta = ctx.scalar(1, (nn.FLOAT32,))
    axis = ctx.scalar(2) if ctx.n_in > 2 else -1
    rank = len(x.dims)
    if not -rank <= axis < rank:
        raise BadModel(f"axis {axis} out of range for rank {rank}")
    out_q = ctx.out
    if x.type == nn.TENSOR_QUANT8_ASYMM and (out_q.scale != 1.0 / 256 or out_q.zero_point != 0):
        raise BadModel(f"quant8 SOFTMAX output must have scale 1/256 and zero point 0, got {out_q.describe()}")
    i, o = ctx.io()
    rounding = ctx.rounding

    def step(env):
        v = env[i] if x.type == nn.TENSOR_FLOAT32 else dequantize(env[i], x)
        y = (torch.log_softmax if log else torch.softmax)(v * beta, axis)
        env[o] = y if x.type == nn.TENSOR_FLOAT32 else quantize(y, out_q, rounding)
    return step


@_builder(71)  # PRELU
def _prelu(ctx: _Ctx) -> Step:
    import torch

    x, a = ctx.expect_type(0, _DATA), ctx.operand(1)
    if a.type != x.type:
        raise BadModel(f"alpha {a.describe()} must have the input's type")
    _binary_shapes(x, a)
    out_q = ctx.out
    ix, ia, o = ctx.op.inputs[0], ctx.op.inputs[1], ctx.op.outputs[0]
    rounding = ctx.rounding

    def step(env):
        if x.type == nn.TENSOR_FLOAT32:
            v, al = env[ix], env[ia]
            env[o] = torch.where(v >= 0, v, v * al)
        else:
            v, al = dequantize(env[ix], x), dequantize(env[ia], a)
            env[o] = quantize(torch.where(v >= 0, v, v * al), out_q, rounding)
    return step


@_builder(72)  # QUANTIZE
def _quantize(ctx: _Ctx) -> Step:
    ctx.expect_type(0, (nn.TENSOR_FLOAT32,))
    out_q = ctx.out
    if out_q.type != nn.TENSOR_QUANT8_ASYMM:
        raise BadModel(f"QUANTIZE output must be TENSOR_QUANT8_ASYMM, got {out_q.describe()}")
    i, o = ctx.io()
    rounding = ctx.rounding

    def step(env):
        env[o] = quantize(env[i], out_q, rounding)
    return step


@_builder(6)  # DEQUANTIZE
def _dequantize(ctx: _Ctx) -> Step:
    x = ctx.expect_type(0, nn.QUANT_TYPES)
    if ctx.out.type != nn.TENSOR_FLOAT32:
        raise BadModel(f"DEQUANTIZE output must be TENSOR_FLOAT32, got {ctx.out.describe()}")
    i, o = ctx.io()

    def step(env):
        env[o] = dequantize(env[i], x)
    return step


# --------------------------------------------------------------------------- shape and layout


def _requant_to(x: Operand, out: Operand, rounding: str):
    if _same_q(x, out):
        return lambda v: v
    return lambda v: quantize(dequantize(v, x), out, rounding)


@_builder(22)  # RESHAPE
def _reshape(ctx: _Ctx) -> Step:
    x = ctx.expect_type(0, _ANY)
    shape = ctx.ints(1)
    if sum(1 for d in shape if d == -1) > 1:
        raise BadModel(f"at most one -1 in the new shape {shape}")
    if not _same_q(x, ctx.out):
        raise BadModel(f"RESHAPE output must have the input's type and quantization: {x.describe()} -> {ctx.out.describe()}")
    i, o = ctx.io()

    def step(env):
        env[o] = env[i].reshape(shape)
    return step


@_builder(50)  # EXPAND_DIMS
def _expand_dims(ctx: _Ctx) -> Step:
    x = ctx.expect_type(0, _ANY)
    axis = ctx.scalar(1)
    rank = len(x.dims)
    if axis < 0:
        axis += rank + 1
    if not 0 <= axis <= rank:
        raise BadModel(f"axis {axis} out of range for rank {rank}")
    i, o = ctx.io()

    def step(env):
        env[o] = env[i].unsqueeze(axis)
    return step


@_builder(37)  # TRANSPOSE
def _transpose(ctx: _Ctx) -> Step:
    x = ctx.expect_type(0, _ANY)
    rank = len(x.dims)
    perm = ctx.ints(1) if ctx.n_in > 1 and ctx.operand(1).lifetime == "constant" else list(reversed(range(rank)))
    if sorted(perm) != list(range(rank)):
        raise BadModel(f"permutation {perm} is not a permutation of {rank} dimensions")
    i, o = ctx.io()

    def step(env):
        env[o] = env[i].permute(*perm)
    return step


@_builder(2)  # CONCATENATION
def _concat(ctx: _Ctx) -> Step:
    import torch

    ins = ctx.op.inputs[:-1]
    axis = ctx.scalar(ctx.n_in - 1)
    opers = [ctx.g.operands[k] for k in ins]
    out_q = ctx.out
    rank = len(opers[0].dims)
    if axis < 0:
        axis += rank
    for p in opers:
        if p.type != out_q.type or len(p.dims) != rank:
            raise BadModel(f"inputs must share the output's type and rank: {p.describe()} vs {out_q.describe()}")
    conv = [_requant_to(p, out_q, ctx.rounding) for p in opers]
    o = ctx.op.outputs[0]

    def step(env):
        env[o] = torch.cat([c(env[k]) for c, k in zip(conv, ins)], axis)
    return step


@_builder(31)  # MEAN
def _mean(ctx: _Ctx) -> Step:

    x = ctx.expect_type(0, _DATA)
    axes = ctx.ints(1)
    keep = bool(ctx.scalar(2))
    rank = len(x.dims)
    axes = sorted({a + rank if a < 0 else a for a in axes})
    out_q = ctx.out
    i, o = ctx.io()
    rounding = ctx.rounding

    def step(env):
        if x.type == nn.TENSOR_FLOAT32:
            env[o] = env[i].mean(axes, keepdim=keep)
        else:
            env[o] = quantize(dequantize(env[i], x).mean(axes, keepdim=keep), out_q, rounding)
    return step


@_builder(35)  # STRIDED_SLICE
def _strided_slice(ctx: _Ctx) -> Step:
    x = ctx.expect_type(0, _ANY)
    begin, end, strides = ctx.ints(1), ctx.ints(2), ctx.ints(3)
    begin_mask, end_mask, shrink = ctx.scalar(4), ctx.scalar(5), ctx.scalar(6)
    rank = len(x.dims)
    if not len(begin) == len(end) == len(strides) == rank:
        raise BadModel(f"begin/end/strides must have {rank} elements")
    if any(s <= 0 for s in strides):
        raise BadModel(f"only positive strides are supported, got {strides}")
    i, o = ctx.io()

    def step(env):
        v = env[i]
        index = []
        for d in range(rank):
            size = v.shape[d]
            b = 0 if begin_mask & (1 << d) else begin[d]
            e = size if end_mask & (1 << d) else end[d]
            b = b + size if b < 0 else b
            e = e + size if e < 0 else e
            if shrink & (1 << d):
                index.append(b)
            else:
                index.append(slice(max(0, min(b, size)), max(0, min(e, size)), strides[d]))
        env[o] = v[tuple(index)]
    return step


@_builder(94)  # RESIZE_NEAREST_NEIGHBOR
def _resize_nearest(ctx: _Ctx) -> Step:
    import torch

    x = ctx.expect_type(0, _DATA)
    if ctx.n_in not in (3, 4):
        raise BadModel(f"only the 3/4-input forms are supported, got {ctx.n_in}")
    nchw = ctx.scalar(3, (nn.BOOL,)) if ctx.n_in > 3 else False
    in_h, in_w = (x.dims[2], x.dims[3]) if nchw else (x.dims[1], x.dims[2])
    if ctx.operand(1).type == nn.FLOAT32:
        out_w, out_h = int(in_w * ctx.scalar(1, (nn.FLOAT32,))), int(in_h * ctx.scalar(2, (nn.FLOAT32,)))
    else:
        out_w, out_h = ctx.scalar(1), ctx.scalar(2)
    if out_w < 1 or out_h < 1:
        raise BadModel(f"output size {out_w}x{out_h} must be positive")
    rows = torch.clamp((torch.arange(out_h, dtype=torch.float64) * (in_h / out_h)).floor().long(), max=in_h - 1)
    cols = torch.clamp((torch.arange(out_w, dtype=torch.float64) * (in_w / out_w)).floor().long(), max=in_w - 1)
    i, o = ctx.io()

    def step(env):
        v = _to_nchw(env[i], nchw)
        env[o] = _from_nchw(v.index_select(2, rows).index_select(3, cols), nchw)
    return step


def supported_operations() -> List[str]:
    return sorted(nn.op_name(c) for c in _BUILDERS)
