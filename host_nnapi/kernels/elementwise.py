"""Elementwise operations: ADD/SUB/MUL/DIV, activations, softmax, PRELU, QUANTIZE, DEQUANTIZE."""

from __future__ import annotations


from .. import nnapi_defs as nn
from ..graph import Operand
from ..nnapi_defs import Op
from .base import (_DATA, BadModel, Step, _act_float, _act_range_q, _builder, _Ctx, _f32, _same_q, dequantize,
                   multiply_by_quantized_multiplier, quantize, quantize_multiplier)


def _binary_shapes(a: Operand, b: Operand) -> None:
    if a.dims and b.dims:
        ra, rb = list(a.dims), list(b.dims)
        for da, db in zip(reversed(ra), reversed(rb)):
            if da != db and 1 not in (da, db) and 0 not in (da, db):
                raise BadModel(f"shapes {a.describe()} and {b.describe()} do not broadcast")


@_builder(Op.ADD, Op.SUB, Op.MUL, Op.DIV)
def _binary(ctx: _Ctx) -> Step:
    import torch

    code = ctx.op.type
    a, b = ctx.operand(0), ctx.operand(1)
    out_q = ctx.out
    if a.type != b.type or a.type != out_q.type:
        raise BadModel(f"inputs and output must share a type: {a.describe()}, {b.describe()}, {out_q.describe()}")
    if a.type not in (nn.TENSOR_FLOAT32, nn.TENSOR_QUANT8_ASYMM, nn.TENSOR_INT32):
        raise BadModel(f"type {a.describe()} is not supported")
    if code == Op.DIV and a.type == nn.TENSOR_QUANT8_ASYMM:
        raise BadModel("NNAPI DIV has no TENSOR_QUANT8_ASYMM form")
    _binary_shapes(a, b)
    fuse = ctx.scalar(2)
    ia, ib, o = ctx.op.inputs[0], ctx.op.inputs[1], ctx.op.outputs[0]
    fn = {Op.ADD: torch.add, Op.SUB: torch.sub, Op.MUL: torch.mul, Op.DIV: torch.div}[code]
    if a.type != nn.TENSOR_QUANT8_ASYMM:
        def step(env):
            env[o] = _act_float(fn(env[ia], env[ib]), fuse)
        return step
    lo, hi = _act_range_q(fuse, out_q)
    if code in (Op.ADD, Op.SUB):
        requant = _qnnpack_add(a, b, out_q, code == Op.SUB) if ctx.rounding == "qnnpack" and code == Op.ADD else _nnapi_add(a, b, out_q, code == Op.SUB)
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
    q, shift = quantize_multiplier(_f32(_f32(a.scale) * _f32(b.scale)) / float(out.scale))  # AOSP Broadcast.cpp: float product

    def g(x, y):
        p = (x.to(torch.int64) - a.zero_point) * (y.to(torch.int64) - b.zero_point)
        return multiply_by_quantized_multiplier(p, q, shift) + out.zero_point
    return g


@_builder(Op.RELU, Op.RELU1, Op.RELU6)
def _relu(ctx: _Ctx) -> Step:

    x = ctx.expect_type(0, _DATA)
    out_q = ctx.out
    lo_f, hi_f = {Op.RELU: (0.0, None), Op.RELU1: (-1.0, 1.0), Op.RELU6: (0.0, 6.0)}[ctx.op.type]
    i, o = ctx.io()
    if x.type == nn.TENSOR_FLOAT32:
        def step(env):
            env[o] = env[i].clamp(lo_f, hi_f) if hi_f is not None else env[i].clamp_min(lo_f)
        return step
    if _same_q(x, out_q):
        lo, hi = _act_range_q({Op.RELU: nn.FUSED_RELU, Op.RELU1: nn.FUSED_RELU1, Op.RELU6: nn.FUSED_RELU6}[ctx.op.type], out_q)

        def step(env):
            env[o] = env[i].clamp(lo, hi)
        return step
    rounding = ctx.rounding

    def step(env):
        v = dequantize(env[i], x)
        v = v.clamp(lo_f, hi_f) if hi_f is not None else v.clamp_min(lo_f)
        env[o] = quantize(v, out_q, rounding)
    return step


@_builder(Op.LOGISTIC)
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


@_builder(Op.SOFTMAX, Op.LOG_SOFTMAX)
def _softmax(ctx: _Ctx) -> Step:
    import torch

    log = ctx.op.type == Op.LOG_SOFTMAX
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


@_builder(Op.PRELU)
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


@_builder(Op.QUANTIZE)
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


@_builder(Op.DEQUANTIZE)
def _dequantize(ctx: _Ctx) -> Step:
    x = ctx.expect_type(0, nn.QUANT_TYPES)
    if ctx.out.type != nn.TENSOR_FLOAT32:
        raise BadModel(f"DEQUANTIZE output must be TENSOR_FLOAT32, got {ctx.out.describe()}")
    i, o = ctx.io()

    def step(env):
        env[o] = dequantize(env[i], x)
    return step
