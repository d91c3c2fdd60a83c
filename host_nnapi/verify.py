"""`invoke verify`: run each converted NNAPI model and its CPU twin on the same inputs and compare.

Per variant of a convert manifest:

* static checks on the decoded NNAPI model (:mod:`host_nnapi.checks`);
* end to end: max abs diff (float) or LSB diff and top-1/top-5 agreement
  (quantized) over the bundled inputs and a few random ones;
* layer by layer: the CPU model is serialized again with torch's NNAPI
  serializer, which maps every TorchScript value to its NNAPI operand; each
  NNAPI operation is then run in isolation on the CPU model's own intermediate
  values and compared with the CPU result, naming the first operation that
  diverges (and quantized blocks are judged by this, not by the end-to-end LSB
  distance that accumulates through the network).
"""

from __future__ import annotations

import contextlib
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from toolchain.errors import ConversionError, RecordError, ToolFailed, UsageError, VerificationError
from toolchain.fsutil import atomic_write_json
from toolchain.records import ConvertManifest, ModelFile, now_iso

from . import checks
from .graph import Graph, _tensor_bytes, decode_module, decode_serialized
from .kernels import ROUNDING_MODES, BadModel, Plan

log = logging.getLogger(__name__)

RESULTS_KIND = "torchdroid.host-nnapi-verify"
RESULTS_SCHEMA = 1
RESULTS_NAME = "verify.json"


@dataclass(frozen=True)
class VerifySettings:
    models: Path
    out: Optional[Path] = None  # default: <models>/verify.json
    variants: Tuple[str, ...] = ()  # default: all
    rounding: str = "qnnpack"
    float_atol: float = 1e-4
    float_rtol: float = 1e-5
    max_lsb: int = 2  # per operation, run in isolation
    min_top1_agreement: float = 0.75
    min_top5_agreement: float = 0.8
    random_inputs: int = 3
    seed: int = 0
    api_level: int = 29
    layerwise: str = "auto"  # "auto": on failure and for quantized variants; "always"; "never"
    cache: Optional[Path] = None


@dataclass
class LayerResult:
    operation: int
    name: str
    output: str
    max_abs: float
    max_lsb: Optional[int]
    ok: bool


@dataclass
class VariantResult:
    variant: str
    mode: str
    ok: bool
    quantized: bool
    inputs: int = 0
    max_abs_diff: float = 0.0
    max_lsb_diff: Optional[int] = None
    top1_agreement: Optional[float] = None
    top5_agreement: Optional[float] = None
    findings: List[Dict[str, Any]] = field(default_factory=list)
    layers: List[Dict[str, Any]] = field(default_factory=list)
    layerwise_note: str = ""
    first_divergence: Optional[str] = None
    failures: List[str] = field(default_factory=list)
    error: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class VerifyResult:
    json_path: Path
    rows: List[VariantResult]
    library: str

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)


def verify(settings: VerifySettings) -> VerifyResult:
    """Verify every (or the selected) variant; write the results JSON; raise VerificationError if any fails."""
    if settings.rounding not in ROUNDING_MODES:
        raise UsageError(f"unknown rounding {settings.rounding!r}", remedy=f"use one of: {', '.join(ROUNDING_MODES)}")
    manifest = ConvertManifest.load(settings.models)
    variants = manifest.variants()
    names = list(settings.variants) or sorted(variants)
    selected = []
    for name in names:
        pair = manifest.find(name) if name not in variants else variants[name]
        if "cpu" not in pair or "nnapi" not in pair:
            raise RecordError(f"variant {name} lacks a {'cpu' if 'cpu' not in pair else 'nnapi'} model in {manifest.path}",
                              remedy="run `invoke convert` again")
        selected.append((pair["cpu"].qualified_variant, pair))
    from . import runtime

    lib = runtime.load(cache=settings.cache)
    rows = []
    for name, pair in selected:
        log.info("verifying %s", name)
        rows.append(verify_pair(name, pair["cpu"], pair["nnapi"], settings))
    out = settings.out or manifest.dir / RESULTS_NAME
    atomic_write_json(out, {
        "kind": RESULTS_KIND, "schema": RESULTS_SCHEMA, "written": now_iso(), "manifest": str(manifest.path),
        "library": str(lib), "rounding": settings.rounding,
        "thresholds": {"float_atol": settings.float_atol, "float_rtol": settings.float_rtol, "max_lsb": settings.max_lsb,
                       "min_top1_agreement": settings.min_top1_agreement,
                       "min_top5_agreement": settings.min_top5_agreement},
        "ok": all(r.ok for r in rows),
        "variants": [r.to_dict() for r in rows],
    })
    result = VerifyResult(Path(out), rows, str(lib))
    if not result.ok:
        bad = [r for r in rows if not r.ok]
        raise VerificationError(
            f"{len(bad)} of {len(rows)} NNAPI model(s) do not match their CPU model on the host NNAPI: "
            + ", ".join(r.variant for r in bad),
            cause="; ".join(f"{r.variant}: {r.error or '; '.join(r.failures)}"
                            + (f" (first diverging operation: {r.first_divergence})" if r.first_divergence else "")
                            for r in bad),
            remedy=f"see {out} (per-variant findings and layer-by-layer results); fix the conversion, "
                   "or relax verify.* thresholds in invoke.yaml if the difference is expected",
        )
    return result


