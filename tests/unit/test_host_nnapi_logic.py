"""Pure logic of the host NNAPI: fixed-point arithmetic, decoder errors, static checks on hand-built graphs."""

from __future__ import annotations

import struct

import pytest

from host_nnapi import checks
from host_nnapi import nnapi_defs as nn
from host_nnapi.graph import DecodeError, Graph, Operand, Operation, decode_serialized
from host_nnapi.kernels import multiply_by_quantized_multiplier, quantize_multiplier


def test_quantize_multiplier_matches_the_nnapi_reference_values():
    assert quantize_multiplier(0.5) == (1 << 30, 0)
    q, shift = quantize_multiplier(0.0123)
    assert (1 << 30) <= q < (1 << 31) and shift == -6
    assert abs(q / (1 << 31) * 2.0 ** shift - 0.0123) < 1e-9
    assert quantize_multiplier(0.0) == (0, 0)


def test_multiply_by_quantized_multiplier_rounds_half_away_from_zero():
    import torch

    q, shift = quantize_multiplier(0.25)
    x = torch.tensor([6, 2, -2, -6, 7, -7, 0])  # x / 4: 1.5, 0.5, -0.5, -1.5, 1.75, -1.75, 0
    got = multiply_by_quantized_multiplier(x, q, shift).tolist()
    assert got == [2, 1, -1, -2, 2, -2, 0]


def _header(n_operands, n_values, n_ops, n_in, n_out):
    return struct.pack("<6i", 1, n_operands, n_values, n_ops, n_in, n_out)


def test_decoder_reads_a_hand_serialized_relu_model():
    ser = (_header(2, 0, 1, 1, 1) + struct.pack("<iifi", 3, 2, 0.0, 0) * 2 + struct.pack("<iii", 19, 1, 1)
           + struct.pack("<4I", 2, 3, 2, 3) + struct.pack("<2I", 0, 1) + struct.pack("<I", 0) + struct.pack("<I", 1))
    g = decode_serialized(ser, [])
    assert [op.name for op in g.operations] == ["RELU"]
    assert g.operands[0].dims == (2, 3) and g.operands[0].lifetime == "input"
    assert g.operands[1].lifetime == "output"


def test_decoder_names_truncation_and_bad_buffer_references():
    ser = _header(2, 0, 1, 1, 1) + struct.pack("<iifi", 3, 2, 0.0, 0)
    with pytest.raises(DecodeError, match="ends at byte 40 while reading operand 1"):
        decode_serialized(ser, [])
    bad = (_header(1, 1, 0, 0, 0) + struct.pack("<iifi", 4, 1, 0.0, 0) + struct.pack("<iii", 0, 2, 12)
           + struct.pack("<I", 4) + struct.pack("<3I", 3, 0, 16))
    with pytest.raises(DecodeError, match="weight buffer 3 of 0"):
        decode_serialized(bad, [])
    with pytest.raises(DecodeError, match="version 7"):
        decode_serialized(struct.pack("<6i", 7, 0, 0, 0, 0, 0), [])


def _scalar(i, v):
    return Operand(i, nn.INT32, (), 0.0, 0, "constant", struct.pack("<i", v))


def _pool_graph(pads, in_scale=0.1):
    operands = [Operand(0, nn.TENSOR_QUANT8_ASYMM, (1, 4, 4, 2), in_scale, 3, "input")]
    operands += [_scalar(1 + k, v) for k, v in enumerate(list(pads) + [1, 1, 3, 3, 0])]
    operands.append(Operand(10, nn.TENSOR_QUANT8_ASYMM, (1, 4, 4, 2), in_scale, 3, "output"))
    return Graph(operands, [Operation(0, 1, tuple(range(10)), (10,))], [0], [10])


def test_static_checks_flag_padded_average_pooling_and_degenerate_scales():
    found = checks.static_checks(_pool_graph((1, 1, 1, 1), in_scale=1.1920929e-07))
    kinds = {f.check for f in checks.errors(found)}
    assert kinds == {"avg-pool-padding", "degenerate-scale"}
    pad = next(f for f in found if f.check == "avg-pool-padding")
    assert "(1, 1, 1, 1)" in pad.message and "count_include_pad" in pad.message
    fixed = [f for f in found if f.check == "fixed-input-quantization"]
    assert fixed and "zero point 3" in fixed[0].message
    assert not checks.errors(checks.static_checks(_pool_graph((0, 0, 0, 0))))


def test_feature_level_check_names_operations_newer_than_the_target():
    g = _pool_graph((0, 0, 0, 0))
    g.operations.append(Operation(1, nn.OPERATION_CODES["EXPAND_DIMS"], (10, 1), (0,)))
    msgs = [f.message for f in checks.errors(checks.static_checks(g, api_level=28))]
    assert any("EXPAND_DIMS needs API level 29" in m for m in msgs)
    assert not [f for f in checks.static_checks(g, api_level=29) if f.check == "feature-level"]


def test_nnapi_rounding_multiplies_input_and_filter_scales_as_float_like_aosp():
    """AOSP: ``const double input_product_scale = inputShape.scale * filterShape.scale;`` with float scales
    (docs/facts.md V1): the product is rounded to float before it is widened.  For some scales that changes
    the Q31 multiplier, i.e. the integer results."""
    import random
    import struct

    from host_nnapi.graph import Operand
    from host_nnapi.kernels.conv import input_product_scale

    def f32(v):
        return struct.unpack("<f", struct.pack("<f", v))[0]

    rng = random.Random(0)
    for _ in range(10000):
        a, b, out = f32(rng.uniform(1e-3, 0.05)), f32(rng.uniform(1e-3, 0.05)), f32(rng.uniform(1e-3, 0.1))
        if quantize_multiplier(f32(a * b) / out) != quantize_multiplier(a * b / out):
            break
    else:
        raise AssertionError("no pair of scales where the float product changes the multiplier")
    x = Operand(0, 5, (1, 1, 1, 1), a, 0)
    w = Operand(1, 5, (1, 1, 1, 1), b, 0)
    assert input_product_scale(x, w) == f32(a * b) != a * b


def test_a_degenerate_weight_scale_is_a_warning_about_weights_not_a_calibration_error():
    """Only activations blame calibration (error); a weight with a tiny scale is a warning, never a failure."""
    ops = [Operand(0, nn.TENSOR_QUANT8_ASYMM, (1, 4), 0.1, 0, "input"),
           Operand(1, nn.TENSOR_QUANT8_ASYMM, (2, 4), 1e-9, 128, "constant", bytes(8)),
           Operand(2, nn.TENSOR_INT32, (2,), 1e-10, 0, "constant", bytes(8)),
           _scalar(3, 0),
           Operand(4, nn.TENSOR_QUANT8_ASYMM, (1, 2), 0.05, 0, "output")]
    g = Graph(ops, [Operation(0, nn.Op.FULLY_CONNECTED, (0, 1, 2, 3), (4,))], [0], [4])
    found = checks.static_checks(g)
    assert not checks.errors(found)
    (w,) = [f for f in found if f.check == "weight-scale"]
    assert w.severity == "warning" and "weights of operation 0 FULLY_CONNECTED" in w.message
    assert "calibrat" not in w.message.replace("not a calibration problem", "")
    ops[4] = Operand(4, nn.TENSOR_QUANT8_ASYMM, (1, 2), 1e-9, 0, "output")
    (a,) = checks.errors(checks.static_checks(g))
    assert a.check == "degenerate-scale" and "activation" in a.message and "output of operation 0" in a.message
