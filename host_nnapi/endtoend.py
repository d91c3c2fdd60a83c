"""End-to-end comparisons of a shipped NNAPI model: against the CPU model, and against the CPU model's own
conversion run on the same host kernels with the same rounding; top-k agreement on the calibrated inputs."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from toolchain.records import ModelFile

from .align import Alignment
from .graph import Graph
from .kernels import BadModel, Plan, dequantize
from .reference import Reference

log = logging.getLogger(__name__)


@dataclass
class EndToEnd:
    max_abs: float = 0.0
    max_lsb: Optional[int] = None  # against the CPU model (quantized variants)
    lsb_vs_reference: Optional[int] = None  # against the CPU model's conversion on the same kernels
    top1: Optional[float] = None  # on the calibrated inputs
    top5: Optional[float] = None
    ref_magnitude: float = 0.0
    error: Optional[str] = None


def tensors(out) -> List[Any]:
    """A model's output(s) as a flat list of tensors (tuples, lists and dicts of outputs flattened, a dict's values in
    its order, None dropped)."""
    if isinstance(out, dict):
        return tensors(list(out.values()))
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in tensors(o)]
    return [] if out is None else [out]


def as_float(t):
    import torch

    return t.dequantize() if t.is_quantized else t.to(torch.float32)


def make_inputs(cpu, spec_file: ModelFile, n_random: int, seed: int) -> Tuple[List[Any], int]:
    """The model's bundled (calibrated) inputs, then ``n_random`` random ones; returns (inputs, number bundled).
    Each input is the tuple of the model's ``forward`` arguments (one for an image model, several for a model
    that declares its inputs: ``spec_file.inputs``)."""
    import torch

    inputs = []
    getter = getattr(cpu, "get_all_bundled_inputs", None)
    if getter is not None:
        try:
            inputs.extend(tuple(args) for args in getter() if args)
        except RuntimeError as e:
            log.debug("bundled inputs unavailable: %s", e)
    bundled = len(inputs)
    g = torch.Generator().manual_seed(seed)
    for k in range(n_random):
        inputs.append(tuple(_random_input(spec, g, smooth=k % 2 == 1) for spec in spec_file.inputs))
    return inputs, bundled


def _random_input(spec, g, smooth: bool):
    import torch

    shape = tuple(spec.shape)
    if spec.dtype in ("int32", "int64"):  # ids or indices: 0 and 1, which any table takes
        return torch.randint(0, 2, shape, generator=g).to(getattr(torch, spec.dtype))
    x = torch.rand(shape, generator=g) * 2 - 1
    if smooth and len(shape) == 4:  # calibration-like: smooth images in [-1, 1] plus noise
        low = torch.rand((shape[0], shape[1], max(1, shape[2] // 16), max(1, shape[3] // 16)), generator=g) * 2 - 1
        x = 0.7 * torch.nn.functional.interpolate(low, size=shape[2:], mode="bilinear", align_corners=False) + 0.3 * x
    if spec.dtype == "quint8":
        x = torch.quantize_per_tensor(x, float(spec.scale), int(spec.zero_point), torch.quint8)
    if spec.memory_format == "channels_last" and len(shape) == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def end_to_end(cpu, nnapi, inputs, n_calibrated: int, ref: Optional[Reference], al: Optional[Alignment],
               graph: Graph, rounding: str) -> EndToEnd:
    import torch

    from . import runtime

    res = EndToEnd()
    ref_plan = _reference_plan(ref, rounding)
    top1 = top5 = 0.0
    rows = 0
    # a few calls per model: the plain interpreter, not the profiling executor's warm-up (profile, then optimize)
    with runtime.using_rounding(rounding), torch.no_grad(), torch.jit.optimized_execution(False):
        for n, x in enumerate(inputs):
            try:
                want, got = tensors(cpu(*x)), tensors(nnapi(*x))
            except RuntimeError as e:
                res.error = (f"running the models failed: {str(e).strip().splitlines()[0] if str(e).strip() else e}; "
                             f"{runtime.last_error()}")
                return res
            if len(want) != len(got) or any(a.shape != b.shape for a, b in zip(want, got)):
                res.error = (f"the NNAPI model returns {[list(t.shape) for t in got]}, the CPU model "
                             f"{[list(t.shape) for t in want]}")
                return res
            _compare_cpu(res, want, got, graph, first=n == 0)
            if ref_plan is not None and len(x) == 1:  # the reference conversion is built for one input
                _compare_reference(res, ref, ref_plan, x[0], got, graph)
            if n < n_calibrated:
                a1, a5, k = _topk(want[0], got[0])
                top1, top5, rows = top1 + a1, top5 + a5, rows + k
    if rows:
        res.top1, res.top5 = top1 / rows, top5 / rows
    return res


def _reference_plan(ref: Optional[Reference], rounding: str) -> Optional[Plan]:
    if ref is None:
        return None
    try:
        return Plan(ref.graph, rounding)
    except BadModel as e:
        log.debug("the CPU model's conversion does not run on the host kernels: %s", e)
        return None


def _lsb_scale(graph: Graph, k: int, want) -> float:
    if want.is_quantized:
        return float(want.q_scale())
    if k < len(graph.outputs) and graph.operands[graph.outputs[k]].is_quant:
        return float(graph.operands[graph.outputs[k]].scale)
    return 0.0


def _compare_cpu(res: EndToEnd, want, got, graph: Graph, first: bool) -> None:
    for k, (w, g) in enumerate(zip(want, got)):
        wf, gf = as_float(w), as_float(g)
        diff = float((wf - gf).abs().max()) if wf.numel() else 0.0
        res.max_abs = max(res.max_abs, diff)
        if first:
            res.ref_magnitude = max(res.ref_magnitude, float(wf.abs().max()) if wf.numel() else 0.0)
        scale = _lsb_scale(graph, k, w)
        if scale:
            res.max_lsb = max(res.max_lsb or 0, int(round(diff / scale)))


def _compare_reference(res: EndToEnd, ref: Reference, plan: Plan, x, got, graph: Graph) -> None:
    g = ref.graph
    try:
        outs = plan.run([ref.nnapi_layout(g.inputs[0], x)])
    except (BadModel, RuntimeError) as e:
        log.debug("the reference conversion failed on an input: %s", e)
        return
    for k, (raw, shipped) in enumerate(zip(outs, got)):
        o = g.operands[g.outputs[k]]
        value = ref.torch_layout(g.outputs[k], dequantize(raw, o) if o.is_quant else raw)
        diff = float((as_float(shipped) - value).abs().max()) if value.numel() else 0.0
        scale = _lsb_scale(graph, k, shipped) or (o.scale if o.is_quant else 0.0)
        if scale:
            lsb = int(round(diff / scale))
        else:  # float output: the same kernels on the same weights agree to float32 rounding
            lsb = 0 if diff <= 1e-5 * max(1.0, float(value.abs().max()) if value.numel() else 0.0) else 1
        res.lsb_vs_reference = max(res.lsb_vs_reference or 0, lsb)


def _topk(want, got) -> Tuple[float, float, int]:
    a, b = as_float(want), as_float(got)
    a, b = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    k = min(5, a.shape[1])
    top1 = top5 = 0.0
    for ra, rb in zip(a, b):
        top1 += float(ra.argmax() == rb.argmax())
        top5 += len(set(ra.topk(k).indices.tolist()) & set(rb.topk(k).indices.tolist())) / k
    return top1, top5, a.shape[0]
