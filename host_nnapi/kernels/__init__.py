"""Reference kernels for every operation torch's NNAPI serializer emits, one module per family.

:class:`Plan` (in :mod:`.base`) turns a :class:`~host_nnapi.graph.Graph` into one closure per operation; the
families register their builders with ``@_builder(Op.X, ...)`` when imported here.
"""

from __future__ import annotations

from typing import List

from .. import nnapi_defs as nn
from . import conv, elementwise, pool, shape  # noqa: F401 - importing registers the builders
from .base import (_BUILDERS, DEFAULT_ROUNDING, ROUNDING_MODES, BadModel, Plan, constant_tensor, dequantize,
                   multiply_by_quantized_multiplier, quantize, quantize_multiplier, torch_dtype)


def supported_operations() -> List[str]:
    return sorted(nn.op_name(c) for c in _BUILDERS)


__all__ = ["DEFAULT_ROUNDING", "ROUNDING_MODES", "BadModel", "Plan", "constant_tensor", "dequantize",
           "multiply_by_quantized_multiplier", "quantize", "quantize_multiplier", "torch_dtype", "supported_operations"]
