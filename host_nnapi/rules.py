"""verify's decision rules: fixed LSB bounds per rounding mode, each with its reason (docs/host-nnapi.md).

None of them depends on how peaked the model's scores are (random weights give flat logits, where top-k
agreement says little); top-k agreement is judged only on the calibrated (bundled) inputs, as a last net.
"""

from __future__ import annotations

from typing import Optional

from .nnapi_defs import Op

# One operation run on the CPU model's own input values, output compared with the CPU model's output.
# qnnpack rounding reproduces PyTorch's quantized CPU kernels bit for bit for these operations
# (tests/integration/test_host_nnapi_ops.py: EXACT), so any difference is a conversion bug.
OP_LSB_BOUND = {"qnnpack": 0, "nnapi": 1}
# Documented exceptions under qnnpack: operations whose PyTorch kernel rounds through float or uses
# QNNPACK's pooling requantization, which the host kernels reproduce to within 1 LSB.
QNNPACK_INEXACT_OPS = {Op.AVERAGE_POOL_2D: 1, Op.LOGISTIC: 1, Op.SOFTMAX: 1, Op.MEAN: 1, Op.PRELU: 1,
                       Op.CONCATENATION: 1, Op.QUANTIZE: 1}

# End to end, the shipped model on torch's NNAPI runtime against the CPU model's own conversion on the
# same host kernels and rounding: the same arithmetic on the same data, so 0 in every mode.
E2E_LSB_BOUND_VS_REFERENCE = 0
# End to end against the CPU model: 0 under qnnpack rounding (the kernels are the CPU's); 2 when the model
# contains an operation of QNNPACK_INEXACT_OPS (documented exception).  Not judged under nnapi rounding:
# NNAPI's Q31 requantization differs from QNNPACK's float requantization by up to 1 LSB per operation, and
# that drift accumulates (32 LSB measured on MobileNetV2 with random weights) -- the per-operation bound
# and the 0-LSB comparison with the reference conversion decide there.
E2E_LSB_BOUND_VS_CPU = {"qnnpack": 0, "nnapi": None}
E2E_INEXACT_BOUND = 2

# An operation's float reference (dequantize the CPU model's inputs, compute in float, quantize with the
# CPU model's output parameters) is within 1 LSB of any correct integer kernel (one rounding of the
# requantization multiplier); 2 leaves one LSB for float32 summation order.  A CPU output further than
# this from the float reference, while the NNAPI output is within it, is a CPU kernel bug.
FLOAT_REFERENCE_LSB = 2


def op_bound(op_type: int, rounding: str, nnapi_bound: int = OP_LSB_BOUND["nnapi"]) -> int:
    """Per-operation bound; under nnapi rounding the configurable ``verify.max_lsb`` (default 1)."""
    if rounding == "qnnpack":
        return QNNPACK_INEXACT_OPS.get(op_type, 0)
    return nnapi_bound


def e2e_bound_vs_cpu(rounding: str, op_types) -> Optional[int]:
    bound = E2E_LSB_BOUND_VS_CPU[rounding]
    if bound is not None and any(t in QNNPACK_INEXACT_OPS for t in op_types):
        return E2E_INEXACT_BOUND
    return bound
