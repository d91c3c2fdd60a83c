"""AVERAGE_POOL_2D and MAX_POOL_2D."""

from __future__ import annotations


from .. import nnapi_defs as nn
from ..nnapi_defs import Op
from .base import (_DATA, BadModel, Step, _act_float, _act_range_q, _builder, _Ctx, _f32, _same_q)
from .conv import _from_nchw, _pad, _padding, _to_nchw


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


@_builder(Op.AVERAGE_POOL_2D)
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


@_builder(Op.MAX_POOL_2D)
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
