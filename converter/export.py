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
from typing import Any, Dict, Iterator, List, Optional, Tuple

from toolchain.errors import ConversionError
from toolchain.fsutil import save_torch_module
from toolchain.records import program_args

from .input_specs import EXAMPLE as INPUTS_EXAMPLE
from .samples import CALIBRATION_CHUNK, nhwc, stacked

log = logging.getLogger(__name__)

FLOAT_FLOOR = 1.2e-7  # torch.finfo(torch.float32).eps: the smallest scale an observer returns


class NnapiRefused(ConversionError):
    """torch's NNAPI converter raised on the model: only the NNAPI model is lost, the CPU models are still made."""


@dataclass
class ExportedVariant:
    mode: str
    cpu_path: Path
    nnapi_path: Optional[Path]  # None: no NNAPI model (refused before converting, or by the converter)
    cpu_input: Any  # the bundled input tensors
    nnapi_input: Any
    cpu_export: str  # "script" | "trace"
    mobile_optimized: bool
    core_qparams: Optional[Dict[str, Any]] = None
    notes: List[str] = field(default_factory=list)
    cpu_size: int = 0
    cpu_sha256: str = ""
    nnapi_size: int = 0
    nnapi_sha256: str = ""
    nnapi_error: Optional[ConversionError] = None  # what the NNAPI converter said when it refused the model


def xnnpack_available() -> bool:
    import torch.backends.xnnpack  # a submodule torch does not import by itself

    return bool(torch.backends.xnnpack.enabled)


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


def prepared_for_qnnpack(float_model):
    """A copy of the model fused, with the qnnpack qconfig and observers in place (eager-mode ``prepare``): what
    calibration runs, and what pre-quantized weights are loaded into once converted."""
    import torch

    torch.backends.quantized.engine = "qnnpack"
    model = fused_float(_quantizable(copy.deepcopy(float_model)), copy_model=False)
    model.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
    torch.ao.quantization.prepare(model, inplace=True)
    return model


def prepared_fx(float_model, example):
    """FX graph mode's ``prepare_fx`` of a copy (qnnpack qconfig mapping), its float inputs quantized and its output
    left quantized, inside a wrapper whose ``quant`` observes each float input: for one image, a QuantWrapper (the
    same shape as an eager-mode prepared model: ``quant``, ``module``, ``dequant``); for declared inputs (a tuple:
    token ids, audio, several tensors), a bundle wrapper with one ``quant`` per argument (an identity for an integer
    input, which goes in as it is).  Calibration, conversion and export treat both alike."""
    import torch
    from torch.ao.quantization.fx.custom_config import PrepareCustomConfig
    from torch.ao.quantization.quantize_fx import prepare_fx

    torch.backends.quantized.engine = "qnnpack"
    model = copy.deepcopy(float_model).eval()
    _replace_dropout(model)
    inputs = program_args(example)
    floats = [i for i, t in enumerate(inputs) if t.is_floating_point()]
    quantized_ends = PrepareCustomConfig().set_input_quantized_indexes(floats).set_output_quantized_indexes([0])
    core = prepare_fx(model, torch.ao.quantization.get_default_qconfig_mapping("qnnpack"), inputs,
                      prepare_custom_config=quantized_ends)
    observer = torch.ao.quantization.get_default_qconfig("qnnpack").activation
    if not isinstance(example, tuple):
        wrapped = torch.ao.quantization.QuantWrapper(core)
        wrapped.quant = observer()  # the input's range
        wrapped.dequant = torch.nn.Identity()
        return wrapped
    return _bundle_wrapper(core, len(inputs), [observer() if i in floats else torch.nn.Identity()
                                               for i in range(len(inputs))])


def _quantize_step(observer):
    """An observer of a float input made into the Quantize step with its range; anything else stays as it is."""
    import torch

    if not isinstance(observer, torch.ao.quantization.ObserverBase):
        return observer
    scale, zero_point = observer.calculate_qparams()
    return torch.ao.nn.quantized.Quantize(float(scale), int(zero_point), torch.quint8)


