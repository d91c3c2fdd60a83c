"""Pre-quantized weights for quant_core/quant_full (``--quantized-weights``), instead of calibrating here.

The PyTorch NNAPI tutorial builds its quantized models with ``mobilenet_v2(pretrained=True, quantize=True)``:
torchvision's QNNPACK weights, quantized elsewhere, downloaded once.  ``--quantized-weights pretrained`` does the
same (torch hub cache); ``--quantized-weights PATH`` reads a ``state_dict()`` of such a quantized model; the
default, ``calibrate``, quantizes here with the calibration images (converter/export.py ``quantize``).

The weights are loaded into the model's own quantized structure (fused, qnnpack qconfig, prepared and converted
without data), strictly: every tensor must be there and fit.  NNAPI needs per-tensor quantized weights, so a
state_dict quantized per channel (fbgemm/x86 qconfigs) is refused, and so is a float state_dict.  All of it
happens before the first file is written.

The parsing at the top is torch-free (bad input fails in milliseconds); the loading imports torch.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Optional

from toolchain.errors import ConversionError, UsageError
from toolchain.fsutil import sha256_file

from .finite import refuse_non_finite_weights
from .models import ModelSpec, WeightsSpec

log = logging.getLogger(__name__)

CALIBRATE = "calibrate"
PRETRAINED = "pretrained"
# NNAPI's quantized operands carry one scale and zero point per tensor
PER_TENSOR = ("per_tensor_affine", "per_tensor_symmetric")



def parse_quantized_weights(value: Optional[str], spec: ModelSpec) -> Optional[WeightsSpec]:
    """``--quantized-weights``: None to calibrate here, else where the pre-quantized state_dict comes from."""
    text = (value or CALIBRATE).strip()
    if text == CALIBRATE:
        return None
    if text == PRETRAINED:
        if spec.source != "torchvision":
            raise UsageError(
                "--quantized-weights pretrained only applies to torchvision models",
                cause=f"{spec.name} is your own factory: torchvision has no pre-quantized weights for it",
                remedy="pass --quantized-weights path/to/quantized_state_dict.pth, or leave it at 'calibrate'",
            )
        return WeightsSpec(PRETRAINED)
    path = Path(text).expanduser()
    if not path.is_file():
        raise UsageError(
            f"--quantized-weights {text!r} is neither 'calibrate', 'pretrained' nor an existing file",
            remedy="use --quantized-weights calibrate (quantize here, the default), pretrained (torchvision's "
                   "QNNPACK weights, as the tutorial's quantize=True) or path/to/quantized_state_dict.pth",
        )
    return WeightsSpec("file", path.resolve(), sha256_file(path))


def record_of(qweights: WeightsSpec, enum: Any = None) -> Dict[str, Any]:
    """What the manifest says about the quantized modes' weights."""
    if qweights.origin == PRETRAINED:
        return {"origin": PRETRAINED, "tag": str(enum), "url": getattr(enum, "url", None),
                "note": "torchvision's pre-quantized weights (as the tutorial's quantize=True): not calibrated here"}
    return {"origin": "file", "path": str(qweights.path), "sha256": qweights.sha256,
            "note": "a pre-quantized state_dict: not calibrated here"}


def pretrained_quantized_enum(spec: ModelSpec):
    """torchvision's QNNPACK weights of ``spec`` (refused when torchvision has only per-channel fbgemm ones)."""
    import torchvision.models as tvm

    try:
        enums = list(tvm.get_model_weights(f"quantized_{spec.name}"))
    except (ValueError, KeyError) as e:
        raise UsageError(f"torchvision has no pre-quantized weights for {spec.name}", cause=str(e),
                         remedy="leave --quantized-weights at 'calibrate'") from e
    qnnpack = [w for w in enums if w.meta.get("backend") == "qnnpack"]
    if not qnnpack:
        backends = ", ".join(sorted({str(w.meta.get("backend")) for w in enums}))
        raise UsageError(
            f"torchvision's pre-quantized weights for {spec.name} are for {backends}, not qnnpack",
            cause="those are quantized per channel; NNAPI needs per-tensor quantized weights (qnnpack)",
            remedy="leave --quantized-weights at 'calibrate' (torchdroid quantizes with the qnnpack qconfig)",
        )
    return qnnpack[0]


