"""One quantization mode of one model -> a CPU and an NNAPI TorchScript model.

This is the PyTorch NNAPI tutorial's flow (trace the core with an NHWC input
flagged ``nnapi_nhwc``, convert with ``convert_model_to_nnapi``, wrap core mode
in quant/dequant, bundle inputs), made to run on current torch: quantization is
done here (fuse, qnnpack qconfig, calibrate, convert) instead of downloading a
pre-quantized model, degenerate calibration is refused, and the XNNPACK-less
wheels are handled explicitly.
"""

from __future__ import annotations

import copy
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from toolchain.errors import ConversionError
from toolchain.fsutil import atomic_path

log = logging.getLogger(__name__)

FLOAT_FLOOR = 1.2e-7  # torch.finfo(torch.float32).eps: the smallest scale an observer returns


@dataclass
class ExportedVariant:
    mode: str
    cpu_path: Path
    nnapi_path: Path
    cpu_input: Any  # the bundled input tensors
    nnapi_input: Any
    cpu_export: str  # "script" | "trace"
    mobile_optimized: bool
    core_qparams: Optional[Dict[str, Any]] = None
    notes: List[str] = field(default_factory=list)


def xnnpack_available() -> bool:
    import torch

    probe = getattr(torch._C, "_is_xnnpack_enabled", None)
    return bool(probe()) if probe else False


def _replace_dropout(model) -> None:
    import torch

    for name, child in list(model.named_children()):
        if isinstance(child, torch.nn.Dropout):
            setattr(model, name, torch.nn.Identity())
        else:
            _replace_dropout(child)


def _quantizable(model):
    """Eager-mode quantization needs quant/dequant stubs; wrap a plain module."""
    import torch

    if hasattr(model, "quant") and hasattr(model, "dequant"):
        return model
    return torch.ao.quantization.QuantWrapper(model)


def quantize(float_model, calibration: List[Any], label: str):
    """Fuse, qnnpack qconfig, calibrate, convert; refuse degenerate calibration."""
    import torch

    torch.backends.quantized.engine = "qnnpack"
    model = fused_float(_quantizable(copy.deepcopy(float_model)), copy_model=False)
    model.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    torch.ao.quantization.prepare(model, inplace=True)
    with torch.no_grad():
        for x in calibration:
            model(x)
    degenerate = degenerate_observers(model)
    if degenerate:
        shown = ", ".join(f"{n} (range {lo:.3g}..{hi:.3g})" for n, lo, hi in degenerate[:4])
        more = f" and {len(degenerate) - 4} more" if len(degenerate) > 4 else ""
        raise ConversionError(
            f"quantization of {label} is degenerate: {len(degenerate)} activation(s) saw a constant value during calibration",
            cause=f"{shown}{more}: their scale would sit at the float floor and the quantized model would output "
            "constants (this is what untrained weights with an all-zero input give)",
            remedy="calibrate with real images (--calibration DIR) or the built-in synthetic set (leave --calibration "
            "out), and use trained weights (--weights pretrained or PATH) for meaningful results",
        )
    torch.ao.quantization.convert(model, inplace=True)
    return model


def degenerate_observers(model) -> List[tuple]:
    """(module name, min, max) of every activation observer whose range collapsed."""
    out = []
    for name, mod in model.named_modules():
        obs = getattr(mod, "activation_post_process", None)
        if obs is None or not hasattr(obs, "min_val"):
            continue
        lo, hi = float(obs.min_val), float(obs.max_val)
        if lo == float("inf") or hi == float("-inf"):
            continue  # never ran (branch not taken): not our business
        scale = float(obs.calculate_qparams()[0].flatten()[0])
        if hi - lo <= FLOAT_FLOOR * 8 or scale <= FLOAT_FLOOR * 1.01:
            out.append((name or "<input>", lo, hi))
    return out


def _nnapi_error(e: Exception, label: str) -> ConversionError:
    text = str(e)
    m = re.search(r"Unsupported node kind \('([^']+)'\) in node (.*)", text, re.S)
    if m:
        op, node = m.group(1), m.group(2).strip()
        where = re.search(r"#\s*(\S+:\d+:\d+)", node)
        location = f"at {where.group(1)}" if where else "in the traced graph"
        return ConversionError(
            f"the NNAPI converter cannot handle {op} ({label}) {location}",
            cause=f"node: {node.splitlines()[0][:200]}",
            remedy=f"rewrite that part of the model without {op} (torch/backends/_nnapi/serializer.py ADDER_MAP lists "
            "what NNAPI conversion supports), or keep that model on the CPU",
        )
    first = text.splitlines()[0] if text else type(e).__name__
    return ConversionError(
        f"the NNAPI converter failed on {label}",
        cause=f"{type(e).__name__}: {first[:300]}",
        remedy="see the run log for the traceback; NNAPI conversion supports a subset of ops and layouts "
        "(4-D NHWC inputs, per-tensor quint8 quantization)",
    )


