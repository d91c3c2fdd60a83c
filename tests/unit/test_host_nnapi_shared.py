"""verify's shared operation results (host_nnapi/kernels/shared.py): an operation on the same bytes is computed
once inside a block, never shared across different constants or inputs, and an output that views an input's
memory is kept as a copy of its own."""

from __future__ import annotations

import struct

import pytest

torch = pytest.importorskip("torch")

from host_nnapi import nnapi_defs as nn  # noqa: E402
from host_nnapi.graph import Graph, Operand, Operation  # noqa: E402
from host_nnapi.kernels import Plan  # noqa: E402
from host_nnapi.kernels.shared import shared_results  # noqa: E402


def _graph(weight_bytes=bytes([130, 120, 140, 128, 100, 160, 128, 129])) -> Graph:
    """FULLY_CONNECTED (quant8) then RESHAPE [1, 2] -> [2, 1]."""
    ops = [Operand(0, nn.TENSOR_QUANT8_ASYMM, (1, 4), 0.1, 0, "input"),
           Operand(1, nn.TENSOR_QUANT8_ASYMM, (2, 4), 0.05, 128, "constant", weight_bytes),
           Operand(2, nn.TENSOR_INT32, (2,), 0.005, 0, "constant", struct.pack("<2i", 7, -3)),
           Operand(3, nn.INT32, (), 0.0, 0, "constant", struct.pack("<i", 0)),
           Operand(4, nn.TENSOR_QUANT8_ASYMM, (1, 2), 0.05, 10, "temporary"),
           Operand(5, nn.TENSOR_INT32, (2,), 0.0, 0, "constant", struct.pack("<2i", 2, 1)),
           Operand(6, nn.TENSOR_QUANT8_ASYMM, (2, 1), 0.05, 10, "output")]
    return Graph(ops, [Operation(0, nn.Op.FULLY_CONNECTED, (0, 1, 2, 3), (4,)),
                       Operation(1, nn.Op.RESHAPE, (4, 5), (6,))], [0], [6])


def _reshape_graph() -> Graph:
    ops = [Operand(0, nn.TENSOR_QUANT8_ASYMM, (1, 4), 0.1, 0, "input"),
           Operand(1, nn.TENSOR_INT32, (2,), 0.0, 0, "constant", struct.pack("<2i", 2, 2)),
           Operand(2, nn.TENSOR_QUANT8_ASYMM, (2, 2), 0.1, 0, "output")]
    return Graph(ops, [Operation(0, nn.Op.RESHAPE, (0, 1), (2,))], [0], [2])


X = torch.tensor([[3, 40, 7, 255]], dtype=torch.uint8)


def test_the_same_operations_on_the_same_bytes_are_computed_once_in_a_block():
    (alone,) = Plan(_graph(), "qnnpack").run([X.clone()])
    with shared_results() as stats:
        (first,) = Plan(_graph(), "qnnpack").run([X.clone()])
        assert (stats.hits, stats.misses) == (0, 2)
        (again,) = Plan(_graph(), "nnapi").run([X.clone()])  # another rounding is another operation
        assert (stats.hits, stats.misses) == (0, 4)
        (second,) = Plan(_graph(), "qnnpack").run([X.clone()])  # another plan of an identical graph
        assert (stats.hits, stats.misses) == (2, 4)
    assert torch.equal(first, alone) and torch.equal(second, alone)


def test_other_inputs_or_other_constants_are_never_shared():
    other = X.clone()
    other[0, 3] = 0
    heavier = bytes([250, 120, 140, 128, 100, 160, 128, 129])
    (base,) = Plan(_graph(), "qnnpack").run([X.clone()])
    (want_input,) = Plan(_graph(), "qnnpack").run([other])
    (want_weights,) = Plan(_graph(heavier), "qnnpack").run([X.clone()])
    assert not torch.equal(want_input, base) and not torch.equal(want_weights, base)
    with shared_results() as stats:
        Plan(_graph(), "qnnpack").run([X.clone()])
        (got_input,) = Plan(_graph(), "qnnpack").run([other.clone()])
        (got_weights,) = Plan(_graph(heavier), "qnnpack").run([X.clone()])
        assert stats.hits == 0
    assert torch.equal(got_input, want_input) and torch.equal(got_weights, want_weights)


def test_an_output_viewing_an_input_buffer_is_kept_as_its_own_copy():
    """An execution's input is a view of the caller's buffer, which the caller reuses afterwards."""
    buffer = X.clone()
    with shared_results() as stats:
        (first,) = Plan(_reshape_graph(), "qnnpack").run([buffer])
        buffer.fill_(9)  # the buffer is reused for another execution
        (second,) = Plan(_reshape_graph(), "qnnpack").run([X.clone()])
        assert stats.hits == 1
    assert torch.equal(second, X.reshape(2, 2))


def test_outside_a_block_nothing_is_kept():
    with shared_results() as stats:
        pass
    Plan(_graph(), "qnnpack").run([X.clone()])
    Plan(_graph(), "qnnpack").run([X.clone()])
    assert (stats.hits, stats.misses) == (0, 0)
