"""NNAPI constants the host NNAPI and its checks use (values from the public NeuralNetworks.h)."""

from __future__ import annotations

import enum

# Result codes
NO_ERROR = 0
OUT_OF_MEMORY = 1
INCOMPLETE = 2
UNEXPECTED_NULL = 3
BAD_DATA = 4
OP_FAILED = 5
BAD_STATE = 6
UNMAPPABLE = 7
OUTPUT_INSUFFICIENT_SIZE = 8
UNAVAILABLE_DEVICE = 9
RESULT_NAMES = {0: "NO_ERROR", 1: "OUT_OF_MEMORY", 2: "INCOMPLETE", 3: "UNEXPECTED_NULL", 4: "BAD_DATA",
                5: "OP_FAILED", 6: "BAD_STATE", 7: "UNMAPPABLE", 8: "OUTPUT_INSUFFICIENT_SIZE", 9: "UNAVAILABLE_DEVICE"}

# Operand types
FLOAT32 = 0
INT32 = 1
UINT32 = 2
TENSOR_FLOAT32 = 3
TENSOR_INT32 = 4
TENSOR_QUANT8_ASYMM = 5
BOOL = 6
TENSOR_QUANT16_SYMM = 7
TENSOR_FLOAT16 = 8
TENSOR_BOOL8 = 9
FLOAT16 = 10
TENSOR_QUANT8_SYMM_PER_CHANNEL = 11
TENSOR_QUANT16_ASYMM = 12

OPERAND_NAMES = {
    0: "FLOAT32", 1: "INT32", 2: "UINT32", 3: "TENSOR_FLOAT32", 4: "TENSOR_INT32", 5: "TENSOR_QUANT8_ASYMM",
    6: "BOOL", 7: "TENSOR_QUANT16_SYMM", 8: "TENSOR_FLOAT16", 9: "TENSOR_BOOL8", 10: "FLOAT16",
    11: "TENSOR_QUANT8_SYMM_PER_CHANNEL", 12: "TENSOR_QUANT16_ASYMM",
}
SCALAR_TYPES = (FLOAT32, INT32, UINT32, BOOL, FLOAT16)
QUANT_TYPES = (TENSOR_QUANT8_ASYMM, TENSOR_QUANT16_SYMM, TENSOR_QUANT16_ASYMM)
# API level that introduced each operand type (27 = Android 8.1, NNAPI 1.0).
OPERAND_API_LEVEL = {0: 27, 1: 27, 2: 27, 3: 27, 4: 27, 5: 27, 6: 29, 7: 29, 8: 29, 9: 29, 10: 29, 11: 29, 12: 29}

# Operations (only the names; the full list is in NeuralNetworks.h)
OPERATION_NAMES = {
    0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D", 5: "DEPTH_TO_SPACE",
    6: "DEQUANTIZE", 7: "EMBEDDING_LOOKUP", 8: "FLOOR", 9: "FULLY_CONNECTED", 10: "HASHTABLE_LOOKUP",
    11: "L2_NORMALIZATION", 12: "L2_POOL_2D", 13: "LOCAL_RESPONSE_NORMALIZATION", 14: "LOGISTIC",
    15: "LSH_PROJECTION", 16: "LSTM", 17: "MAX_POOL_2D", 18: "MUL", 19: "RELU", 20: "RELU1", 21: "RELU6",
    22: "RESHAPE", 23: "RESIZE_BILINEAR", 24: "RNN", 25: "SOFTMAX", 26: "SPACE_TO_DEPTH", 27: "SVDF", 28: "TANH",
    29: "BATCH_TO_SPACE_ND", 30: "DIV", 31: "MEAN", 32: "PAD", 33: "SPACE_TO_BATCH_ND", 34: "SQUEEZE",
    35: "STRIDED_SLICE", 36: "SUB", 37: "TRANSPOSE", 38: "ABS", 39: "ARGMAX", 40: "ARGMIN", 45: "CAST",
    50: "EXPAND_DIMS", 55: "GROUPED_CONV_2D", 64: "LOG_SOFTMAX", 65: "MAXIMUM", 66: "MINIMUM", 69: "PAD_V2",
    71: "PRELU", 72: "QUANTIZE", 91: "TRANSPOSE_CONV_2D", 94: "RESIZE_NEAREST_NEIGHBOR",
}
OPERATION_CODES = {v: k for k, v in OPERATION_NAMES.items()}
Op = enum.IntEnum("Op", OPERATION_CODES)  # named operation codes: Op.CONV_2D == 3


def operation_api_level(code: int) -> int:
    """API level that introduced an operation: 0-28 Android 8.1 (27), 29-37 Android 9 (28), 38-94 Android 10 (29)."""
    if code <= 28:
        return 27
    if code <= 37:
        return 28
    if code <= 94:
        return 29
    return 30


# Fused activations
FUSED_NONE, FUSED_RELU, FUSED_RELU1, FUSED_RELU6 = 0, 1, 2, 3


# The torchdroid side channel between host_nn.c and runtime.py (host_nn.h: TDNN_*).
EXECUTOR_PREPARE, EXECUTOR_COMPUTE, EXECUTOR_RELEASE = 1, 2, 3
LIFETIME_NAMES = {0: "temporary", 1: "input", 2: "output", 3: "constant", 4: "no_value"}  # TDNN_TEMPORARY ... TDNN_NO_VALUE

# tests/unit/test_host_nnapi_contract.py reads host_nn.h and host_nn.c and checks that every value above
# (result codes, operand types, operation codes and names, executor kinds, lifetimes) agrees with the C side.


def op_name(code: int) -> str:
    return OPERATION_NAMES.get(code, f"OP_{code}")


def type_name(code: int) -> str:
    return OPERAND_NAMES.get(code, f"TYPE_{code}")
