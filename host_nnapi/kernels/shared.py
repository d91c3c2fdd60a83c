"""Operations computed once per verify run: identical operations on identical bytes share their output.

verify runs the same computation many times over: the CPU model's own conversion (the reference) is usually
the shipped NNAPI model operation for operation, and it runs on the same inputs right after the shipped
model; quant_core's NNAPI model is quant_full's between a QUANTIZE and a DEQUANTIZE, on the same bytes; the
operation-by-operation comparison feeds many operations the values the shipped model already gave them.  An
operation's output depends only on what its key covers (operation type, every operand's type, shape,
quantization and constant bytes, the rounding) and on its input tensors (dtype, shape, strides and bytes),
so inside :func:`shared_results` a step whose key and inputs were seen before takes that output instead of
computing it again.  Only verify opens such a block, for one run; nothing is kept across runs and no timing
ever goes through it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, List, Optional, Tuple

LIMIT_BYTES = 768 * 2**20  # outputs kept per block (oldest dropped first): MobileNetV2's runs need far less


@dataclass
class Stats:
    hits: int = 0
    misses: int = 0


@dataclass
class _Results:
    limit: int
    entries: "OrderedDict[bytes, Tuple[List[Any], int]]" = field(default_factory=OrderedDict)
    size: int = 0
    stats: Stats = field(default_factory=Stats)

    def get(self, key: bytes) -> Optional[List[Any]]:
        found = self.entries.get(key)
        if found is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        return found[0]

    def put(self, key: bytes, outputs: List[Any]) -> None:
        nbytes = sum(t.nelement() * t.element_size() for t in outputs)
        if nbytes > self.limit:
            return
        self.entries[key] = (outputs, nbytes)
        self.size += nbytes
        while self.size > self.limit:
            _, (_, dropped) = self.entries.popitem(last=False)
            self.size -= dropped


_active: Optional[_Results] = None


@contextlib.contextmanager
def shared_results(limit: int = LIMIT_BYTES) -> Iterator[Stats]:
    """Within the block, identical operations on identical inputs are computed once (yields the hit counts)."""
    global _active
    outer, _active = _active, _Results(limit)
    try:
        yield _active.stats
    finally:
        _active = outer


def operation_key(graph, op, rounding: str) -> bytes:
    """Everything a step's builder reads: the operation, each operand it touches (constants with their bytes) and
    the rounding."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{op.type}|{rounding}|{len(op.inputs)}|{len(op.outputs)}".encode())
    for role, ids in (("in", op.inputs), ("out", op.outputs)):
        for i in ids:
            o = graph.operands[i]
            constant = o.lifetime == "constant"
            h.update(f"|{role}:{o.type}:{tuple(o.dims)}:{o.scale!r}:{o.zero_point}:{o.lifetime if constant else '-'}:"
                     f"{len(o.value) if constant and o.value is not None else -1}".encode())
            if constant and o.value:
                h.update(o.value)
    return h.digest()


def _tensor_digest(h, t) -> None:
    h.update(f"|{t.dtype}:{tuple(t.shape)}:{tuple(t.stride())}".encode())
    h.update(memoryview(t.detach().contiguous().numpy()).cast("B"))


def _storage(t) -> int:
    return t.untyped_storage().data_ptr()


def memoized(step: Callable[[list], None], key: Callable[[], bytes], inputs: Tuple[int, ...],
             outputs: Tuple[int, ...]) -> Callable[[list], None]:
    """``step`` answering from the open :func:`shared_results` block when it saw the same key and input bytes.

    ``inputs``: the environment slots the step reads at run time (constants are in the key already)."""

    def run(env: list) -> None:
        results = _active
        if results is None:
            step(env)
            return
        h = hashlib.blake2b(key(), digest_size=20)
        read = []
        for i in inputs:
            t = env[i]
            if t is None:
                h.update(b"|none")
                continue
            _tensor_digest(h, t)
            read.append(t)
        digest = h.digest()
        found = results.get(digest)
        if found is not None:
            for slot, value in zip(outputs, found):
                env[slot] = value
            return
        step(env)
        if any(env[o] is None for o in outputs):
            return
        shared = {_storage(t) for t in read}
        # an output viewing an input's memory (a reshape of an execution's buffer) is kept as a copy of its own
        results.put(digest, [env[o].clone() if _storage(env[o]) in shared else env[o] for o in outputs])

    return run
