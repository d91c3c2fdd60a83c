"""Shape and layout operations: RESHAPE, EXPAND_DIMS, TRANSPOSE, CONCATENATION, MEAN, STRIDED_SLICE, RESIZE."""

from __future__ import annotations


from .. import nnapi_defs as nn
from ..graph import Operand
from ..nnapi_defs import Op
from .base import (_ANY, _DATA, BadModel, Step, _builder, _Ctx, _same_q, dequantize,
                   quantize)
from .conv import _from_nchw, _to_nchw


def _requant_to(x: Operand, out: Operand, rounding: str):
    if _same_q(x, out):
        return lambda v: v
    return lambda v: quantize(dequantize(v, x), out, rounding)


@_builder(Op.RESHAPE)
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


@_builder(Op.EXPAND_DIMS)
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


@_builder(Op.TRANSPOSE)
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


@_builder(Op.CONCATENATION)
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


@_builder(Op.MEAN)
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


@_builder(Op.STRIDED_SLICE)
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


@_builder(Op.RESIZE_NEAREST_NEIGHBOR)
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
