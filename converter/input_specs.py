"""Inputs declared on the command line: ``--inputs "int64[1,16]@0:1000;float32[1,1,16000]"``.

The same thing as a factory's ``<factory>_example_inputs()`` (docs/convert.md), written as text: one
``DTYPE[d0,d1,...]`` per ``forward`` argument, ``;`` between them, each with an optional ``@LO:HI`` value range.
:func:`sampler` turns them into an example-inputs function, so calibration, the reference inputs and the host
checks take exactly the path a declared function takes.  No torch at import time (checked before any work).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from toolchain.errors import UsageError

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)
INT_DEFAULT_RANGE = (0, 2)  # ids/masks with no @LO:HI: 0 and 1, which any embedding table takes
EXAMPLE = "int64[1,16]@0:1000;float32[1,1,16000]"

_ITEM = re.compile(r"^(?P<dtype>[a-z0-9]+)\[(?P<dims>[^\]]*)\](?:@(?P<lo>[^:]*):(?P<hi>.*))?$")


@dataclass(frozen=True)
class InputSpec:
    """One ``forward`` argument: its dtype, shape (batch 1 first) and optional value range ``[low, high)``."""

    dtype: str
    shape: Tuple[int, ...]
    low: Optional[float] = None
    high: Optional[float] = None

    def text(self) -> str:
        rng = f"@{_num(self.low)}:{_num(self.high)}" if self.low is not None else ""
        return f"{self.dtype}[{','.join(str(d) for d in self.shape)}]{rng}"

    def sample(self, generator=None):
        """A random tensor of this spec: floats standard-normal (uniform in a given range), integers uniform in
        ``[low, high)`` (:data:`INT_DEFAULT_RANGE` when none is given), bools 0/1."""
        import torch

        dtype = getattr(torch, self.dtype)
        if self.dtype in FLOAT_DTYPES:
            if self.low is None:
                return torch.randn(self.shape, generator=generator).to(dtype)
            return (torch.rand(self.shape, generator=generator) * (self.high - self.low) + self.low).to(dtype)
        low, high = (INT_DEFAULT_RANGE if self.low is None else (int(self.low), int(self.high)))
        return torch.randint(low, high, self.shape, generator=generator).to(dtype)


def _num(x: Optional[float]) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else str(x)


def inputs_text(specs: Tuple[InputSpec, ...]) -> str:
    """The canonical text of parsed inputs (what the manifest and the rebuild key record)."""
    return ";".join(s.text() for s in specs)


def parse_inputs(value: Optional[str]) -> Tuple[InputSpec, ...]:
    """``--inputs`` parsed, or ``()`` when not given; a UsageError (exit 2) naming the bad item otherwise."""
    text = (value or "").strip()
    if not text:
        return ()
    return tuple(_parse_item(item.strip(), text) for item in text.split(";"))


def _usage(item: str, cause: str) -> UsageError:
    return UsageError(f"--inputs (config convert.inputs): cannot read {item!r}", cause=cause,
                      remedy=f"write one DTYPE[1,d1,...] per forward() argument, ';' between them, each with an "
                             f"optional @LO:HI value range, e.g. --inputs \"{EXAMPLE}\"")


def _parse_item(item: str, whole: str) -> InputSpec:
    m = _ITEM.match(item.replace(" ", ""))
    if not item or m is None:
        raise _usage(item or whole, "expected DTYPE[d0,d1,...] (and optionally @LO:HI)")
    dtype = m["dtype"]
    if dtype not in DTYPES:
        raise _usage(item, f"unknown dtype {dtype!r}; the dtypes are {', '.join(DTYPES)}")
    shape = _dims(m["dims"], item)
    low, high = _range(m["lo"], m["hi"], item, dtype)
    return InputSpec(dtype, shape, low, high)


def _dims(text: str, item: str) -> Tuple[int, ...]:
    parts = [p for p in text.split(",")]
    if not text or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise _usage(item, "the shape must be positive whole numbers separated by commas, e.g. [1,16]")
    shape = tuple(int(p) for p in parts)
    if shape[0] != 1:
        raise _usage(item, f"the first dimension is the batch, which must be 1 (the model is called as "
                           f"model(*inputs) on one example), not {shape[0]}")
    return shape


def _range(lo: Optional[str], hi: Optional[str], item: str, dtype: str) -> Tuple[Optional[float], Optional[float]]:
    if lo is None:
        return None, None
    try:
        low, high = float(lo), float(hi)
    except ValueError:
        raise _usage(item, f"the value range @{lo}:{hi} is not two numbers") from None
    if dtype not in FLOAT_DTYPES and not (low.is_integer() and high.is_integer()):
        raise _usage(item, f"{dtype} takes a whole-number range, not @{lo}:{hi}")
    if dtype == "bool" or not high > low:
        raise _usage(item, "bool takes no range" if dtype == "bool" else f"the range @{lo}:{hi} is empty (LO < HI)")
    return low, high


def sampler(specs: Tuple[InputSpec, ...]) -> Callable[[], Tuple]:
    """An example-inputs function for ``specs``: called under ``torch.manual_seed`` as a declared one is."""

    def example_inputs():
        return tuple(s.sample() for s in specs)

    example_inputs.__name__ = "--inputs"  # what the records call it (the function's name for a declared one)
    return example_inputs