@contextlib.contextmanager
def _qengine(name: str):
    import torch

    old = torch.backends.quantized.engine
    if name in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = old


def verify_pair(name: str, cpu_file: ModelFile, nnapi_file: ModelFile, s: VerifySettings) -> VariantResult:
    import torch

    from . import runtime

    quantized = cpu_file.mode != "none"
    row = VariantResult(variant=name, mode=cpu_file.mode, ok=False, quantized=quantized)
    try:
        cpu_file.check_hash()
        nnapi_file.check_hash()
        with _qengine("qnnpack"):  # quantized weights are packed for the engine current at load time
            cpu = torch.jit.load(str(cpu_file.path), map_location="cpu").eval()
            nnapi = torch.jit.load(str(nnapi_file.path), map_location="cpu").eval()
    except (RecordError, RuntimeError) as e:
        row.error = f"cannot load the models: {e}"
        return row
    try:
        graph = decode_module(nnapi)
    except (ValueError, RuntimeError) as e:
        row.error = f"cannot decode the NNAPI model: {e}"
        return row
    findings = checks.static_checks(graph, s.api_level)
    row.findings = [f.to_dict() for f in findings]
    out_operand = graph.operands[graph.outputs[0]] if graph.outputs else None
    inputs = make_inputs(cpu, nnapi_file, s.random_inputs, s.seed)
    row.inputs = len(inputs)
    top1 = top5 = 0
    with _qengine("qnnpack"), runtime.using_rounding(s.rounding), torch.no_grad():
        for x in inputs:
            try:
                ref = cpu(x)
                got = nnapi(x)
            except RuntimeError as e:
                row.error = f"running the NNAPI model failed: {str(e).strip().splitlines()[0]}; {runtime.last_error()}"
                break
            ref_f, got_f = _as_float(ref), _as_float(got)
            row.max_abs_diff = max(row.max_abs_diff, float((ref_f - got_f).abs().max()))
            if quantized:
                scale = _output_scale(ref, out_operand)
                lsb = int(round(float((ref_f - got_f).abs().max()) / scale)) if scale else 0
                row.max_lsb_diff = max(row.max_lsb_diff or 0, lsb)
            a, b = ref_f.reshape(ref_f.shape[0], -1), got_f.reshape(got_f.shape[0], -1)
            k = min(5, a.shape[1])
            for ra, rb in zip(a, b):
                top1 += int(ra.argmax() == rb.argmax())
                top5 += len(set(ra.topk(k).indices.tolist()) & set(rb.topk(k).indices.tolist())) / k
    if row.error:
        row.failures.append(row.error)
    else:
        n = sum(x.shape[0] for x in inputs) or 1
        row.top1_agreement, row.top5_agreement = top1 / n, top5 / n
        if quantized:
            if row.top1_agreement < s.min_top1_agreement:
                row.failures.append(f"top-1 agreement {row.top1_agreement:.2f} < {s.min_top1_agreement}")
            if row.top5_agreement < s.min_top5_agreement:
                row.failures.append(f"top-5 agreement {row.top5_agreement:.2f} < {s.min_top5_agreement}")
        else:
            with torch.no_grad():
                ref_mag = max(float(_as_float(cpu(inputs[0])).abs().max()), 1.0) if inputs else 1.0
            limit = s.float_atol + s.float_rtol * ref_mag
            if row.max_abs_diff > limit:
                row.failures.append(f"max abs diff {row.max_abs_diff:.3g} > {limit:.3g}")
    row.failures.extend(f.message for f in checks.errors(findings))
    want_layers = s.layerwise == "always" or (s.layerwise == "auto" and (quantized or row.failures))
    if want_layers and inputs:
        try:
            layers, note = layer_by_layer(cpu, nnapi_file, inputs[0], s)
        except Exception as e:  # noqa: BLE001 - the comparison is a diagnosis; report why it was not possible
            layers, note = [], f"layer-by-layer comparison not possible: {type(e).__name__}: {e}"
        row.layers = [asdict(x) for x in layers]
        row.layerwise_note = note
        bad = [x for x in layers if not x.ok]
        if bad:
            row.first_divergence = f"operation {bad[0].operation} {bad[0].name} (output {bad[0].output})"
            row.failures.append(f"{len(bad)} operation(s) diverge when run in isolation on the CPU model's values; "
                                f"first: {row.first_divergence}")
    row.ok = not row.failures
    return row