def load_prequantized(float_model, qweights: WeightsSpec, spec: ModelSpec):
    """The quantized model with the pre-quantized weights loaded; ``(model, record)``."""
    from .models import _download_state_dict, _load_file

    enum = None
    if qweights.origin == PRETRAINED:
        enum = pretrained_quantized_enum(spec)
        state = _download_state_dict(enum, "or pass --quantized-weights path/to/quantized_state_dict.pth; or "
                                           "--quantized-weights calibrate to quantize here")
        origin = f"torchvision {enum}"
    else:
        state, origin = _load_file(qweights.path), str(qweights.path)
    _check_quantized(state, origin)  # before the structure is built: a float file is named at once
    model = quantized_structure(float_model)
    want = set(model.state_dict())
    missing, unexpected = sorted(want - set(state)), sorted(set(state) - want)
    if missing or unexpected:
        raise _misfit(origin, spec, "; ".join(
            f"{what} {len(keys)} key(s): {', '.join(keys[:3])}{' …' if len(keys) > 3 else ''}"
            for what, keys in (("missing", missing), ("unexpected", unexpected)) if keys))
    try:
        model.load_state_dict(state, strict=True)
    except (RuntimeError, KeyError, ValueError, TypeError) as e:  # shapes, dtypes, packed parameters
        raise _misfit(origin, spec, "; ".join(line.strip() for line in str(e).splitlines()[:3])) from e
    _check_per_tensor(model, origin)
    refuse_non_finite_weights(model, spec.stem, f"quantized, {origin}", quantized=True)
    return model, record_of(qweights, enum)


def _misfit(origin: str, spec: ModelSpec, cause: str) -> ConversionError:
    return ConversionError(
        f"the quantized weights from {origin} do not fit {spec.name}'s quantized model",
        cause=cause,
        remedy="save them from the same architecture quantized with the qnnpack qconfig "
               "(model.state_dict() after torch.ao.quantization.convert), or leave --quantized-weights at 'calibrate'",
    )


def quantized_structure(float_model):
    """The model's quantized modules (fuse, qnnpack qconfig, prepare, convert) with no data seen: the weights come
    from a state_dict.  Observers that never ran would warn when converted: they are silenced here."""
    import warnings

    import torch

    from .export import prepared_for_qnnpack

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = prepared_for_qnnpack(float_model)
        torch.ao.quantization.convert(model, inplace=True)
    return model


def _check_quantized(state: Dict[str, Any], origin: str) -> None:
    """A float state_dict given as quantized weights is named as such, not as a list of missing keys."""
    import torch

    tensors = [v for v in state.values() if isinstance(v, torch.Tensor)]
    if tensors and not any(t.is_quantized for t in tensors) and not any(k.endswith("_packed_params") for k in state):
        raise UsageError(
            f"{origin} holds float weights, not quantized ones",
            cause="none of its tensors is quantized: it is the state_dict of a float model",
            remedy="pass it as --weights PATH and leave --quantized-weights at 'calibrate' (torchdroid quantizes it)",
        )


def _check_per_tensor(model, origin: str) -> None:
    """Every quantized weight must have one scale per tensor: NNAPI has no per-channel quint8 operands."""
    for name, mod in model.named_modules():
        weight = getattr(mod, "weight", None)
        w = weight() if callable(weight) else None
        if w is None or not getattr(w, "is_quantized", False):
            continue
        scheme = str(w.qscheme()).replace("torch.", "")
        if scheme not in PER_TENSOR:
            raise ConversionError(
                f"the quantized weights from {origin} are quantized {scheme.replace('_', ' ')} ({name})",
                cause="NNAPI's quantized operands have one scale per tensor; per-channel weights come from the "
                      "fbgemm/x86 qconfigs",
                remedy="quantize with the qnnpack qconfig (torch.ao.quantization.get_default_qconfig('qnnpack')), "
                       "or leave --quantized-weights at 'calibrate'",
            )
