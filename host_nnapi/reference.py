"""The CPU model as verify's reference: converted again with torch's NNAPI serializer, with its own values.

torch's serializer maps every TorchScript value of the CPU model to an NNAPI operand.  Converting the CPU
model again therefore gives, for each operand of that conversion, the CPU model's own value on an example
input (probed from the same TorchScript graph).  verify aligns the shipped NNAPI model with this
conversion (:mod:`host_nnapi.align`) and runs every shipped operation on the CPU model's values
(:mod:`host_nnapi.layerwise`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from .graph import Graph, _tensor_bytes, decode_serialized


@dataclass
class Reference:
    """The CPU model converted again: its graph, and its values on one example input (NNAPI layout)."""

    graph: Graph
    values: Dict[int, Any]  # operand id -> CPU value (raw integers for quantized tensors)
    channels_last: Dict[int, bool] = field(default_factory=dict)  # operand id -> stored NHWC for an NCHW tensor

    def nnapi_layout(self, operand: int, value):
        """A CPU tensor in the layout the NNAPI operand ``operand`` stores it in, raw integers if quantized."""
        if value.dim() == 4 and self.channels_last.get(operand):
            value = value.permute(0, 2, 3, 1)
        return (value.int_repr() if value.is_quantized else value).contiguous()

    def torch_layout(self, operand: int, value):
        """An NNAPI-layout output back in PyTorch's (NCHW) dimension order."""
        if value.dim() == 4 and self.channels_last.get(operand):
            return value.permute(0, 3, 1, 2)
        return value


class _Proxy:
    """The frozen module with a copied graph, as the serializer sees a module."""

    def __init__(self, module, graph):
        self._module = module
        self.graph = graph

    def __getattr__(self, name):
        return getattr(self._module, name)


def build_reference(cpu, example, channels_last_input: bool) -> Reference:
    """Convert ``cpu`` again and probe its values on ``example`` (raises when the serializer cannot convert it)."""
    import torch
    from torch.backends._nnapi.serializer import DimOrder, _NnapiSerializer

    frozen = cpu if _is_frozen(cpu) else torch.jit.freeze(cpu.eval())
    graph = frozen.graph.copy()
    x = example.clone()
    if x.dim() == 4 and channels_last_input:  # converted with an NHWC input, as `invoke convert` does
        x = x.contiguous(memory_format=torch.channels_last)
        x.nnapi_nhwc = True
    probed = _fold_rank_checks(frozen, graph, x)
    ser = _NnapiSerializer(None)
    ser_model, weights, _, _, _, _ = ser.serialize_model(_Proxy(frozen, graph), [x])
    values = [(v, oid) for v, oid in ser.jitval_operand_map.items() if v.type().kind() == "TensorType"]
    ids = [v.unique() for v, _ in values]
    if all(i in probed for i in ids):  # the rank probe ran the same graph on x: its values are these
        probes = [probed[i] for i in ids]
    else:
        probes = _probe(frozen, graph, [v for v, _ in values], x)
    ref_graph = decode_serialized(torch.tensor(ser_model, dtype=torch.int32).numpy().tobytes(),
                                  [_tensor_bytes(w.contiguous()) for w in weights])
    layout = {oid: ser.operands[oid].dim_order is DimOrder.CHANNELS_LAST for oid in range(len(ser.operands))}
    ref = Reference(ref_graph, {}, layout)
    for (_, oid), val in zip(values, probes):
        if isinstance(val, torch.Tensor):
            ref.values[oid] = ref.nnapi_layout(oid, val)
    return ref


def _probe(frozen, graph, values, x) -> list:
    """Run ``graph`` (changing it: it then returns ``values``, a tuple of its tensor values) on ``x``."""
    import torch

    ret = graph.return_node()
    tup = graph.create("prim::TupleConstruct", values)
    tup.output().setType(torch.TupleType([v.type() for v in values]))
    graph.appendNode(tup)
    ret.removeInput(0)
    ret.addInput(tup.output())
    fn = torch._C._create_function_from_graph("torchdroid_probe", graph)
    return list(fn(frozen._c, x))


def _fold_rank_checks(frozen, graph, x) -> Dict[int, Any]:
    """Replace ``len(t.size())`` by the rank ``t`` has on ``x`` and fold what depends on it.

    Scripted models (what `invoke convert` ships as CPU models) keep the ``if len(x.shape) != 4: raise``
    checks of torch's functional and quantized modules, which the NNAPI serializer cannot convert.  Returns the
    tensor values the graph computed on ``x`` to find the ranks, by value id (``Value.unique()``: folding keeps the
    values it leaves, and gives the constants it makes new ids), so they need not be computed again; empty when
    nothing was folded.
    """
    import torch

    if not any(n.kind() == "aten::len" for n in graph.nodes()):
        return {}
    probed = _values(frozen, graph, x)
    for node in list(graph.nodes()):
        if node.kind() != "aten::len":
            continue
        size = node.input().node()
        if size.kind() == "aten::size" and size.inputsSize() == 1 and size.input().unique() in probed:
            with graph.insert_point_guard(node):
                const = graph.insertConstant(probed[size.input().unique()].dim())
            node.output().replaceAllUsesWith(const)
    torch._C._jit_pass_constant_propagation(graph)
    torch._C._jit_pass_dce(graph)
    return probed


def _tensor_values(graph) -> list:
    values = [v for v in graph.inputs() if v.type().kind() == "TensorType"]
    return values + [v for n in graph.nodes() for v in n.outputs() if v.type().kind() == "TensorType"]


def _values(frozen, graph, x) -> Dict[int, Any]:
    """Every tensor value of ``graph`` on ``x`` (run on a copy), by the id (``unique()``) of the value in ``graph``.

    A copy lists its values in the original's order but names an unnamed value by its own numbering, so the
    values are matched by position, not by name."""
    import torch

    probe = graph.copy()
    ids = [v.unique() for v in _tensor_values(graph)]
    computed = _probe(frozen, probe, _tensor_values(probe), x)
    return {i: t for i, t in zip(ids, computed) if isinstance(t, torch.Tensor)}


def _is_frozen(module) -> bool:
    try:
        return not any(n.kind() == "prim::GetAttr" for n in module.graph.nodes())
    except RuntimeError:
        return False


def boundary(graph: Graph, ops: List[int]) -> Tuple[List[int], List[int]]:
    """The operands a contiguous run of operations reads from outside (non-constant) and those it hands out."""
    produced, read = set(), []
    for k in ops:
        op = graph.operations[k]
        for i in op.inputs:
            if i not in produced and graph.operands[i].lifetime not in ("constant", "no_value") and i not in read:
                read.append(i)
        produced.update(op.outputs)
    handed = []
    for o in graph.outputs:  # in the model's output order; through a trailing DEQUANTIZE for quant_core
        if o in produced:
            handed.append(o)
            continue
        outside = next((op for op in graph.operations if o in op.outputs), None)
        handed.extend(i for i in (outside.inputs if outside else ()) if i in produced)
    return read, handed
