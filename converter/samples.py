"""Calibration samples as the legacy lane passes them to a model: an image tensor, or the tuple of a declared model's
``forward`` arguments (token ids, audio, several tensors; converter/calibration.declared_samples), each made the
argument tuple by toolchain.records.program_args, the one place that says how a sample becomes arguments."""

from __future__ import annotations

from typing import Any, Tuple

from toolchain.records import program_args

CALIBRATION_CHUNK = 16  # calibration inputs per call (stacked along the batch), in both formats' calibration


def stacked(samples) -> Tuple[Any, ...]:
    """Samples of batch 1 joined along the batch dimension, argument by argument: one call for all of them."""
    import torch

    columns = zip(*(program_args(x) for x in samples))
    return tuple(torch.cat(list(column), 0) for column in columns)


def nhwc(t):
    """An image-like 4-D input (float or quantized) made channels-last and flagged for the NNAPI converter; any
    other input (token ids, audio, a 2-D or 3-D tensor) is left as it is (the converter presumes it contiguous)."""
    import torch

    if isinstance(t, (tuple, list)):
        return tuple(nhwc(x) for x in t)
    if t.dim() != 4 or not (t.is_floating_point() or t.is_quantized):
        return t
    t = t.contiguous(memory_format=torch.channels_last)
    t.nnapi_nhwc = True
    return t