def _converted_fx(prepared):
    """``convert_fx`` of :func:`prepared_fx`'s core, between Quantize steps with the observed input ranges and a
    DeQuantize (eager mode's converted QuantStub and DeQuantStub)."""
    import torch
    from torch.ao.quantization.quantize_fx import convert_fx

    if isinstance(prepared, torch.ao.quantization.QuantWrapper):
        prepared.quant = _quantize_step(prepared.quant)
        prepared.module = convert_fx(prepared.module)
    else:
        prepared.quant = torch.nn.ModuleList([_quantize_step(q) for q in prepared.quant])
        prepared.mod = convert_fx(prepared.mod)
    prepared.dequant = torch.ao.nn.quantized.DeQuantize()
    return prepared


def prepare_quantization(float_model, example, scheme: str = "eager"):
    """A prepared copy of ``float_model`` for :func:`quantize`: ``scheme`` "eager" (eager-mode ``prepare``, for a
    model written for it) or "fx" (FX graph mode, for plain ``x + y`` / ``x * y`` between activations, which eager
    mode cannot quantize)."""
    return prepared_fx(float_model, example) if scheme == "fx" else prepared_for_qnnpack(float_model)


def quantize(model, calibration: List[Any], label: str, scheme: str = "eager"):
    """Calibrate and convert the model :func:`prepare_quantization` prepared with ``scheme``; refuse degenerate
    calibration.

    Returns ``(quantized model, top-1 class of the float model per calibration input)``.
    """
    import torch

    top1 = top1_in_chunks(model, calibration, label)  # observers pass values through: the float model's predictions
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
    if scheme == "fx":
        return _converted_fx(model), top1
    torch.ao.quantization.convert(model, inplace=True)
    return model, top1


def top1_in_chunks(model, batch: List[Any], label: str) -> List[int]:
    """Top-1 class of ``model``'s first output per input, run CALIBRATION_CHUNK inputs per call (one call per
    chunk, not per image); a model that fails on torchdroid's input is named as such."""
    import torch

    from converter.host_check import output_tensors

    top1: List[int] = []
    with torch.no_grad():
        for i in range(0, len(batch), CALIBRATION_CHUNK):
            chunk = stacked(batch[i:i + CALIBRATION_CHUNK])
            try:
                y = model(*chunk)
            except Exception as e:  # a user's model can raise anything
                raise input_error(e, label, batch[0]) from e
            y = output_tensors(y)[0]  # several outputs: the agreement is judged on the first
            top1.extend(int(k) for k in y.reshape(y.shape[0], -1).argmax(dim=1))
    return top1


def input_error(e: Exception, label: str, example) -> ConversionError:
    """The model failed on torchdroid's input: say which input it got, not "make it traceable"."""
    first = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
    if isinstance(example, (tuple, list)):  # declared inputs: the model's own function made them
        from .calibration import describe_sample

        return ConversionError(f"{label} does not accept its declared inputs: {describe_sample(example)}",
                               cause=f"{type(e).__name__} in forward(): {first}",
                               remedy="make the example-inputs function (or --inputs) match forward(): one tensor "
                                      "per argument, in order, with the shapes and dtypes the model takes")
    shape = "x".join(str(d) for d in example.shape)
    return ConversionError(
        f"{label} does not accept torchdroid's input: a {shape} float32 image batch (N, C, H, W)",
        cause=f"{type(e).__name__} in forward(): {first}",
        remedy="a model that takes something else (token ids, audio, several tensors) declares its inputs: a "
        f"`<factory>_example_inputs()` function beside the factory, or --inputs \"{INPUTS_EXAMPLE}\" (docs/convert.md);"
        " an image model takes 3-channel images of that size (torchvision's ImageNet layout; a "
        "factory's model gets 224x224 inputs)",
    )


def probe(model, example, label: str):
    """One forward pass on an example input, so a shape mismatch is named before quantizing or tracing; returns
    the output."""
    import torch

    with torch.no_grad():
        try:
            return model(*program_args(example))
        except Exception as e:  # a user's model can raise anything
            raise input_error(e, label, example) from e


