"""host_nnapi's C <-> Python contract: the constants in host_nn.h / host_nn.c and in nnapi_defs.py agree.

Read from the C sources as text (no compiler needed), so a value changed on one side only fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from host_nnapi import nnapi_defs as nn
from host_nnapi.kernels import supported_operations

CSRC = Path(__file__).resolve().parents[2] / "host_nnapi" / "csrc"
HEADER = (CSRC / "host_nn.h").read_text()
SOURCE = (CSRC / "host_nn.c").read_text()


def _enum(prefix: str, text: str = HEADER) -> dict:
    return {name: int(value) for name, value in re.findall(rf"\b{prefix}(\w+)\s*=\s*(\d+)", text)}


def test_result_codes_agree():
    c = _enum("ANEURALNETWORKS_")
    results = {k: v for k, v in c.items() if k in nn.RESULT_NAMES.values()}
    assert results == {name: code for code, name in nn.RESULT_NAMES.items()}
    for name in ("NO_ERROR", "BAD_DATA", "OP_FAILED", "BAD_STATE", "OUTPUT_INSUFFICIENT_SIZE"):
        assert getattr(nn, name) == c[name]


def test_operand_types_agree():
    c = _enum("ANEURALNETWORKS_")
    types = {k: v for k, v in c.items() if k in nn.OPERAND_NAMES.values()}
    assert types == {name: code for code, name in nn.OPERAND_NAMES.items()}


def test_the_operation_table_agrees_with_the_python_names_and_kernels():
    table = re.search(r"static const OpSig OPS\[\] = \{(.*?)\n\};", SOURCE, re.S).group(1)
    ops = {int(code): name for code, name in re.findall(r"\{(\d+),\s*\"(\w+)\"", table)}
    assert ops, "the OPS table was not found in host_nn.c"
    for code, name in ops.items():
        assert nn.OPERATION_NAMES[code] == name
        assert nn.Op[name] == code
    assert sorted(ops.values()) == supported_operations()  # every validated operation has a kernel, and back


def test_executor_kinds_and_lifetimes_agree():
    kinds = _enum("TDNN_")
    assert (kinds["PREPARE"], kinds["COMPUTE"], kinds["RELEASE"]) == (
        nn.EXECUTOR_PREPARE, nn.EXECUTOR_COMPUTE, nn.EXECUTOR_RELEASE)
    lifetimes = {"TEMPORARY": "temporary", "MODEL_INPUT": "input", "MODEL_OUTPUT": "output", "CONSTANT": "constant",
                 "NO_VALUE": "no_value"}
    assert {kinds[k]: v for k, v in lifetimes.items()} == nn.LIFETIME_NAMES


def test_the_checks_can_fail():
    """The parser really reads values: a changed copy of the header disagrees."""
    changed = HEADER.replace("ANEURALNETWORKS_BAD_DATA = 4", "ANEURALNETWORKS_BAD_DATA = 40")
    assert _enum("ANEURALNETWORKS_", changed)["BAD_DATA"] != nn.BAD_DATA