def _as_float(t):
    import torch

    if isinstance(t, (list, tuple)):
        t = t[0]
    return t.dequantize() if t.is_quantized else t.to(torch.float32)


def _output_scale(ref, out_operand) -> float:
    if isinstance(ref, (list, tuple)):
        ref = ref[0]
    if ref.is_quantized:
        return float(ref.q_scale())
    if out_operand is not None and out_operand.is_quant:
        return float(out_operand.scale)
    return 0.0


def make_inputs(cpu, spec_file: ModelFile, n_random: int, seed: int) -> List[Any]:
    """The model's bundled inputs, then ``n_random`` random inputs of the manifest's shape (quantized if it is)."""
    import torch

    inputs = []
    getter = getattr(cpu, "get_all_bundled_inputs", None)
    if getter is not None:
        try:
            inputs.extend(args[0] for args in getter() if args)
        except RuntimeError as e:
            log.debug("bundled inputs unavailable: %s", e)
    spec = spec_file.input
    g = torch.Generator().manual_seed(seed)
    for k in range(n_random):
        # calibration-like: smooth images in [-1, 1] plus noise, and one plain uniform draw
        shape = tuple(spec.shape)
        x = torch.rand(shape, generator=g) * 2 - 1
        if k % 2 == 1 and len(shape) == 4:
            low = torch.rand((shape[0], shape[1], max(1, shape[2] // 16), max(1, shape[3] // 16)), generator=g) * 2 - 1
            x = 0.7 * torch.nn.functional.interpolate(low, size=shape[2:], mode="bilinear", align_corners=False) + 0.3 * x
        if spec.dtype == "quint8":
            x = torch.quantize_per_tensor(x, float(spec.scale), int(spec.zero_point), torch.quint8)
        if spec.memory_format == "channels_last" and len(shape) == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        inputs.append(x)
    return inputs


# --------------------------------------------------------------------------- layer by layer


class _Proxy:
    """The frozen module with a copied graph, as the serializer sees a module."""

    def __init__(self, module, graph):
        self._module = module
        self.graph = graph

    def __getattr__(self, name):
        return getattr(self._module, name)


def layer_by_layer(cpu, spec_file: ModelFile, example, s: VerifySettings) -> Tuple[List[LayerResult], str]:
    """Run each NNAPI operation of a fresh conversion of ``cpu`` on the CPU model's own intermediate values."""
    import torch
    from torch.backends._nnapi.serializer import DimOrder, _NnapiSerializer

    with _qengine("qnnpack"), torch.no_grad():
        frozen = cpu if _is_frozen(cpu) else torch.jit.freeze(cpu.eval())
        graph = frozen.graph.copy()
        x = example.clone()
        if x.dim() == 4 and spec_file.input.memory_format == "channels_last":  # converted with an NHWC input
            x = x.contiguous(memory_format=torch.channels_last)
            x.nnapi_nhwc = True
        _fold_rank_checks(frozen, graph, x)
        ser = _NnapiSerializer(None)
        ser_model, weights, _, _, _, _ = ser.serialize_model(_Proxy(frozen, graph), [x])
        values = [(v, oid) for v, oid in ser.jitval_operand_map.items() if v.type().kind() == "TensorType"]
        probes = _probe(frozen, graph, [v for v, _ in values], x)
        nn_graph = decode_serialized(torch.tensor(ser_model, dtype=torch.int32).numpy().tobytes(),
                                     [_tensor_bytes(w.contiguous()) for w in weights])
        cpu_vals: Dict[int, Any] = {}
        for (v, oid), val in zip(values, probes):
            if isinstance(val, torch.Tensor):
                if ser.operands[oid].dim_order is DimOrder.CHANNELS_LAST and val.dim() == 4:
                    val = val.permute(0, 2, 3, 1)
                cpu_vals[oid] = (val.int_repr() if val.is_quantized else val).contiguous()
        with _qengine("qnnpack"):
            shipped_graph = decode_module(torch.jit.load(str(spec_file.path), map_location="cpu"))
        same_structure = _structure(shipped_graph) == _structure(nn_graph)
        if same_structure:  # operand ids coincide: run the shipped model's operations (its weights, its parameters)
            nn_graph = shipped_graph
        plan = Plan(nn_graph, s.rounding)
        results = []
        for op, step in plan.steps:
            needed = [i for i in op.inputs if nn_graph.operands[i].lifetime != "constant"]
            out_id = op.outputs[0]
            if out_id not in cpu_vals or any(i not in cpu_vals for i in needed):
                continue
            env = list(plan.env_template)
            for i in needed:
                env[i] = cpu_vals[i]
            try:
                step(env)
            except (BadModel, RuntimeError) as e:
                results.append(LayerResult(op.index, op.name, nn_graph.operands[out_id].describe(), math.inf, None, False))
                log.debug("operation %d failed in isolation: %s", op.index, e)
                continue
            got, ref = env[out_id], cpu_vals[out_id]
            o = nn_graph.operands[out_id]
            if got.shape != ref.shape:
                results.append(LayerResult(op.index, op.name, o.describe(), math.inf, None, False))
                continue
            diff = (got.to(torch.float64) - ref.to(torch.float64)).abs()
            max_abs = float(diff.max()) if diff.numel() else 0.0
            if o.is_quant:
                lsb = int(max_abs)
                results.append(LayerResult(op.index, op.name, o.describe(), max_abs * o.scale, lsb, lsb <= s.max_lsb))
            else:
                mag = float(ref.abs().max()) if ref.numel() and ref.dtype.is_floating_point else 0.0
                ok = max_abs <= s.float_atol + s.float_rtol * max(mag, 1.0)
                results.append(LayerResult(op.index, op.name, o.describe(), max_abs, None, ok))
    if same_structure:
        note = (f"{len(results)} of {len(nn_graph.operations)} operations of the shipped NNAPI model compared in "
                "isolation on the CPU model's values")
    else:
        note = (f"{len(results)} of {len(nn_graph.operations)} operations compared in isolation; the shipped NNAPI model "
                "has another structure than the CPU model converted again here, so that conversion was compared")
    return results, note


def _probe(frozen, graph, values, x) -> list:
    """Run ``graph`` (changing it: it then returns ``values``, a tuple of its tensor values) on ``x``."""
    import torch

    ret = graph.return_node()
    tup = graph.create("prim::TupleConstruct", values)
    tup.output().setType(torch._C.TupleType([v.type() for v in values]))
    graph.appendNode(tup)
    ret.removeInput(0)
    ret.addInput(tup.output())
    fn = torch._C._create_function_from_graph("torchdroid_probe", graph)
    return list(fn(frozen._c, x))


def _fold_rank_checks(frozen, graph, x) -> None:
    """Replace ``len(t.size())`` by the rank ``t`` has on ``x`` and fold what depends on it.

    Scripted models (what `invoke convert` ships as CPU models) keep the ``if len(x.shape) != 4: raise``
    checks of torch's functional and quantized modules, which the NNAPI serializer cannot convert.
    """
    import torch

    if not any(n.kind() == "aten::len" for n in graph.nodes()):
        return
    probe = graph.copy()
    tensors = [v for v in probe.inputs() if v.type().kind() == "TensorType"]
    tensors += [v for n in probe.nodes() for v in n.outputs() if v.type().kind() == "TensorType"]
    names = [v.debugName() for v in tensors]
    rank = {name: t.dim() for name, t in zip(names, _probe(frozen, probe, tensors, x)) if isinstance(t, torch.Tensor)}
    for node in list(graph.nodes()):
        if node.kind() != "aten::len":
            continue
        size = node.input().node()
        if size.kind() == "aten::size" and size.inputsSize() == 1 and size.input().debugName() in rank:
            with graph.insert_point_guard(node):
                const = graph.insertConstant(rank[size.input().debugName()])
            node.output().replaceAllUsesWith(const)
    torch._C._jit_pass_constant_propagation(graph)
    torch._C._jit_pass_dce(graph)


def _structure(g: Graph):
    return [(op.type, op.inputs, op.outputs) for op in g.operations], [(o.type, o.dims) for o in g.operands]


def _is_frozen(module) -> bool:
    try:
        return not any(n.kind() == "prim::GetAttr" for n in module.graph.nodes())
    except RuntimeError:
        return False


__all__ = ["VerifySettings", "VerifyResult", "VariantResult", "verify", "verify_pair", "layer_by_layer",
           "make_inputs", "ConversionError", "ToolFailed"]