def degenerate_observers(model) -> List[tuple]:
    """(what it observes, min, max) of every activation observer whose range collapsed: eager mode's observers are
    named by their module, FX graph mode's by the graph node they observe."""
    out = []
    for name, obs in _observers(model):
        lo, hi = float(obs.min_val), float(obs.max_val)
        if lo == float("inf") or hi == float("-inf"):
            continue  # never ran (branch not taken): not our business
        scale = float(obs.calculate_qparams()[0].flatten()[0])
        if hi - lo <= FLOAT_FLOOR * 8 or scale <= FLOAT_FLOOR * 1.01:
            out.append((name or "<input>", lo, hi))
    return out


def _observers(model) -> List[tuple]:
    """``(name, observer)`` of every activation observer with a range (min_val), named for a person."""
    import torch

    observed = {}  # FX graph mode: observer module -> the node whose output it observes
    for gm in (m for m in model.modules() if isinstance(m, torch.fx.GraphModule)):
        for node in gm.graph.nodes:
            if node.op == "call_module" and node.args and isinstance(node.args[0], torch.fx.Node):
                observed[id(gm.get_submodule(node.target))] = f"the output of {node.args[0].name}"
    out = []
    for name, mod in model.named_modules():
        if not isinstance(mod, torch.ao.quantization.ObserverBase) or not hasattr(mod, "min_val"):
            continue
        name = observed.get(id(mod)) or re.sub(r"\.?activation_post_process$", "", name)
        out.append((name, mod))
    return out


def _nnapi_error(e: Exception, label: str) -> ConversionError:
    text = str(e)
    m = re.search(r"Unsupported node kind \('([^']+)'\) in node (.*)", text, re.S)
    if m:
        op, node = m.group(1), m.group(2).strip()
        where = re.search(r"#\s*(\S+:\d+:\d+)", node)
        location = f"at {where.group(1)}" if where else "in the traced graph"
        return NnapiRefused(
            f"the NNAPI converter cannot handle {op} ({label}) {location}",
            cause=f"node: {node.splitlines()[0][:200]}",
            remedy=f"rewrite that part of the model without {op} (torch/backends/_nnapi/serializer.py ADDER_MAP lists "
            "what NNAPI conversion supports), or keep that model on the CPU",
        )
    first = text.splitlines()[0] if text else type(e).__name__
    return NnapiRefused(
        f"the NNAPI converter failed on {label}",
        cause=f"{type(e).__name__}: {first[:300]}",
        remedy="see the run log for the traceback; NNAPI conversion supports a subset of ops and layouts "
        "(4-D NHWC inputs, per-tensor quint8 quantization)",
    )


def fused_float(float_model, copy_model: bool = True):
    """The float model as it is converted: its own ``fuse_model`` (torchvision's quantizable variants), then every
    BatchNorm still right after a convolution folded into it (:func:`fold_batchnorm`), in eval mode."""
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
    fold_batchnorm(target)
    return model


def _batchnorm_kinds() -> tuple:
    import torch

    return (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)


def batchnorms(model) -> List[str]:
    """The names of ``model``'s BatchNorm layers."""
    return [name for name, m in model.named_modules() if isinstance(m, _batchnorm_kinds())]


def fold_batchnorm(model) -> str:
    """Fold, in place, each BatchNorm that takes a convolution's output (each called once, the convolution's output
    used by nothing else) into that convolution (torch.nn.utils.fusion.fuse_conv_bn_eval), where torch.fx's
    symbolic trace finds the pairs.  Returns why BatchNorm layers stay ("" when none is left or none was there)."""
    import torch

    if not batchnorms(model):
        return ""
    try:
        graph = torch.fx.symbolic_trace(model).graph
    except Exception as e:  # noqa: BLE001 - a user's forward() can stop symbolic tracing in many ways
        first = str(e).splitlines()[0][:160] if str(e) else ""
        return f"torch.fx cannot trace the model to find them ({type(e).__name__}: {first})"
    for conv, bn in _conv_bn_pairs(model, graph):
        fused = torch.nn.utils.fusion.fuse_conv_bn_eval(model.get_submodule(conv), model.get_submodule(bn))
        _set_submodule(model, conv, fused)
        _set_submodule(model, bn, torch.nn.Identity())
    left = batchnorms(model)
    return f"{', '.join(left[:3])}{' ...' if len(left) > 3 else ''} do not follow a convolution" if left else ""


