"""verify's reference (host_nnapi/reference.py): the CPU model's values come from the one probe that folds its rank
checks, and they are exactly what probing the folded graph again gives, operand by operand."""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")

from host_nnapi import reference as R  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from host_nnapi_support import models as M  # noqa: E402


def _scripted_quantized_cpu_model():
    """Like a shipped quant_full CPU model: scripted (so it keeps the ``len(x.shape)`` checks), quint8 in."""
    body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1))
    example = torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    core, qin = M.quantized_core(body, example)
    return torch.jit.script(core).eval(), qin


def test_the_reference_values_are_the_folded_graphs_own_values_from_one_probe(monkeypatch):
    with M.qengine("qnnpack"):
        cpu, qin = _scripted_quantized_cpu_model()
        assert any(n.kind() == "aten::len" for n in torch.jit.freeze(cpu).graph.nodes())
        probes = []
        real_probe = R._probe
        monkeypatch.setattr(R, "_probe", lambda *a: probes.append(1) or real_probe(*a))
        ref = R.build_reference(cpu, qin, channels_last_input=True)
        assert len(probes) == 1  # the rank probe; its values are reused, not computed again
        monkeypatch.setattr(R, "_probe", real_probe)

        # the values the serializer's operands have when the folded graph is probed on its own
        from torch.backends._nnapi.serializer import _NnapiSerializer

        frozen = torch.jit.freeze(cpu.eval())
        graph = frozen.graph.copy()
        x = M.nhwc(qin.clone())
        R._fold_rank_checks(frozen, graph, x)
        ser = _NnapiSerializer(None)
        ser.serialize_model(R._Proxy(frozen, graph), [x])
        values = [(v, oid) for v, oid in ser.jitval_operand_map.items() if v.type().kind() == "TensorType"]
        again = R._probe(frozen, graph, [v for v, _ in values], x)
    want = {oid: ref.nnapi_layout(oid, t) for (_, oid), t in zip(values, again) if isinstance(t, torch.Tensor)}
    assert want and set(want) == set(ref.values)
    for oid, t in want.items():
        assert torch.equal(ref.values[oid], t), oid


def test_the_probe_returns_every_tensor_value_as_one_tuple_typed_by_its_values():
    """_probe makes the graph return its values as a tuple typed with torch's public TupleType."""
    frozen = torch.jit.freeze(torch.jit.script(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())).eval())
    graph = frozen.graph.copy()
    values = R._tensor_values(graph)
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
    got = R._probe(frozen, graph, values, x)
    assert graph.return_node().input().type() == torch.TupleType([v.type() for v in values])
    assert len(got) == len(values) >= 3 and torch.equal(got[0], x) and torch.equal(got[-1], frozen(x))
