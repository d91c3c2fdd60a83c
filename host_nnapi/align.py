"""Align the shipped NNAPI model with the CPU model's own conversion, and list where they differ.

The shipped model of quant_core starts after the quantize step and ends before the dequantize step, so its
operations are a contiguous run inside the reference conversion; for quant_none and quant_full the two are
the same length.  Operations are matched by (type, number of inputs, number of outputs); operands by
position in the matched operations.  Every difference is attributed to the first shipped operation that
touches the operand, so verify can name it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

from .graph import Graph, Operand, f32
from .reference import boundary


@dataclass(frozen=True)
class Difference:
    operation: int  # index in the shipped model (-1: the model as a whole)
    name: str  # "operation 3 CONV_2D"
    what: str

    def describe(self) -> str:
        return f"{self.name}: {self.what}"

    def to_dict(self) -> Dict:
        return asdict(self)


@dataclass
class Alignment:
    offset: int = 0  # shipped operation k is reference operation offset + k
    operands: Dict[int, int] = field(default_factory=dict)  # shipped operand -> reference operand
    differences: List[Difference] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def _sig(op):
    return op.type, len(op.inputs), len(op.outputs)


def _label(graph: Graph, k: int) -> str:
    return f"operation {k} {graph.operations[k].name}" if 0 <= k < len(graph.operations) else "the model"


def align(shipped: Graph, ref: Graph) -> Alignment:
    """Find the run of reference operations the shipped model is, and map its operands."""
    n, m = len(shipped.operations), len(ref.operations)
    offset, matched = _best_offset(shipped, ref)
    out = Alignment(offset)
    if matched < n or n == 0:
        k = min(matched, max(n - 1, 0))
        got = shipped.operations[k].name if n else "nothing"
        want = ref.operations[offset + k].name if offset + k < m else "no further operation"
        out.differences.append(Difference(k if n else -1, _label(shipped, k),
                                          f"the shipped model has {got} ({n} operations) where the CPU model's "
                                          f"conversion has {want} ({m} operations): the graph structure differs"))
        return out
    for k, op in enumerate(shipped.operations):
        rop = ref.operations[offset + k]
        for s, r in list(zip(op.inputs, rop.inputs)) + list(zip(op.outputs, rop.outputs)):
            if out.operands.setdefault(s, r) != r:
                out.differences.append(Difference(k, _label(shipped, k),
                                                  f"operand #{s} is wired to another value than in the CPU model"))
                return out
    _check_io(shipped, ref, out)
    return out


def _best_offset(shipped: Graph, ref: Graph):
    n, m = len(shipped.operations), len(ref.operations)
    best = (0, -1)
    for off in range(0, max(m - n, 0) + 1):
        k = 0
        while k < n and off + k < m and _sig(shipped.operations[k]) == _sig(ref.operations[off + k]):
            k += 1
        if k > best[1]:
            best = (off, k)
        if k == n:
            break
    return best[0], max(best[1], 0)


def _check_io(shipped: Graph, ref: Graph, out: Alignment) -> None:
    read, handed = boundary(ref, list(range(out.offset, out.offset + len(shipped.operations))))
    got_in = [out.operands.get(i) for i in shipped.inputs]
    got_out = [out.operands.get(i) for i in shipped.outputs]
    if sorted(x for x in got_in if x is not None) != sorted(read) or None in got_in:
        first = _first_reader(shipped, shipped.inputs)
        out.differences.append(Difference(first, _label(shipped, first),
                                          "the model inputs are not the values the CPU model feeds these operations"))
    if got_out != handed or None in got_out:
        last = _producer(shipped, shipped.outputs[0]) if shipped.outputs else -1
        out.differences.append(Difference(last, _label(shipped, last),
                                          "the model outputs are not the values the CPU model returns"))


def _first_reader(g: Graph, operands) -> int:
    wanted = set(operands)
    return next((op.index for op in g.operations if wanted & set(op.inputs)), -1)


def _producer(g: Graph, operand: int) -> int:
    return next((op.index for op in g.operations if operand in op.outputs), -1)


def compare_operands(shipped: Graph, ref: Graph, al: Alignment) -> List[Difference]:
    """Type, shape, quantization and constant bytes of every aligned operand; the first shipped user named."""
    seen, out = set(), []
    for k, op in enumerate(shipped.operations):
        for s in list(op.inputs) + list(op.outputs):
            if s in seen or s not in al.operands:
                continue
            seen.add(s)
            what = operand_difference(shipped.operands[s], ref.operands[al.operands[s]])
            if what:
                out.append(Difference(k, _label(shipped, k), what))
    return out


def operand_difference(a: Operand, b: Operand) -> Optional[str]:
    """Why shipped operand ``a`` is not the CPU model's operand ``b`` (None when they are the same)."""
    role = "constant" if b.lifetime == "constant" else "operand"
    head = f"{role} {a.describe()}"
    if a.type != b.type:
        return f"{head} has type {a.type_name}; the CPU model's is {b.type_name}"
    if tuple(a.dims) != tuple(b.dims):
        return f"{head} has shape {list(a.dims)}; the CPU model's is {list(b.dims)}"
    if (a.is_quant or a.scale or b.scale) and (f32(a.scale) != f32(b.scale) or a.zero_point != b.zero_point):
        return (f"{head} has scale {a.scale:.9g} / zero point {a.zero_point}; the CPU model's are "
                f"{b.scale:.9g} / {b.zero_point}")
    if (a.lifetime == "constant") != (b.lifetime == "constant"):
        return f"{head} is {'a constant' if a.lifetime == 'constant' else 'computed'} in the shipped model only"
    if a.lifetime == "constant" and a.value != b.value:
        return f"{head} holds other values than the CPU model's ({_value_difference(a, b)})"
    return None


def _value_difference(a: Operand, b: Operand) -> str:
    if a.is_scalar:
        try:
            return f"{a.scalar()} instead of {b.scalar()}"
        except ValueError:
            return "a different scalar"
    va, vb = a.value or b"", b.value or b""
    changed = sum(1 for x, y in zip(va, vb) if x != y) + abs(len(va) - len(vb))
    return f"{changed} of {max(len(va), len(vb))} bytes differ"


def interface_differences(nnapi_module, shipped: Graph, channels_last: Dict[int, bool], al: Alignment) -> List[Difference]:
    """The NnapiModule's memory formats (how torch hands inputs to NNAPI and takes outputs back) against the
    dimension order of the CPU model's operands: 1 = NHWC (channels_last), 0 = contiguous, 2 = as is."""
    out = []
    for what, fmts, ids in (("input", "inp_mem_fmts", shipped.inputs), ("output", "out_mem_fmts", shipped.outputs)):
        got = list(getattr(nnapi_module, fmts, []) or [])
        for k, s in enumerate(ids):
            if k >= len(got) or s not in al.operands:
                continue
            want_nhwc = bool(channels_last.get(al.operands[s]))
            if (got[k] == 1) != want_nhwc:
                op = _first_reader(shipped, [s]) if what == "input" else _producer(shipped, s)
                out.append(Difference(op, _label(shipped, op),
                                      f"the NNAPI module passes {what} {k} in memory format {got[k]} "
                                      f"({'NHWC' if got[k] == 1 else 'as is'}); the operand is "
                                      f"{'NHWC' if want_nhwc else 'not NHWC'} in the CPU model's conversion"))
    return out
