"""Convolutions and FULLY_CONNECTED (float and quant8, both roundings)."""

from __future__ import annotations

from typing import Tuple

from .. import nnapi_defs as nn
from ..graph import Operand
from ..nnapi_defs import Op
from .base import (BadModel, Step, _act_float, _act_range_q, _builder, _Ctx, _f32, multiply_by_quantized_multiplier, quantize_multiplier)


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


def input_product_scale(x: Operand, w: Operand) -> float:
    """AOSP's ``inputShape.scale * filterShape.scale``: a product of two floats, rounded to float, then widened to
    double (nn/common/OperationsUtils.cpp, GetQuantizedConvolutionMultipler; docs/facts.md)."""
    return _f32(_f32(x.scale) * _f32(w.scale))


def _requant(acc, x: Operand, w: Operand, out: Operand, lo: int, hi: int, rounding: str):
    """int32 accumulator (as float32/float64 tensor) -> raw quant8 output.  ``acc`` is the step's own result: it is
    overwritten (in place, the same arithmetic without a new tensor per step)."""
    import torch

    if rounding == "qnnpack":
        s = _f32(_f32(_f32(w.scale) * _f32(x.scale)) * _f32(1.0 / _f32(out.scale)))
        y = acc.to(torch.float32).mul_(s).round_().add_(out.zero_point)
    else:
        q, shift = quantize_multiplier(input_product_scale(x, w) / float(out.scale))
        y = multiply_by_quantized_multiplier(acc.to(torch.int64), q, shift).add_(out.zero_point)
    return y.clamp_(lo, hi).to(torch.uint8)


@_builder(Op.CONV_2D, Op.DEPTHWISE_CONV_2D, Op.TRANSPOSE_CONV_2D)
def _conv(ctx: _Ctx) -> Step:
    import torch
    import torch.nn.functional as F

    kind = {Op.CONV_2D: "conv", Op.DEPTHWISE_CONV_2D: "depthwise", Op.TRANSPOSE_CONV_2D: "transpose"}[ctx.op.type]
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
            v = _to_nchw(env[i], nchw).to(acc_dtype).sub_(x.zero_point)  # a new tensor: the input is left alone
            acc = conv(v)
            env[o] = _from_nchw(_requant(acc, x, w, out_q, lo, hi, rounding), nchw)
    else:
        def step(env):
            env[o] = _from_nchw(_act_float(conv(_to_nchw(env[i], nchw)), fuse), nchw)
    return step


@_builder(Op.FULLY_CONNECTED)
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
            v = env[i].reshape(-1, in_size).to(acc_dtype).sub_(x.zero_point)  # a new tensor: the input is left alone
            env[o] = _requant(F.linear(v, wd, bd), x, w, out_q, lo, hi, rounding)
    else:
        def step(env):
            env[o] = _act_float(F.linear(env[i].reshape(-1, in_size), wt, bt), fuse)
    return step