def _conv_bn_pairs(model, graph) -> List[Tuple[str, str]]:
    import collections

    import torch

    calls = collections.Counter(n.target for n in graph.nodes if n.op == "call_module")
    pairs = []
    for node in graph.nodes:
        src = node.args[0] if node.op == "call_module" and node.args else None
        if not isinstance(src, torch.fx.Node) or src.op != "call_module" or len(src.users) != 1:
            continue
        bn, conv = model.get_submodule(node.target), model.get_submodule(src.target)
        if (isinstance(bn, _batchnorm_kinds()) and type(conv) in (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
                and calls[node.target] == calls[src.target] == 1 and bn.num_features == conv.out_channels):
            pairs.append((src.target, node.target))
    return pairs


def without_inplace(model):
    """A copy of ``model`` for torch's NNAPI converter, which has no in-place operators (``aten::relu_``,
    ``aten::add_``: docs/facts.md AM3): traced by torch.fx (``x += y`` becomes ``x + y`` there) with every in-place
    module, functional and method call made out of place where nothing else reads its input (so no value can
    differ).  ``model`` itself when torch.fx cannot trace it (the converter then names what it cannot take)."""
    import torch

    _replace_dropout(model)
    try:
        gm = torch.fx.symbolic_trace(copy.deepcopy(model))
    except Exception as e:  # noqa: BLE001 - a user's forward() can stop symbolic tracing in many ways
        log.debug("torch.fx cannot trace the model for NNAPI: %s", e)
        return model
    shared = {n.target for n in gm.graph.nodes if n.op == "call_module" and not _sole_reader(n)}
    for node in gm.graph.nodes:
        if node.op == "call_module" and node.target not in shared and getattr(gm.get_submodule(node.target),
                                                                              "inplace", None) is True:
            gm.get_submodule(node.target).inplace = False
        elif node.op == "call_function" and node.kwargs.get("inplace") is True and _sole_reader(node):
            node.kwargs = {**node.kwargs, "inplace": False}
        elif node.op == "call_method" and _out_of_place(node.target) and _sole_reader(node):
            node.target = node.target[:-1]
    gm.recompile()
    return gm


def _sole_reader(node) -> bool:
    """Is ``node`` the only reader of its first argument (so doing it in place or not gives the same values)?"""
    import torch

    first = node.args[0] if node.args else None
    return isinstance(first, torch.fx.Node) and len(first.users) == 1


def _out_of_place(method: str) -> bool:
    import torch

    return method.endswith("_") and not method.endswith("__") and hasattr(torch.Tensor, method[:-1])


def _set_submodule(model, name: str, module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)


MAX_INPUTS = 4  # forward() arguments a legacy-lane model may take (one bundle wrapper per count below)


def _bundle_wrapper(module, arity: int = 1, quant=None, dequant=None):
    """``module`` in a class made afresh per call: TorchScript shares compiled types between instances of one
    class, and bundled inputs can be added to a type only once, so every exported model gets its own type.  Its
    ``forward`` takes ``arity`` tensors (TorchScript scripts no ``*args``; the NNAPI module has one per input) and
    passes argument i through ``quant[i]`` (identities unless given: a declared model's quantized modes quantize its
    float inputs there, :func:`prepared_fx`); with ``dequant``, the output (one tensor: quant_core) goes through it."""
    import torch

    class BundleWrapper(torch.nn.Module):
        def __init__(self, mod):
            super().__init__()
            self.mod = mod
            self.quant = torch.nn.ModuleList(quant if quant is not None else
                                             [torch.nn.Identity() for _ in range(arity)])
            self.dequant = dequant if dequant is not None else torch.nn.Identity()

    class Bundle1(BundleWrapper):
        def forward(self, arg):
            return self.mod(self.quant[0](arg))

    class Bundle2(BundleWrapper):
        def forward(self, a, b):
            return self.mod(self.quant[0](a), self.quant[1](b))

    class Bundle3(BundleWrapper):
        def forward(self, a, b, c):
            return self.mod(self.quant[0](a), self.quant[1](b), self.quant[2](c))

    class Bundle4(BundleWrapper):
        def forward(self, a, b, c, d):
            return self.mod(self.quant[0](a), self.quant[1](b), self.quant[2](c), self.quant[3](d))

    class Dequantized1(BundleWrapper):
        def forward(self, arg):
            return self.dequant(self.mod(self.quant[0](arg)))

    class Dequantized2(BundleWrapper):
        def forward(self, a, b):
            return self.dequant(self.mod(self.quant[0](a), self.quant[1](b)))

    class Dequantized3(BundleWrapper):
        def forward(self, a, b, c):
            return self.dequant(self.mod(self.quant[0](a), self.quant[1](b), self.quant[2](c)))

    class Dequantized4(BundleWrapper):
        def forward(self, a, b, c, d):
            return self.dequant(self.mod(self.quant[0](a), self.quant[1](b), self.quant[2](c), self.quant[3](d)))

    classes = (Bundle1, Bundle2, Bundle3, Bundle4) if dequant is None else \
        (Dequantized1, Dequantized2, Dequantized3, Dequantized4)
    return classes[arity - 1](module)


def check_arity(example, label: str) -> None:
    """More forward() arguments than the legacy lane's bundle wrappers take: refused before any work."""
    n = len(program_args(example))
    if n > MAX_INPUTS:
        raise ConversionError(f"{label} takes {n} inputs: the legacy TorchScript lane takes up to {MAX_INPUTS}",
                              cause="each model is saved in a wrapper that bundles its inputs, one per input count",
                              remedy="convert it with --format executorch (any number of inputs), or pack inputs "
                                     "of one dtype into one tensor")


def quantized_op_remedy(error: Exception) -> Optional[str]:
    """The fix for a plain tensor operator that has no quantized kernel (``x + y`` on quantized tensors)."""
    m = re.search(r"Could not run '(aten::\w+)(?:\.\w+)?' with arguments from the 'QuantizedCPU' backend", str(error))
    if not m or m.group(1).split("::")[1].rstrip("_") not in ("add", "mul", "sub", "div"):
        return None
    op = m.group(1).split("::")[1]
    method = "mul" if op.startswith("mul") else "add"
    return (f"{m.group(1)} has no quantized kernel: in a model that is quantized in eager mode, write x {op} y between "
            f"activations with FloatFunctional (self.f = torch.ao.nn.quantized.FloatFunctional() in __init__, "
            f"self.f.{method}(x, y) in forward())")


def trace_to_nnapi(model, input_tensor, label: str):
    """Trace ``model`` on the NHWC-flagged ``input_tensor`` (a tensor, or a tuple of one per ``forward`` argument)
    and convert it with torch's NNAPI converter."""
    import torch
    import torch.backends._nnapi.prepare as nnapi_prepare

    with torch.no_grad():
        try:
            # strict=False: a dict or list output traces (its structure is fixed by the model); NNAPI says the rest
            traced = torch.jit.trace(model, input_tensor, check_trace=False, strict=False)  # the host check runs it
        except Exception as e:
            raise ConversionError(
                f"tracing {label} failed",
                cause=f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}",
                remedy=quantized_op_remedy(e) or "make forward() traceable: one tensor in, a tensor (or tuple of "
                "tensors) out, no Python-side branching on tensor values",
            ) from e
        try:
            return nnapi_prepare.convert_model_to_nnapi(traced, list(program_args(input_tensor)))
        except ConversionError:
            raise
        except Exception as e:
            raise _nnapi_error(e, label) from e


