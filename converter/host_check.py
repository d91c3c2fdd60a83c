"""The host check of converted models: load each saved CPU model back, run it, compare modes (torch)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from toolchain.errors import ConversionError
from toolchain.records import TensorSpec

from .finite import output_tensors, refuse_non_finite_output
from .samples import nhwc, stacked

log = logging.getLogger(__name__)


def spec_of(t: torch.Tensor) -> TensorSpec:
    quantized = t.is_quantized
    fmt = "channels_last" if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous() else "contiguous"
    return TensorSpec(
        shape=list(t.shape),
        dtype=str(t.dtype).replace("torch.", ""),
        memory_format=fmt,
        scale=float(t.q_scale()) if quantized else None,
        zero_point=int(t.q_zero_point()) if quantized else None,
    )


def as_float(t: torch.Tensor) -> torch.Tensor:
    return t.dequantize() if t.is_quantized else t


@dataclass
class Checked:
    """A saved CPU model loaded back and run on its bundled input."""

    record: Dict[str, Any]  # file, mode, output_shape, output_dtype, constant, ms, output_spec
    module: Any = field(repr=False, default=None)
    output: Any = field(repr=False, default=None)  # the first output tensor on the bundled input


def _first_line(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


def host_check(path: Path, mode: str) -> Checked:
    """Load the saved CPU model back and run it on its bundled input; refuse a constant output."""
    try:
        m = torch.jit.load(str(path), map_location="cpu")
        inputs = m.get_all_bundled_inputs() if hasattr(m, "get_all_bundled_inputs") else m.run_method("get_all_bundled_inputs")
        t0 = time.perf_counter()
        with torch.no_grad(), torch.jit.optimized_execution(False):
            y = m(*inputs[0])
        ms = (time.perf_counter() - t0) * 1000.0
    except Exception as e:
        raise ConversionError(
            f"the saved CPU model {path.name} does not run on this machine",
            cause=_first_line(e),
            remedy="to see why, run with --debug (the traceback is in the run's log) and report it; the model is "
                   "not kept",
        ) from e
    outputs = output_tensors(y)
    if not outputs:
        raise ConversionError(f"the saved CPU model {path.name} returns no tensor",
                              remedy="return a tensor or a tuple of tensors from forward()")
    refuse_non_finite_output(outputs, f"the saved CPU model {path.name}", "its bundled input")
    y = outputs[0]  # the manifest describes the first output; `invoke verify` compares all of them
    yf = torch.cat([as_float(t).flatten().to(torch.float32) for t in outputs])
    if bool((yf.max() - yf.min()).abs().item() == 0.0):
        raise ConversionError(
            f"the saved CPU model {path.name} gives a constant output on its bundled input",
            cause="every output element is equal: the model (or its quantization) has collapsed",
            remedy="check the weights (--weights) and the calibration images (--calibration)",
        )
    s = spec_of(y)
    return Checked({"file": path.name, "mode": mode, "output_shape": list(y.shape), "output_dtype": s.dtype,
                    "constant": False, "ms": ms, "output_spec": s.to_dict()}, m, y)


def _first(y) -> torch.Tensor:
    return output_tensors(y)[0]


def is_logits(t: torch.Tensor) -> bool:
    """Whether an output reads as classification logits, ``[N, classes]``: where top-1 applies."""
    return t.dim() == 2 and t.shape[1] > 1


def predict(module, batch, qparams: Optional[Dict[str, Any]] = None) -> Optional[List[int]]:
    """Top-1 per row of ``batch`` (a tensor, or a tuple of one per ``forward`` argument); one batched call (per-row
    calls when a traced model fixed the batch size).  None when the first output is not ``[N, classes]`` (a feature
    map, boxes...): top-1 does not apply to it.  ``qparams``: quant_full's input quantization as its manifest entry
    records it (``core_quantization``: ``input``, and ``inputs`` per argument for several), applied first."""
    batch = tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)
    if qparams:
        per = qparams.get("inputs") or [qparams.get("input")]
        batch = tuple(t if q is None else torch.quantize_per_tensor(t, q["scale"], q["zero_point"], torch.quint8)
                      for t, q in zip(batch, list(per) + [None] * len(batch)))
    with torch.no_grad(), torch.jit.optimized_execution(False):  # a few calls: no profiling warm-up
        try:
            rows = [as_float(_first(module(*batch)))]
        except RuntimeError:
            rows = [as_float(_first(module(*(t[i:i + 1] for t in batch)))) for i in range(batch[0].shape[0])]
    if not all(is_logits(y) for y in rows):
        return None
    return [int(i) for y in rows for i in y.argmax(dim=1)]


class Agreement:
    """Top-1 agreement of quant_core/quant_full with the float model on the calibration inputs.

    The float model's predictions come from calibration itself (observers pass values through), so no
    extra forward pass and no quant_none file are needed.
    """

    def __init__(self, batch: List[Any]):
        self.stacked = nhwc(stacked(batch))  # image inputs channels-last, as the models were traced
        self._reference: Optional[List[int]] = None

    def set_reference(self, float_top1: List[int]) -> None:
        self._reference = list(float_top1)

    def measure(self, module, qparams: Optional[Dict[str, Any]]) -> Optional[Dict[str, int]]:
        if self._reference is None:
            return None
        pred = predict(module, self.stacked, qparams)
        if pred is None:  # not classification logits: no top-1 to agree on
            return None
        return {"agree": sum(int(a == b) for a, b in zip(pred, self._reference)), "total": len(self._reference)}
