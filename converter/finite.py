"""NaN and infinity are refused before any file is written: in a model's weights (parameters and buffers) and in
what it outputs on torchdroid's input.  Shared by both lanes (the legacy TorchScript/NNAPI modes and ExecuTorch)."""

from __future__ import annotations

from typing import Any, List, Tuple

from toolchain.errors import ConversionError


def _bad(t) -> Tuple[int, int]:
    """(NaN count, infinity count) of a floating tensor (quantized: of its dequantized values)."""
    import torch

    if t.is_quantized:
        t = t.dequantize()
    if not torch.is_floating_point(t):
        return 0, 0
    return int(torch.isnan(t).sum()), int(torch.isinf(t).sum())


def _counts(nan: int, inf: int) -> str:
    return ", ".join(x for x in (f"{nan} NaN" if nan else "", f"{inf} infinite" if inf else "") if x)


def non_finite_weights(model) -> List[Tuple[str, int, int]]:
    """(name, NaN count, infinity count) of every parameter or buffer holding a NaN or an infinity."""
    found = []
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        nan, inf = _bad(t.detach())
        if nan or inf:
            found.append((name, nan, inf))
    return found


def _tensors(name: str, value: Any):
    """(name, tensor) of a state_dict entry: a tensor, or the (weight, bias, ...) tuple of packed parameters."""
    import torch

    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _tensors(f"{name}[{i}]", item)


def non_finite_state(model) -> List[Tuple[str, int, int]]:
    """The same for a quantized model, whose weights live in packed parameters and scales (its state_dict)."""
    found = []
    for key, value in model.state_dict().items():
        for name, t in _tensors(key, value):
            nan, inf = _bad(t.detach())
            if nan or inf:
                found.append((name, nan, inf))
    return found


def refuse_non_finite_weights(model, label: str, origin: str, quantized: bool = False) -> None:
    """A ConversionError naming the tensors that hold NaN or infinity (the weights as loaded, before any work);
    ``quantized``: the model's state_dict is searched (packed weights, biases and scales)."""
    found = non_finite_state(model) if quantized else non_finite_weights(model)
    if not found:
        return
    shown = "; ".join(f"{name} ({_counts(nan, inf)})" for name, nan, inf in found[:4])
    more = f"; and {len(found) - 4} more" if len(found) > 4 else ""
    raise ConversionError(
        f"{label}'s weights hold NaN or infinite values ({origin} weights): nothing was converted",
        cause=f"{shown}{more}: every output they reach is NaN or infinite, on any backend",
        remedy="fix the weights (a diverged training run or a damaged checkpoint gives these); "
        "pass trained, finite weights with --weights PATH",
    )


def output_tensors(y) -> List[Any]:
    """A model's output(s) as a flat list of tensors (tuples/lists/dict values flattened, None dropped)."""
    import torch

    if isinstance(y, dict):
        y = list(y.values())
    if isinstance(y, (list, tuple)):
        return [t for item in y for t in output_tensors(item)]
    return [y] if isinstance(y, torch.Tensor) else []


def refuse_non_finite_output(y, label: str, what: str) -> None:
    """A ConversionError when any output tensor of ``y`` holds NaN or infinity."""
    bad = [(i, *_bad(t)) for i, t in enumerate(output_tensors(y))]
    bad = [b for b in bad if b[1] or b[2]]
    if not bad:
        return
    shown = "; ".join(f"output #{i} ({_counts(nan, inf)})" for i, nan, inf in bad[:4])
    raise ConversionError(
        f"{label} gives NaN or infinite outputs on {what}: nothing of it is recorded",
        cause=f"{shown}: an overflow in the model (or its quantization), or weights out of range",
        remedy="check the weights (--weights) and the model's forward() on a 224x224 image; a float model that "
        "overflows needs its layers scaled (e.g. a normalisation) before it can be converted",
    )