def script_cpu(model, input_tensor, label: str, optimize: bool, quant=None, dequant=None):
    """The CPU TorchScript model: scripted (traced when scripting fails), optimised when XNNPACK is there.

    Returns ``(module, "script" | "trace", notes)``.
    """
    import torch

    notes: List[str] = []
    arity = len(program_args(input_tensor))
    try:
        cpu_model, how = torch.jit.script(_bundle_wrapper(model, arity, quant, dequant)), "script"
    except Exception as e:  # scripting fails on some user modules: fall back to tracing
        log.debug("scripting %s failed (%s); tracing it instead", label, e)
        with torch.no_grad():
            cpu_model, how = torch.jit.trace(_bundle_wrapper(model, arity, quant, dequant), input_tensor,
                                             strict=False), "trace"
        notes.append(f"{label}: CPU model traced (scripting failed: {str(e).splitlines()[0][:120]})")
    if optimize:
        from torch.utils.mobile_optimizer import optimize_for_mobile

        cpu_model = optimize_for_mobile(cpu_model)
    return cpu_model, how, notes


def _adopt_scripted_children(model, scripted) -> None:
    """Put the scripted copies of ``model``'s children (from scripting it for quant_full) in their place.

    quant_core's CPU model is the same quantized model with other quant/dequant modules: scripting it again
    would infer every submodule's TorchScript type afresh (most of a second) only to find the types quant_full's
    scripting made.  Scripting a module whose children are already scripted reuses them: the same types, the
    same saved file.  Only the children scripting found (a child ``forward`` never calls is left alone)."""
    import torch

    for name, child in list(model.named_children()):
        if name in ("quant", "dequant"):
            continue
        done = getattr(scripted, name, None)
        if isinstance(done, torch.jit.ScriptModule) and done.original_name == type(child).__name__:
            setattr(model, name, done)