def _save(module, path: Path, fmt: str) -> None:
    with atomic_path(path) as tmp:
        if fmt == "lite":
            module._save_for_lite_interpreter(str(tmp))
        else:
            module.save(str(tmp))


def fused_float(float_model, copy_model: bool = True):
    """The float model with conv+bn(+relu) fused, as the tutorial prepares quant_none."""
    import torch

    model = copy.deepcopy(float_model) if copy_model else float_model
    model.eval()
    # a model wrapped for quantization (QuantWrapper) keeps its fuse_model on the wrapped module
    target = model.module if isinstance(model, torch.ao.quantization.QuantWrapper) else model
    if hasattr(target, "fuse_model"):
        try:
            target.fuse_model(is_qat=False)
        except TypeError:
            target.fuse_model()
    return model


def export_mode(
    prepared_model,
    mode: str,
    bundled_float_input,
    cpu_path: Path,
    nnapi_path: Path,
    fmt: str,
    label: str,
    optimize: bool,
) -> ExportedVariant:
    """Export one mode; ``prepared_model`` is ``fused_float()`` for none, a ``quantize()`` result otherwise.

    The model is consumed (its quant/dequant stubs are swapped while tracing).
    """
    import torch
    import torch.backends._nnapi.prepare as nnapi_prepare
    import torch.utils.bundled_inputs as bundled

    notes: List[str] = []
    model = prepared_model
    quantize_core = mode != "none"
    _replace_dropout(model)

    input_float = bundled_float_input
    input_tensor = input_float
    quantizer = dequantizer = None
    core_qparams = None
    if quantize_core:
        quantizer, dequantizer = model.quant, model.dequant
        model.quant = torch.nn.Identity()
        model.dequant = torch.nn.Identity()
        input_tensor = quantizer(input_float)
    input_tensor = input_tensor.contiguous(memory_format=torch.channels_last)
    input_tensor.nnapi_nhwc = True

    with torch.no_grad():
        try:
            traced = torch.jit.trace(model, input_tensor, check_trace=False)  # the host check runs it
        except Exception as e:
            from .precheck import quantized_op_remedy

            raise ConversionError(
                f"tracing {label} failed",
                cause=f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}",
                remedy=quantized_op_remedy(e) or "make the model traceable (no data-dependent control flow on tensors)",
            ) from e
        try:
            nnapi_model = nnapi_prepare.convert_model_to_nnapi(traced, input_tensor)
        except ConversionError:
            raise
        except Exception as e:
            raise _nnapi_error(e, label) from e

    if quantize_core:
        core_qparams = {
            "input": {"scale": float(quantizer.scale), "zero_point": int(quantizer.zero_point)},
        }
    if mode == "core":
        nnapi_model = torch.nn.Sequential(quantizer, nnapi_model, dequantizer)
        model.quant = quantizer
        model.dequant = dequantizer
        input_tensor = input_float.contiguous(memory_format=torch.channels_last)

    class BundleWrapper(torch.nn.Module):
        """A class made afresh per call: TorchScript shares compiled types between instances of one class, and
        bundled inputs can be added to a type only once, so every exported model gets its own top-level type."""

        def __init__(self, mod):
            super().__init__()
            self.mod = mod

        def forward(self, arg):
            return self.mod(arg)

    cpu_export = "script"
    try:
        cpu_model = torch.jit.script(BundleWrapper(model))
    except Exception as e:  # scripting fails on some user modules: fall back to tracing
        log.debug("scripting %s failed (%s); tracing it instead", label, e)
        with torch.no_grad():
            cpu_model = torch.jit.trace(BundleWrapper(model), input_tensor)
        cpu_export = "trace"
        notes.append(f"{label}: CPU model traced (scripting failed: {str(e).splitlines()[0][:120]})")
    mobile_optimized = False
    if optimize:
        from torch.utils.mobile_optimizer import optimize_for_mobile

        cpu_model = optimize_for_mobile(cpu_model)
        mobile_optimized = True

    nnapi_model = torch.jit.script(BundleWrapper(nnapi_model))
    bundled.augment_model_with_bundled_inputs(cpu_model, [(bundled.bundle_large_tensor(input_tensor),)])
    bundled.augment_model_with_bundled_inputs(nnapi_model, [(bundled.bundle_large_tensor(input_tensor),)])
    _save(cpu_model, cpu_path, fmt)
    _save(nnapi_model, nnapi_path, fmt)
    return ExportedVariant(mode, cpu_path, nnapi_path, input_tensor, input_tensor, cpu_export, mobile_optimized,
                           core_qparams, notes)
