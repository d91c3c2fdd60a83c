"""The torch-heavy half of ``convert``: imported only when something must be (re)built."""

from __future__ import annotations

import copy
import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List

import torch

from toolchain.errors import ConversionError
from toolchain.progress import progress
from toolchain.records import TensorSpec

from .calibration import CalibrationSpec, load_batch
from .export import export_mode, fused_float, quantize, xnnpack_available
from .models import ModelSpec, WeightsSpec, build_float_model, estimate_batchnorm
from .pipeline import file_entry, file_names
from .precheck import check_model, describe, refuse

log = logging.getLogger(__name__)
_warned_xnnpack = False

NO_XNNPACK = (
    "this torch has no XNNPACK (the x86_64 PyPI wheels), so optimize_for_mobile cannot run: CPU models keep "
    "BatchNorm fused (fuse_model) and dropout removed, but are not frozen or XNNPACK-prepacked; CPU latencies on a phone will be worse than a fully "
    "optimised model's, so label CPU-vs-NNAPI comparisons accordingly"
)


@dataclass
class Built:
    entries: List[Dict[str, Any]] = field(default_factory=list)
    host_models: List[Dict[str, Any]] = field(default_factory=list)
    agreement: Dict[str, Dict[str, int]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    weights_record: Dict[str, Any] = field(default_factory=dict)
    xnnpack: bool = False
    mobile_optimization: Dict[str, Any] = field(default_factory=dict)
    bundled_input: str = ""


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


def _as_float(t: torch.Tensor) -> torch.Tensor:
    return t.dequantize() if t.is_quantized else t


def build_modes(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, modes: List[str], out: Path,
                fmt: str) -> Built:
    with warnings.catch_warnings():
        # torch 2.x deprecates torch.jit (trace/script/load) and warns on every call; NNAPI conversion needs it.
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*(quantize_per_tensor|calculate_qparams|TypedStorage).*")
        warnings.filterwarnings("ignore", module=r"torch\.ao\.quantization.*")
        return _build_modes(spec, weights, calib, modes, out, fmt)


def _build_modes(spec: ModelSpec, weights: WeightsSpec, calib: CalibrationSpec, modes: List[str], out: Path,
                 fmt: str) -> Built:
    global _warned_xnnpack
    built = Built()
    built.xnnpack = xnnpack_available()
    if built.xnnpack:
        built.mobile_optimization = {"applied": True, "how": "torch.utils.mobile_optimizer.optimize_for_mobile"}
    else:
        if not _warned_xnnpack:
            log.warning("note: %s", NO_XNNPACK)
            _warned_xnnpack = True
        built.mobile_optimization = {"applied": False, "reason": "torch built without XNNPACK",
                                     "instead": "fuse_model (conv+bn+relu) and dropout removal only", "note": NO_XNNPACK}
        built.notes.append("optimize_for_mobile skipped: this torch has no XNNPACK (CPU models fused, not prepacked)")

    with progress(f"converting {spec.stem}", total=2 + 2 * len(modes)) as bar:
        bar.describe(f"{spec.stem}: loading the float model ({weights.origin} weights)")
        model, built.weights_record = build_float_model(spec, weights)
        check = check_model(model, spec.input_hw, modes)  # refuse what NNAPI would get wrong, before any work
        refuse(check, spec.stem)
        built.notes.extend(describe(check))
        if weights.origin == "random":
            built.notes.append("weights are explicitly random (untrained): latencies are real, predictions are not")
        bar.advance()
        bar.describe(f"{spec.stem}: preparing {calib.count} calibration inputs ({calib.source})")
        batch = load_batch(calib, spec.input_hw)
        built.bundled_input = f"calibration input #0 ({calib.source})"
        if weights.origin == "random" and spec.source == "torchvision":
            n = estimate_batchnorm(model, batch)
            built.weights_record["batchnorm_statistics"] = f"estimated on the {calib.count} calibration inputs ({n} layers)"
        bar.advance()

        exported = {}
        quantized = None  # core and full share one calibration
        for mode in modes:
            bar.describe(f"{spec.stem}: quant_{mode}: quantize, trace, convert to NNAPI, bundle inputs")
            cpu_name, nnapi_name = file_names(spec.stem, mode)
            label = f"{spec.stem} quant_{mode}"
            with torch.no_grad():
                if mode == "none":
                    prepared = fused_float(model)
                else:
                    if quantized is None:
                        quantized = quantize(model, batch, f"{spec.stem} (quantized modes)")
                    prepared = copy.deepcopy(quantized)
                ex = export_mode(prepared, mode, batch[0], out / cpu_name, out / nnapi_name, fmt, label,
                                 optimize=built.xnnpack)
            exported[mode] = ex
            built.notes.extend(ex.notes)
            bar.advance()
            bar.describe(f"{spec.stem}: quant_{mode}: host check")
            built.host_models.append(_host_check(ex.cpu_path, mode, fmt))
            cpu_in = spec_of(ex.cpu_input)
            extra_common: Dict[str, Any] = {}
            if ex.core_qparams:
                extra_common["core_quantization"] = ex.core_qparams
            out_spec = TensorSpec(**built.host_models[-1]["output_spec"])
            built.entries.append(file_entry(ex.cpu_path, spec, mode, "cpu", cpu_in, out_spec,
                                            {**extra_common, "export": ex.cpu_export, "mobile_optimized": ex.mobile_optimized,
                                             "format": fmt}))
            built.entries.append(file_entry(ex.nnapi_path, spec, mode, "nnapi", spec_of(ex.nnapi_input), out_spec,
                                            {**extra_common, "nnapi_nhwc": True, "format": fmt,
                                             "needs": "libneuralnetworks.so (Android API >= 29, or torchdroid's host NNAPI)"}))
            bar.advance()
        built.agreement = _agreement(out, spec, batch, exported, fmt)
    return built


def _load(path: Path, fmt: str):
    if fmt == "lite":
        from torch.jit.mobile import _load_for_lite_interpreter

        return _load_for_lite_interpreter(str(path))
    return torch.jit.load(str(path), map_location="cpu")


def _host_check(path: Path, mode: str, fmt: str) -> Dict[str, Any]:
    """Load the saved CPU model back and run it on its bundled input."""
    try:
        m = _load(path, fmt)
        inputs = m.get_all_bundled_inputs() if hasattr(m, "get_all_bundled_inputs") else m.run_method("get_all_bundled_inputs")
        t0 = time.perf_counter()
        with torch.no_grad(), torch.jit.optimized_execution(False):
            y = m(*inputs[0])
        ms = (time.perf_counter() - t0) * 1000.0
    except Exception as e:
        raise ConversionError(
            f"the saved CPU model {path.name} does not run on this machine",
            cause=f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}",
            remedy="run with --debug and report it; the file was written but is not usable",
        ) from e
    outputs = _output_tensors(y)
    if not outputs:
        raise ConversionError(f"the saved CPU model {path.name} returns no tensor",
                              remedy="return a tensor or a tuple of tensors from forward()")
    y = outputs[0]  # the manifest describes the first output; the others are compared by `invoke verify`
    yf = torch.cat([_as_float(t).flatten().to(torch.float32) for t in outputs])
    constant = bool((yf.max() - yf.min()).abs().item() == 0.0)
    if constant:
        raise ConversionError(
            f"the saved CPU model {path.name} gives a constant output on its bundled input",
            cause="every output element is equal: the model (or its quantization) has collapsed",
            remedy="check the weights (--weights) and the calibration images (--calibration)",
        )
    s = spec_of(y)
    return {"file": path.name, "mode": mode, "output_shape": list(y.shape), "output_dtype": s.dtype,
            "constant": constant, "ms": ms, "output_spec": s.to_dict()}