def bundle_and_save(scripted, input_tensor, path: Path) -> Tuple[int, str]:
    """Bundle ``input_tensor`` (a tensor, or a tuple of one per ``forward`` argument: speed_benchmark_torch's
    --use_bundled_input passes the bundled tuple's elements as the arguments, docs/facts.md LI1) and save; returns
    (size, sha256)."""
    import torch.utils.bundled_inputs as bundled

    inputs = tuple(bundled.bundle_large_tensor(t) for t in program_args(input_tensor))
    bundled.augment_model_with_bundled_inputs(scripted, [inputs])
    return save_torch_module(scripted, path)


def _saved(mode, cpu_path, nnapi_path, cpu_saved, nnapi_saved, cpu_in, nnapi_in, how, optimize, qparams, notes,
           nnapi_error=None):
    if nnapi_saved is None:  # no NNAPI model: an earlier run's file must not pass for this run's
        nnapi_path.unlink(missing_ok=True)
        return ExportedVariant(mode, cpu_path, None, cpu_in, nnapi_in, how, optimize, qparams, notes,
                               cpu_saved[0], cpu_saved[1], nnapi_error=nnapi_error)
    return ExportedVariant(mode, cpu_path, nnapi_path, cpu_in, nnapi_in, how, optimize, qparams, notes,
                           cpu_saved[0], cpu_saved[1], nnapi_saved[0], nnapi_saved[1])


def _to_nnapi(model, input_tensor, label: str, wanted: bool):
    """``(NNAPI core or None, the converter's refusal or None)``: refused before converting (``wanted`` False) or by
    the converter itself, the CPU models are made all the same."""
    if not wanted:
        return None, None
    try:
        return trace_to_nnapi(model, input_tensor, label), None
    except NnapiRefused as e:
        log.debug("the NNAPI converter refused %s", label, exc_info=True)
        return None, e


def export_float(fused, float_input, paths: Tuple[Path, Path], label: str, optimize: bool,
                 nnapi: bool = True, nnapi_model=None) -> ExportedVariant:
    """quant_none: the fused float model for the CPU and (``nnapi``, unless the converter refuses it) through NNAPI
    (``nnapi_model``: the same model as NNAPI gets it, :func:`without_inplace`; ``fused`` when None)."""
    import torch

    _replace_dropout(fused)
    x = nhwc(float_input)
    core, error = _to_nnapi(fused if nnapi_model is None else nnapi_model, x, label, nnapi)
    nnapi_model = torch.jit.script(_bundle_wrapper(core, len(program_args(x)))) if core is not None else None
    cpu_model, how, notes = script_cpu(fused, x, label, optimize)
    return _saved("none", *paths, bundle_and_save(cpu_model, x, paths[0]),
                  bundle_and_save(nnapi_model, x, paths[1]) if nnapi_model is not None else None,
                  x, x, how, optimize, None, notes, error)


