"""An NNAPI model as data, and the decoder of torch's serialized NNAPI model.

The same :class:`Graph` is built two ways: from the ``ser_model`` tensor and
weights inside a ``*-nnapi.pt`` file (:func:`decode_serialized`, for static
checks and layer-by-layer comparison), and from the model the C library was
given through the NNAPI calls (``runtime._graph_from_library``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import nnapi_defs as nn


class DecodeError(ValueError):
    """The serialized model is malformed (named offset and reason)."""


@dataclass
class Operand:
    index: int
    type: int
    dims: Tuple[int, ...]
    scale: float
    zero_point: int
    lifetime: str = "temporary"
    value: Optional[bytes] = None  # constants only

    @property
    def type_name(self) -> str:
        return nn.type_name(self.type)

    @property
    def is_scalar(self) -> bool:
        return self.type in nn.SCALAR_TYPES

    @property
    def is_quant(self) -> bool:
        return self.type in nn.QUANT_TYPES

    def describe(self) -> str:
        q = f" scale={self.scale:.6g} zp={self.zero_point}" if self.is_quant or (self.type == nn.TENSOR_INT32 and self.scale) else ""
        shape = "" if self.is_scalar else "[" + ",".join(map(str, self.dims)) + "]"
        return f"#{self.index} {self.type_name}{shape}{q}"

    def scalar(self) -> Any:
        """The value of a constant scalar (int, float or bool)."""
        if self.value is None:
            raise DecodeError(f"operand #{self.index} has no constant value")
        if self.type == nn.FLOAT32:
            return struct.unpack("<f", self.value[:4])[0]
        if self.type in (nn.INT32, nn.UINT32):
            return struct.unpack("<i" if self.type == nn.INT32 else "<I", self.value[:4])[0]
        if self.type == nn.BOOL:
            return bool(self.value[0])
        raise DecodeError(f"operand #{self.index} ({self.type_name}) is not a scalar")

    def ints(self) -> List[int]:
        """The value of a constant TENSOR_INT32 as a list."""
        if self.value is None:
            raise DecodeError(f"operand #{self.index} has no constant value")
        n = len(self.value) // 4
        return list(struct.unpack(f"<{n}i", self.value[: 4 * n]))


@dataclass
class Operation:
    index: int
    type: int
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]

    @property
    def name(self) -> str:
        return nn.op_name(self.type)


@dataclass
class Graph:
    operands: List[Operand]
    operations: List[Operation]
    inputs: List[int]
    outputs: List[int]
    notes: List[str] = field(default_factory=list)

    def operation_summary(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for op in self.operations:
            out[op.name] = out.get(op.name, 0) + 1
        return out

    def operand_type_summary(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for o in self.operands:
            out[o.type_name] = out.get(o.type_name, 0) + 1
        return out


class _Reader:
    """Sequential little-endian reads of the serialized model, with the offset in every error."""

    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def take(self, fmt: str, what: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise DecodeError(f"serialized model ends at byte {len(self.buf)} while reading {what} at byte {self.pos}")
        vals = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return vals

    def chunk(self, length: int, what: str) -> bytes:
        phys = length if length % 4 == 0 else length + 4 - length % 4  # values are padded to 4 bytes
        if self.pos + phys > len(self.buf):
            raise DecodeError(f"{what} runs past the end of the serialized model")
        data = self.buf[self.pos:self.pos + length]
        self.pos += phys
        return data


def f32(x: float) -> float:
    """``x`` as the float32 an NNAPI operand stores (its scale): what two scales are compared as."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def decode_serialized(ser_model: bytes, weights: Sequence[bytes]) -> Graph:
    """Decode torch's serialized NNAPI model (format of torch/backends/_nnapi/serializer.py).

    ``ser_model`` is the raw bytes of the int32 ``ser_model`` tensor; ``weights``
    the raw bytes of each parameter buffer (``NnapiModule.weights``), in order.
    """
    r = _Reader(bytes(ser_model))
    counts = _header(r)
    n_operands, n_values, n_operations, n_inputs, n_outputs = counts
    raw_operands = [r.take("<iifi", f"operand {i}") for i in range(n_operands)]
    raw_values = [r.take("<iii", f"value {i}") for i in range(n_values)]
    raw_operations = [r.take("<iii", f"operation {i}") for i in range(n_operations)]
    operands = []
    for i, (t, rank, scale, zp) in enumerate(raw_operands):
        dims = r.take(f"<{rank}I", f"dimensions of operand {i}") if rank else ()
        operands.append(Operand(i, t, tuple(dims), scale, zp))
    for vi, (index, source, length) in enumerate(raw_values):
        _attach_value(operands, vi, index, source, r.chunk(length, f"value {vi}"), weights)
    operations = [_operation(r, k, t, n_in, n_out, n_operands) for k, (t, n_in, n_out) in enumerate(raw_operations)]
    inputs = _io(r, n_inputs, "model inputs", operands, "input")
    outputs = _io(r, n_outputs, "model outputs", operands, "output")
    g = Graph(operands, operations, inputs, outputs)
    if r.pos != len(r.buf):
        g.notes.append(f"{len(r.buf) - r.pos} trailing bytes after the serialized model")
    return g