def _output_tensors(y) -> List[torch.Tensor]:
    """A model's output(s) as a flat list of tensors (tuples/lists flattened, None dropped)."""
    if isinstance(y, (list, tuple)):
        return [t for item in y for t in _output_tensors(item)]
    return [y] if isinstance(y, torch.Tensor) else []


def _first(y) -> torch.Tensor:
    return _output_tensors(y)[0]


def _predict(module, batch: torch.Tensor, qparams=None) -> List[int]:
    """Top-1 per row; one batched call (per-row calls when a traced model fixed the batch size)."""
    if qparams:
        batch = torch.quantize_per_tensor(batch, qparams["scale"], qparams["zero_point"], torch.quint8)
    try:
        return [int(i) for i in _as_float(_first(module(batch))).argmax(dim=1)]
    except RuntimeError:
        return [int(_as_float(_first(module(batch[i:i + 1]))).argmax()) for i in range(batch.shape[0])]


def _agreement(out: Path, spec: ModelSpec, batch, exported, fmt: str) -> Dict[str, Dict[str, int]]:
    """Top-1 agreement of core/full with none on the calibration inputs, using the saved CPU models."""
    targets = [m for m in ("core", "full") if m in exported]
    if not targets:
        return {}
    none_path = out / file_names(spec.stem, "none")[0]
    if not none_path.is_file():
        log.info("no quant_none model to compare the quantized modes with; top-1 agreement not measured")
        return {}
    stacked = torch.cat(list(batch), 0).contiguous(memory_format=torch.channels_last)
    # A handful of calls: TorchScript's profiling executor would only add warm-up cost here.
    with torch.no_grad(), torch.jit.optimized_execution(False):
        ref = _predict(_load(none_path, fmt), stacked)
        result = {}
        for mode in targets:
            qp = (exported[mode].core_qparams or {}).get("input") if mode == "full" else None
            pred = _predict(_load(exported[mode].cpu_path, fmt), stacked, qp)
            result[mode] = {"agree": sum(int(a == b) for a, b in zip(pred, ref)), "total": len(ref)}
    return result
