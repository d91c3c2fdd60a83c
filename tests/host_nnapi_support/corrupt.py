"""Corrupt a shipped ``*-nnapi.pt`` file the way a buggy converter would, and re-record it in the manifest.

The serialized NNAPI model (torch/backends/_nnapi/serializer.py, version 1) is parsed here on its own,
independently of host_nnapi.graph, down to the byte offset of every field, so a corruption patches exactly
one field: an operand's scale or zero point, its dimensions, an immediate scalar, one element of a weight
buffer, or an operation's operand list.  ``save()`` writes the file back and updates its sha256 and size
in manifest.json, as a converter that wrote a wrong model would have recorded it.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

from toolchain.fsutil import sha256_file

QUANT8 = 5
INT32_TENSOR = 4
FLOAT_TENSOR = 3


@dataclass
class Operand:
    index: int
    type: int
    rank: int
    record: int  # byte offset of (type, rank, scale, zero point)
    dims_at: int = -1
    dims: Tuple[int, ...] = ()
    source: Optional[int] = None  # 0 immediate, 2 numbered buffer
    data_at: int = -1  # immediate: byte offset in ser_model
    length: int = 0
    buffer: Tuple[int, int, int] = (-1, 0, 0)  # numbered buffer: (number, offset, size)

    @property
    def scale_at(self) -> int:
        return self.record + 8

    @property
    def zero_point_at(self) -> int:
        return self.record + 12


@dataclass
class Operation:
    index: int
    type: int
    args_at: int
    inputs: List[int] = field(default_factory=list)
    outputs: List[int] = field(default_factory=list)


class ShippedNnapi:
    """One shipped NNAPI file opened for corruption."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.module = torch.jit.load(str(self.path), map_location="cpu")
        self.nnapi = _find(self.module)
        self.ser = bytearray(self.nnapi.ser_model.contiguous().numpy().tobytes())
        self.weights = [w.clone() for w in self.nnapi.weights]
        self.operands: List[Operand] = []
        self.operations: List[Operation] = []
        self.inputs: List[int] = []
        self.outputs: List[int] = []
        self._parse()

    # ------------------------------------------------------------------ parsing

    def _parse(self) -> None:
        version, n_opd, n_val, n_ops, n_in, n_out = struct.unpack_from("<6i", self.ser, 0)
        assert version == 1
        pos = 24
        for i in range(n_opd):
            t, rank, _, _ = struct.unpack_from("<iifi", self.ser, pos)
            self.operands.append(Operand(i, t, rank, pos))
            pos += 16
        values = []
        for _ in range(n_val):
            values.append(struct.unpack_from("<iii", self.ser, pos))
            pos += 12
        for k in range(n_ops):
            t, a, b = struct.unpack_from("<iii", self.ser, pos)
            self.operations.append(Operation(k, t, -1, [a, b]))  # counts for now
            pos += 12
        for o in self.operands:
            o.dims_at = pos
            o.dims = struct.unpack_from(f"<{o.rank}I", self.ser, pos) if o.rank else ()
            pos += 4 * o.rank
        for index, source, length in values:
            o = self.operands[index]
            o.source, o.data_at, o.length = source, pos, length
            if source == 2:
                o.buffer = struct.unpack_from("<3I", self.ser, pos)
            pos += length if length % 4 == 0 else length + 4 - length % 4
        for op in self.operations:
            n_i, n_o = op.inputs
            op.args_at = pos
            args = struct.unpack_from(f"<{n_i + n_o}I", self.ser, pos)
            op.inputs, op.outputs = list(args[:n_i]), list(args[n_i:])
            pos += 4 * (n_i + n_o)
        self.inputs = list(struct.unpack_from(f"<{n_in}I", self.ser, pos))
        pos += 4 * n_in
        self.outputs = list(struct.unpack_from(f"<{n_out}I", self.ser, pos))

    # ------------------------------------------------------------------ queries

    def producer(self, operand: int) -> Operation:
        return next(op for op in self.operations if operand in op.outputs)

    def first_reader(self, operand: int) -> Operation:
        return next(op for op in self.operations if operand in op.inputs)

    def ops_of(self, op_type: int) -> List[Operation]:
        return [op for op in self.operations if op.type == op_type]

    def scale(self, i: int) -> float:
        return struct.unpack_from("<f", self.ser, self.operands[i].scale_at)[0]

    def zero_point(self, i: int) -> int:
        return struct.unpack_from("<i", self.ser, self.operands[i].zero_point_at)[0]

    def middle_activation(self) -> int:
        """A quantized or float activation produced near the middle of the model (not a model output)."""
        ops = self.operations
        for op in ops[len(ops) // 2:] + ops[: len(ops) // 2]:
            o = op.outputs[0]
            if o not in self.outputs and self.operands[o].type in (QUANT8, FLOAT_TENSOR) and self.operands[o].rank:
                return o
        raise AssertionError("no middle activation")

    # ------------------------------------------------------------------ corruptions

    def set_scale(self, i: int, value: float) -> None:
        struct.pack_into("<f", self.ser, self.operands[i].scale_at, value)

    def set_zero_point(self, i: int, value: int) -> None:
        struct.pack_into("<i", self.ser, self.operands[i].zero_point_at, value)

    def set_dims(self, i: int, dims) -> None:
        o = self.operands[i]
        assert len(dims) == o.rank
        struct.pack_into(f"<{o.rank}I", self.ser, o.dims_at, *dims)

    def set_immediate_int(self, i: int, value: int) -> None:
        o = self.operands[i]
        assert o.source == 0 and o.length == 4
        struct.pack_into("<i", self.ser, o.data_at, value)

    def flip_immediate_bool(self, i: int) -> None:
        o = self.operands[i]
        assert o.source == 0 and o.length == 1
        self.ser[o.data_at] ^= 1

    def immediate(self, i: int):
        o = self.operands[i]
        return struct.unpack_from("<i" if o.length == 4 else "<B", self.ser, o.data_at)[0]

    def set_operation_input(self, op: Operation, k: int, operand: int) -> None:
        struct.pack_into("<I", self.ser, op.args_at + 4 * k, operand)
        op.inputs[k] = operand

    def move_weight(self, i: int, element: int, delta: float) -> None:
        """Add ``delta`` (quanta for quantized weights, real value for float ones) to one weight element."""
        o = self.operands[i]
        num, offset, size = o.buffer
        assert o.source == 2, f"operand {i} is not a weight buffer"
        w = self.weights[num]
        raw = (w.int_repr() if w.is_quantized else w).contiguous().clone()
        flat = raw.view(torch.uint8).view(-1)[offset:offset + size].view(_dtype_of(o.type))
        if o.type == QUANT8:
            old = int(flat[element])
            new = old + int(delta) if 0 <= old + int(delta) <= 255 else old - int(delta)
            flat[element] = new
        else:
            flat[element] += delta
        self.weights[num] = _like(w, raw)

    def set_memory_format(self, which: str, k: int, value: int) -> None:
        """``which``: "inp" or "out"; 0 contiguous, 1 NHWC (how torch hands tensors to and from NNAPI)."""
        attr = f"{which}_mem_fmts"
        fmts = list(getattr(self.nnapi, attr))
        fmts[k] = value
        setattr(self.nnapi, attr, fmts)

    def set_relaxed(self) -> None:
        self.nnapi.relax_f32_to_f16 = True

    def quantize_step(self):
        """quant_core: the Quantize module in front of the NNAPI model."""
        return next(m for _, m in self.module.named_modules() if m.original_name == "Quantize")

    # ------------------------------------------------------------------ writing

    def save(self, manifest_dir: Optional[Path] = None, record: bool = True) -> None:
        self.nnapi.ser_model = torch.frombuffer(bytearray(self.ser), dtype=torch.int32).clone()
        self.nnapi.weights = self.weights
        self.module.save(str(self.path))
        if record:
            rerecord(Path(manifest_dir or self.path.parent), self.path.name)


def _dtype_of(t: int):
    return {QUANT8: torch.uint8, INT32_TENSOR: torch.int32, FLOAT_TENSOR: torch.float32}[t]


def _like(w, raw):
    if not w.is_quantized:
        return raw
    return torch._make_per_tensor_quantized_tensor(raw, w.q_scale(), w.q_zero_point())


def _find(module):
    from host_nnapi.graph import find_nnapi_module

    found = find_nnapi_module(module)
    assert found is not None, "no NNAPI module"
    return found


def rerecord(models: Path, name: str) -> None:
    """Update the manifest entry of ``name`` to the file's current sha256 and size."""
    path = models / "manifest.json"
    data = json.loads(path.read_text())
    for e in data["files"]:
        if e["file"] == name:
            e["sha256"] = sha256_file(models / name)
            e["size"] = (models / name).stat().st_size
    path.write_text(json.dumps(data, indent=2))


def operation_label(op: Operation) -> str:
    from host_nnapi.nnapi_defs import op_name

    return f"operation {op.index} {op_name(op.type)}"


Corruption = Dict[str, object]