def _header(r: _Reader) -> Tuple[int, ...]:
    version, *counts = r.take("<6i", "the header")
    if version != 1:
        raise DecodeError(f"serialized model version {version}; this decoder reads version 1")
    for name, n in zip(("operand", "value", "operation", "input", "output"), counts):
        if not 0 <= n < (1 << 24):
            raise DecodeError(f"implausible {name} count {n}")
    return tuple(counts)


def _attach_value(operands: List[Operand], vi: int, index: int, source: int, data: bytes,
                  weights: Sequence[bytes]) -> None:
    if not 0 <= index < len(operands):
        raise DecodeError(f"value {vi} refers to operand {index} of {len(operands)}")
    if source == 0:  # immediate
        operands[index].value = data
    elif source == 2:  # numbered buffer
        if len(data) != 12:
            raise DecodeError(f"value {vi}: a numbered-buffer reference has 12 bytes, not {len(data)}")
        num, offset, size = struct.unpack("<3I", data)
        if num >= len(weights):
            raise DecodeError(f"value {vi} refers to weight buffer {num} of {len(weights)}")
        w = weights[num]
        if offset + size > len(w):
            raise DecodeError(f"value {vi} reads bytes {offset}..{offset + size} of a {len(w)}-byte weight buffer")
        operands[index].value = bytes(w[offset:offset + size])
    else:
        raise DecodeError(f"value {vi} has source type {source} (memory sources are not produced by torch)")
    operands[index].lifetime = "constant"


def _operation(r: _Reader, k: int, t: int, n_in: int, n_out: int, n_operands: int) -> Operation:
    if n_in < 0 or n_out < 0:
        raise DecodeError(f"operation {k} ({nn.op_name(t)}) has {n_in} inputs and {n_out} outputs")
    args = r.take(f"<{n_in + n_out}I", f"arguments of operation {k}")
    for a in args:
        if a >= n_operands:
            raise DecodeError(f"operation {k} ({nn.op_name(t)}) refers to operand {a} of {n_operands}")
    return Operation(k, t, tuple(args[:n_in]), tuple(args[n_in:]))


def _io(r: _Reader, n: int, what: str, operands: List[Operand], lifetime: str) -> List[int]:
    ids = list(r.take(f"<{n}I", what))
    for i in ids:
        if i >= len(operands):
            raise DecodeError(f"{what} refer to operand {i} of {len(operands)}")
        operands[i].lifetime = lifetime
    return ids


def find_nnapi_module(scripted) -> Any:
    """The NnapiModule inside a converted TorchScript model (the one holding ``ser_model``)."""
    stack = [scripted]
    while stack:
        m = stack.pop()
        if hasattr(m, "ser_model") and hasattr(m, "weights"):
            return m
        stack.extend(child for _, child in m.named_children())
    return None


def decode_module(scripted) -> Graph:
    """Decode the NNAPI model inside a converted TorchScript module (``torch.jit.load`` result)."""
    mod = find_nnapi_module(scripted)
    if mod is None:
        raise DecodeError("no NNAPI module (with ser_model and weights) inside this TorchScript model")
    ser = mod.ser_model
    weights = [w.contiguous() for w in mod.weights]
    return decode_serialized(_tensor_bytes(ser), [_tensor_bytes(w) for w in weights])


def _tensor_bytes(t) -> bytes:
    import torch

    t = t.contiguous()
    if t.is_quantized:
        t = t.int_repr()
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