def _quantized_parts(quantized, image: bool):
    """``(core, quantize steps one per input, dequantize step)`` of a converted model (:func:`quantize`): an image
    model's own ``quant``/``dequant``, or a declared model's bundle wrapper (:func:`prepared_fx`)."""
    if image:
        return quantized, [quantized.quant], quantized.dequant
    return quantized.mod, list(quantized.quant), quantized.dequant


def _qparams(steps) -> Dict[str, Any]:
    """The input quantization the modes record: ``input`` (the first quantized input's, as an image model has one),
    and for several inputs ``inputs`` (one per argument, None for one that goes in as it is)."""
    per = [{"scale": float(q.scale), "zero_point": int(q.zero_point)} if hasattr(q, "zero_point") else None
           for q in steps]
    first = next((p for p in per if p is not None), None)
    out: Dict[str, Any] = {"input": first} if first is not None else {}
    return {**out, "inputs": per} if len(per) > 1 or first is None else out


def export_quantized(quantized, modes: List[str], float_input, paths: Dict[str, Tuple[Path, Path]],
                     label: str, optimize: bool, nnapi: bool = True) -> Iterator[ExportedVariant]:
    """quant_full and/or quant_core from one quantized model, yielded as each is saved.

    The NNAPI core is the same for both modes (full takes quint8 in and out; core wraps it in quant/dequant),
    so it is traced and converted once (``nnapi`` False, or refused by the converter: CPU models only).
    ``quantized`` is consumed.
    """
    import torch

    _replace_dropout(quantized)
    image = not isinstance(float_input, tuple)  # a declared model's sample is the tuple of its arguments
    core, steps, dequantizer = _quantized_parts(quantized, image)
    if image:
        quantized.quant, quantized.dequant = torch.nn.Identity(), torch.nn.Identity()
    q_input = nhwc(tuple(q(x) for q, x in zip(steps, program_args(float_input))))
    q_input = q_input[0] if image else q_input
    qparams = _qparams(steps)
    nnapi_core, error = _to_nnapi(core, q_input, f"{label} (quantized core)", nnapi)
    arity = len(steps)
    if "full" in modes:
        cpu_model, how, notes = script_cpu(core, q_input, f"{label} quant_full", optimize)
        nnapi_model = torch.jit.script(_bundle_wrapper(nnapi_core, arity)) if nnapi_core is not None else None
        if how == "script" and not optimize and image:
            _adopt_scripted_children(quantized, cpu_model.mod)
        yield _saved("full", *paths["full"], bundle_and_save(cpu_model, q_input, paths["full"][0]),
                     bundle_and_save(nnapi_model, q_input, paths["full"][1]) if nnapi_model is not None else None,
                     q_input, q_input, how, optimize, qparams, notes, error)
    if "core" in modes:
        x = nhwc(float_input)
        if image:
            quantized.quant, quantized.dequant = steps[0], dequantizer
            cpu_model, how, notes = script_cpu(quantized, x, f"{label} quant_core", optimize)
            nnapi_model = (torch.jit.script(_bundle_wrapper(torch.nn.Sequential(steps[0], nnapi_core, dequantizer)))
                           if nnapi_core is not None else None)
        else:  # declared inputs: the quantize steps of the float inputs and the dequantize step around the core
            cpu_model, how, notes = script_cpu(core, x, f"{label} quant_core", optimize, steps, dequantizer)
            nnapi_model = (torch.jit.script(_bundle_wrapper(nnapi_core, arity, steps, dequantizer))
                           if nnapi_core is not None else None)
        yield _saved("core", *paths["core"], bundle_and_save(cpu_model, x, paths["core"][0]),
                     bundle_and_save(nnapi_model, x, paths["core"][1]) if nnapi_model is not None else None,
                     x, x, how, optimize, qparams, notes, error)
