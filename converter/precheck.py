"""Static checks before converting: will torch's NNAPI converter handle this model, and handle it right?

Run on the float model (fused and without dropout, as it will be converted) with one trace, before any
calibration, quantization or NNAPI conversion.  What it looks for comes from torch's NNAPI serializer
(torch/backends/_nnapi/serializer.py, read at run time for the supported operations; the attributes it
ignores are listed in docs/facts.md):

* operations the serializer has no converter for (``ADDER_MAP``), including the quantized operations the
  quantized model will use (FloatFunctional.cat becomes ``quantized::cat``);
* attributes the serializer ignores: ``ceil_mode`` on max/avg pooling (the NNAPI model gets the floor-mode
  shape: googlenet's 56x56 becomes 55x55), ``output_padding`` of a transposed convolution, the target dtype
  of ``Tensor.to``;
* what it refuses only half-way through: grouped convolutions (neither 1 group nor depthwise), dilated
  pooling, hardtanh other than (0, 6) / (-1, 1), adaptive average pooling to other than 1x1;
* average pooling with padding: NNAPI averages over the valid elements only, PyTorch (count_include_pad)
  divides by the whole window, so the borders differ;
* a plain ``x + y`` / ``x * y`` between activations in a model that will be quantized: eager-mode
  quantization needs FloatFunctional for them, so such a model is quantized in FX graph mode (the record says
  which and why); only when torch.fx cannot trace it either does it stop the quantized modes;
* outputs other than a tensor or a tuple of tensors;
* the NNAPI API level the operations need (torch passes the NCHW/NHWC layout argument everywhere: API 29).
"""

from __future__ import annotations

import copy
import logging
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from toolchain.errors import ConversionError

from .export import _replace_dropout, batchnorms, fold_batchnorm, fused_float

log = logging.getLogger(__name__)

# What each FloatFunctional method becomes in the quantized model.
FLOAT_FUNCTIONAL_OPS = {"add": "quantized::add", "add_relu": "quantized::add_relu", "mul": "quantized::mul",
                        "mul_relu": "quantized::mul_relu", "cat": "quantized::cat", "add_scalar": "quantized::add_scalar",
                        "mul_scalar": "quantized::mul_scalar", "matmul": "quantized::matmul"}
# aten operations of the float trace -> the NNAPI operation torch emits (for the API level report).
NNAPI_OF = {"aten::_convolution": "CONV_2D", "aten::conv2d": "CONV_2D", "aten::max_pool2d": "MAX_POOL_2D",
            "aten::avg_pool2d": "AVERAGE_POOL_2D", "aten::adaptive_avg_pool2d": "AVERAGE_POOL_2D",
            "aten::linear": "FULLY_CONNECTED", "aten::addmm": "FULLY_CONNECTED", "aten::add": "ADD", "aten::sub": "SUB",
            "aten::mul": "MUL", "aten::div": "DIV", "aten::relu": "RELU", "aten::sigmoid": "LOGISTIC",
            "aten::softmax": "SOFTMAX", "aten::log_softmax": "LOG_SOFTMAX", "aten::prelu": "PRELU",
            "aten::cat": "CONCATENATION", "aten::mean": "MEAN", "aten::flatten": "RESHAPE", "aten::reshape": "RESHAPE",
            "aten::unsqueeze": "EXPAND_DIMS", "aten::slice": "STRIDED_SLICE",
            "aten::upsample_nearest2d": "RESIZE_NEAREST_NEIGHBOR", "aten::hardtanh": "RELU6"}
# Image operations get the layout argument (API 29) from torch's serializer.
LAYOUT_ARGUMENT_OPS = {"CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D", "AVERAGE_POOL_2D", "RESIZE_NEAREST_NEIGHBOR",
                       "TRANSPOSE_CONV_2D"}
HARMLESS = {"prim::Constant", "prim::ListConstruct", "prim::TupleConstruct", "prim::GetAttr", "aten::size",
            "aten::detach", "aten::contiguous", "aten::dropout", "aten::feature_dropout", "prim::NumToTensor",
            "aten::Int", "prim::ListUnpack", "prim::TupleUnpack"}


@dataclass(frozen=True)
class Problem:
    kind: str  # input-dtype | unsupported-op | ignored-attribute | refused-attribute | avg-pool-padding | plain-arithmetic | outputs | api-level
    where: str
    what: str
    fix: str
    blocking: bool = True
    nnapi_only: bool = True  # only the NNAPI model is affected: the CPU models are still written
    modes: Tuple[str, ...] = ()  # the modes it affects (() = every mode)

    def applies_to(self, mode: str) -> bool:
        return not self.modes or mode in self.modes

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        return f"{self.where}: {self.what}"


@dataclass
class Precheck:
    problems: List[Problem]
    api_level: int  # the lowest Android API level the NNAPI model needs
    nnapi_ops: Dict[str, int]
    quantization: str = "eager"  # how the quantized modes are made: "eager" | "fx" (FX graph mode)
    quantization_reason: str = ""  # why FX graph mode ("" for eager mode)
    batchnorm: Dict[str, Any] = field(default_factory=dict)  # BatchNorm layers, how many folded, why some stay

    @property
    def blocking(self) -> List[Problem]:
        return [p for p in self.problems if p.blocking]


def check_model(model, input_hw: Tuple[int, int], modes: Sequence[str], target_api: int = 29,
                example: Optional[Tuple[Any, ...]] = None) -> Precheck:
    """Trace ``model`` (float, as it will be converted) once and list what NNAPI conversion would get wrong;
    ``example``: the model's declared inputs (one tensor per ``forward`` argument) instead of a random image."""
    import torch

    m = _as_converted(model)
    calls: Dict[str, int] = {}
    _record_float_functional(m, calls)
    x = tuple(example) if example is not None else torch.rand(1, 3, *input_hw)
    with torch.no_grad():
        try:
            traced = torch.jit.trace(m, x, check_trace=False, strict=False)  # dict and list outputs too
        except Exception as e:  # noqa: BLE001 - a user's model can raise anything; say it plainly
            # not blocking here: the conversion's own probe and trace name the cause with its remedy
            return Precheck([Problem("trace", "the model", f"could not be checked before converting (tracing failed: "
                                     f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})",
                                     "", blocking=False, nnapi_only=False)], 29, {})
    graph = traced.inlined_graph
    problems = _inputs(x) + _unsupported(graph) + _attributes(graph) + _outputs(graph, modes)
    scheme, why = "eager", ""
    if any(mode != "none" for mode in modes):
        plain, scheme, why = _quantization_scheme(model, _plain_arithmetic(graph, calls), example is not None)
        problems += _float_functional_problems(calls) + plain
    ops = _nnapi_ops(graph)
    level = 29 if any(op in LAYOUT_ARGUMENT_OPS for op in ops) else 27
    if level > target_api:
        problems.append(Problem("api-level", "the model", f"needs NNAPI API level {level} (Android 10): torch's "
                                f"converter passes a layout argument to {', '.join(sorted(set(ops) & LAYOUT_ARGUMENT_OPS))}",
                                f"target API level {level} or higher (android.api_level)"))
    return Precheck(problems, level, ops, scheme, why, _batchnorm_record(model, m))


DECLARED_FX = ("the model takes its declared inputs, and eager mode's QuantStub quantizes one float input: FX "
               "graph mode quantizes each float input and passes integer inputs (token ids) as they are")


def _quantization_scheme(model, plain: List[Problem], declared: bool = False) -> Tuple[List[Problem], str, str]:
    """``(problems, "eager" | "fx", why)``: eager mode where it takes the model (torchvision's quantizable
    variants, anything without plain arithmetic between activations: results as before); FX graph mode
    (quantize_fx), which quantizes plain ``x + y`` / ``x * y`` and a model's declared inputs (``declared``), where
    torch.fx can trace the model; otherwise what stops both is a problem of the quantized modes."""
    import torch

    if declared and not plain:
        plain = [Problem("declared-inputs", "the model's inputs", DECLARED_FX, "convert --quant none (the float "
                         "model) or --format executorch (PT2E quantization)", nnapi_only=False,
                         modes=("core", "full"))]
    if not plain:
        return [], "eager", ""
    try:
        torch.fx.symbolic_trace(copy.deepcopy(model))
    except Exception as e:  # noqa: BLE001 - a user's forward() can stop symbolic tracing in many ways
        first = str(e).splitlines()[0][:160] if str(e) else ""
        stop = f"; FX graph mode, which quantizes them, cannot trace the model either ({type(e).__name__}: {first})"
        return [replace(p, what=p.what + stop, fix=p.fix + ", or make forward() traceable by torch.fx.symbolic_trace "
                        "(no Python branching on tensor values)") for p in plain], "eager", ""
    if plain[0].kind == "declared-inputs":
        return [], "fx", DECLARED_FX
    what = "; ".join(p.what.split(" (x ")[0] for p in plain)
    return [], "fx", f"{what} between activations, which eager mode cannot quantize"


def _batchnorm_record(model, converted) -> Dict[str, Any]:
    """BatchNorm layers of ``model``, how many the conversion folds into their convolutions, why any stay."""
    layers, left = len(batchnorms(model)), len(batchnorms(converted))
    if not layers:
        return {}
    record: Dict[str, Any] = {"layers": layers, "folded": layers - left}
    if left:
        record["kept_because"] = fold_batchnorm(converted)
    return record


def nnapi_refused(check: Precheck, mode: str) -> List[Problem]:
    """The blocking problems that leave ``mode`` without an NNAPI model (its CPU model is written all the same)."""
    return [p for p in check.blocking if p.nnapi_only and p.applies_to(mode)]


def refuse(check: Precheck, label: str, modes: Sequence[str] = ("none", "core", "full")) -> Dict[str, List[Problem]]:
    """The requested modes a problem stops the CPU model of (before any conversion work), with those problems: each
    mode is judged on its own, the others are converted.  When every requested mode is stopped, a ConversionError
    names every problem; a problem only NNAPI has is left to :func:`nnapi_refused` (that mode's NNAPI model is not
    written)."""
    bad = [p for p in check.blocking if not p.nnapi_only]
    stopped = {m: [p for p in bad if p.applies_to(m)] for m in modes}
    stopped = {m: problems for m, problems in stopped.items() if problems}
    if not stopped or len(stopped) < len(modes):
        return stopped
    shown = "; ".join(p.line() for p in bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
    raise ConversionError(
        f"{label}: {', '.join('quant_' + m for m in modes)} cannot be converted (checked before converting)",
        cause=shown,
        remedy=refusal_fix(bad),
    )


def refusal_fix(problems: List[Problem]) -> str:
    """The fixes of ``problems``, and ``--quant none`` when the float model is not stopped."""
    fixes = list(dict.fromkeys(p.fix for p in problems))
    text = "; ".join(fixes[:3]) + (" (and the rest listed above)" if len(fixes) > 3 else "")
    if all(p.modes and "none" not in p.modes for p in problems):
        text += "; or convert the float model alone: --quant none"
    return text


# --------------------------------------------------------------------------- preparation


def _as_converted(model):
    """A copy prepared the way `invoke convert` converts it: fused, dropout removed, eval mode."""
    m = fused_float(model)
    _replace_dropout(m)
    return m.eval()


def _record_float_functional(model, calls: Dict[str, int]) -> None:
    """Count FloatFunctional method calls of this copy (instance attributes; the class is untouched)."""
    from torch.ao.nn.quantized import FloatFunctional

    for mod in model.modules():
        if isinstance(mod, FloatFunctional):
            for name in FLOAT_FUNCTIONAL_OPS:
                if hasattr(type(mod), name):
                    setattr(mod, name, _counting(getattr(mod, name), name, calls))


def _counting(fn, name: str, calls: Dict[str, int]):
    def wrapper(*args, **kwargs):
        calls[name] = calls.get(name, 0) + 1
        return fn(*args, **kwargs)
    return wrapper


# --------------------------------------------------------------------------- checks


def _adder_map() -> Dict[str, Any]:
    from torch.backends._nnapi.serializer import _NnapiSerializer

    return _NnapiSerializer.ADDER_MAP


def _kind(node) -> str:
    k = node.kind()
    return k[:-1] if k.endswith("_") and not k.endswith("__") else k  # in-place relu_ converts like relu


def _where(node) -> str:
    """The module (scope) and source line of a traced node: ``layer1.0 (aten::add at net.py:41:0)``."""
    scope = node.scopeName().replace("__module.", "").split("/")[-1] if node.scopeName() else ""
    source = re.search(r"#\s*(\S+:\d+:\d+)", str(node))
    at = f" at {source.group(1).rsplit('/', 1)[-1]}" if source else ""
    return f"{scope or 'the model'} ({node.kind()}{at})"


def _unsupported(graph) -> List[Problem]:
    known = _adder_map()
    out, seen = [], set()
    for node in graph.nodes():
        k = _kind(node)
        if k in known or k in HARMLESS or k in seen:
            continue
        seen.add(k)
        out.append(Problem("unsupported-op", _where(node), f"the NNAPI converter cannot handle {k} (torch's serializer has no conversion for it)",
                           f"for an NNAPI model, rewrite the model without {k} (torch/backends/_nnapi/serializer.py "
                           "ADDER_MAP lists what converts); its CPU models are written all the same"))
    return out


def _const(v) -> Any:
    node = v.node()
    if node.kind() == "prim::Constant":
        return node.output().toIValue() if node.outputsSize() else None
    if node.kind() == "prim::ListConstruct":
        return [_const(i) for i in node.inputs()]
    return None


def _attributes(graph) -> List[Problem]:
    out = []
    for node in graph.nodes():
        k = _kind(node)
        args = [_const(v) for v in node.inputs()]
        out += _pool_problems(node, k, args) + _conv_problems(node, k, args) + _rank_problems(node, k) + \
            _misc_problems(node, k, args)
    return out


def _pool_problems(node, k: str, args: List[Any]) -> List[Problem]:
    checks = (_ceil_mode_problem, _dilated_pool_problem, _avg_pool_problem, _adaptive_pool_problem)
    return [p for check in checks for p in [check(node, k, args)] if p is not None]


def _ceil_mode_problem(node, k: str, args: List[Any]) -> Optional[Problem]:
    ceil_at = {"aten::max_pool2d": 5, "aten::avg_pool2d": 4}.get(k)
    if ceil_at is None or len(args) <= ceil_at or not args[ceil_at]:
        return None
    return Problem("ignored-attribute", _where(node),
                   "ceil_mode=True is ignored by torch's NNAPI converter: the NNAPI model pools in floor "
                   "mode and gets a smaller output (e.g. 55x55 instead of 56x56)",
                   "use ceil_mode=False with explicit padding that gives the same output size")


def _dilated_pool_problem(node, k: str, args: List[Any]) -> Optional[Problem]:
    if k == "aten::max_pool2d" and len(args) > 4 and args[4] and any(d != 1 for d in args[4]):
        return Problem("refused-attribute", _where(node), "dilated max pooling: NNAPI has none", "use dilation 1")
    return None


def _avg_pool_problem(node, k: str, args: List[Any]) -> Optional[Problem]:
    if k != "aten::avg_pool2d" or len(args) <= 5:
        return None
    padding, include_pad = args[3] or [0], args[5]
    if any(padding) and include_pad is not False:
        return Problem("avg-pool-padding", _where(node),
                       f"average pooling with padding {list(padding)}: NNAPI averages over the valid elements "
                       "only, PyTorch divides by the whole window, so the borders differ",
                       "pad explicitly before the pooling, or pool without padding")
    if include_pad is False or (len(args) > 6 and args[6]):
        return Problem("refused-attribute", _where(node),
                       "count_include_pad=False / divisor_override: torch's NNAPI converter refuses them",
                       "use count_include_pad=True without divisor_override")
    return None


def _adaptive_pool_problem(node, k: str, args: List[Any]) -> Optional[Problem]:
    if k == "aten::adaptive_avg_pool2d" and len(args) >= 2 and args[1] not in ([1, 1], (1, 1), None):
        return Problem("refused-attribute", _where(node), f"adaptive average pooling to {args[1]}: NNAPI conversion "
                       "supports only 1x1", "pool to 1x1 or use avg_pool2d with a fixed window")
    return None


def _conv_problems(node, k: str, args: List[Any]) -> List[Problem]:
    if k != "aten::_convolution" or len(args) < 9:
        return []
    out = []
    in_c = _shape(node.inputsAt(0))
    groups, transposed, output_padding = args[8], args[6], args[7] or [0]
    if transposed and any(output_padding):
        out.append(Problem("ignored-attribute", _where(node),
                           f"output_padding={list(output_padding)} of a transposed convolution is ignored by torch's "
                           "NNAPI converter (the NNAPI output is smaller)", "use output_padding=0"))
    channels = in_c[1] if in_c and len(in_c) == 4 else None
    if groups not in (None, 1) and channels is not None and groups != channels:
        out.append(Problem("refused-attribute", _where(node),
                           f"grouped convolution ({groups} groups of {channels} channels): torch's NNAPI converter only "
                           "converts 1 group or depthwise", "use ordinary or depthwise convolutions"))
    if args[5] and any(d != 1 for d in args[5]):
        out.append(Problem("refused-attribute", _where(node), f"dilation {list(args[5])}: torch's NNAPI converter "
                           "has none", "use dilation 1"))
    return out


# The input rank torch's serializer converts an operation at, its NNAPI operation, and the rewrite for an NNAPI model
RANKS = {"aten::_convolution": (4, "2-D convolutions of 4-D inputs",
                                "reshape to [N, C, 1, L] and use Conv2d with a (1, k) kernel"),
         "aten::linear": (2, "linear layers (FULLY_CONNECTED) on 2-D [N, features] inputs",
                          "flatten to [N, features] (or reshape to [N*T, D] and back) around the linear layer")}


def _rank_problems(node, k: str) -> List[Problem]:
    """An operation on an input of another rank than torch's serializer converts it at: Conv1d / Conv3d (a 2-D
    kernel on a 4-D image only, docs/facts.md LI3), a linear layer on a 3-D [N, T, D] input (FULLY_CONNECTED takes
    [N, features], LI3); the serializer fails half-way with an assertion on the shape."""
    shape = _shape(node.inputsAt(0)) if k in RANKS else None
    if not shape or len(shape) == RANKS[k][0]:
        return []
    _, converts, rewrite = RANKS[k]
    what = f"a {len(shape) - 2}-D convolution" if k == "aten::_convolution" else "a linear layer"
    return [Problem("refused-attribute", _where(node), f"{what} on a {len(shape)}-D input {shape}: torch's NNAPI "
                    f"converter converts {converts} only", f"for an NNAPI model, {rewrite}; its CPU models and "
                    "--format executorch take it as it is")]


def _misc_problems(node, k: str, args: List[Any]) -> List[Problem]:
    if k == "aten::hardtanh" and len(args) >= 3 and (args[1], args[2]) not in ((0.0, 6.0), (-1.0, 1.0)):
        return [Problem("refused-attribute", _where(node), f"hardtanh({args[1]}, {args[2]}): NNAPI has only (0, 6) "
                        "and (-1, 1)", "use ReLU6 or hardtanh(-1, 1)")]
    if k == "aten::to" and any(isinstance(a, int) and not isinstance(a, bool) for a in args[1:3]):
        return [Problem("ignored-attribute", _where(node), "Tensor.to(dtype) is converted as a no-op: the dtype change "
                        "is lost", "remove the dtype conversion from forward()", blocking=False)]
    return []


NNAPI_INPUT_DTYPES = ("float32", "int32")  # and quint8 (quant_full's input): serializer.torch_tensor_to_operand, LI2


def _inputs(x) -> List[Problem]:
    """Declared inputs torch's NNAPI converter cannot take as model inputs: it makes an operand of a float32, int32
    or quantized input only (docs/facts.md LI2); its CPU models take them."""
    out = []
    for i, t in enumerate(x if isinstance(x, tuple) else (x,)):
        dtype = str(t.dtype).replace("torch.", "")
        if dtype not in NNAPI_INPUT_DTYPES:
            out.append(Problem("input-dtype", f"input {i} ({dtype}{list(t.shape)})",
                               f"is {dtype}: torch's NNAPI converter takes float32 and int32 inputs only (its "
                               "serializer makes no operand of another dtype)",
                               "take it as int32 or float32 in forward() for an NNAPI model; its CPU models and "
                               "--format executorch take it as it is"))
    return out


def _shape(v) -> Optional[List[int]]:
    t = v.type()
    try:
        sizes = t.sizes()
    except (RuntimeError, AttributeError):
        return None
    return list(sizes) if sizes is not None else None


def _outputs(graph, modes: Sequence[str]) -> List[Problem]:
    """What the model's return value stops: a tuple, dict or list stops quant_core (one quantize/dequantize pair
    around the NNAPI model), a dict or list the NNAPI models only (their converter returns tensors or a tuple of
    them; the CPU models and the ExecuTorch lane take it)."""
    ret = graph.return_node().inputsAt(0)
    kind, problems = ret.type().kind(), []
    if kind != "TensorType" and "core" in modes:
        shape = f"a tuple of {len(ret.type().elements())} tensors" if kind == "TupleType" else f"{ret.type()}"
        problems.append(Problem("outputs", "the model's return value",
                                f"is {shape}: quant_core wraps the NNAPI model in one quantize and one dequantize "
                                "step, which takes a single tensor",
                                "convert the modes none and full only (--quant none,full), or return one tensor",
                                nnapi_only=False, modes=("core",)))
    if not _tensors_only(ret.type()):
        problems.append(Problem("outputs", "the model's return value", f"is {ret.type()}: NNAPI models return a "
                                "tensor or a tuple of tensors", "return a tensor or a tuple of tensors from forward() "
                                "for NNAPI; the CPU models and --format executorch take it as it is"))
    return problems


def _tensors_only(t) -> bool:
    kind = t.kind()
    if kind == "TensorType":
        return True
    if kind == "TupleType":
        return all(_tensors_only(e) for e in t.elements())
    return False


def _float_functional_problems(calls: Dict[str, int]) -> List[Problem]:
    known = _adder_map()
    out = []
    for name, count in sorted(calls.items()):
        op = FLOAT_FUNCTIONAL_OPS[name]
        if op not in known:
            alt = " (a plain torch.cat converts: NNAPI's CONCATENATION requantizes its inputs)" if name == "cat" else ""
            out.append(Problem("unsupported-op", f"FloatFunctional.{name} (x{count})",
                               f"becomes {op} in the quantized model, which torch's NNAPI converter cannot convert",
                               f"avoid FloatFunctional.{name} in the quantized modes{alt}", modes=("core", "full")))
    return out


def _plain_arithmetic(graph, calls: Dict[str, int]) -> List[Problem]:
    """Tensor-tensor add/mul the FloatFunctional calls do not account for: they fail on quantized tensors."""
    out = []
    for kind, methods in (("aten::add", ("add", "add_relu")), ("aten::mul", ("mul", "mul_relu")), ("aten::sub", ())):
        nodes = [n for n in graph.nodes() if _kind(n) == kind and _two_tensors(n)]
        extra = len(nodes) - sum(calls.get(m, 0) for m in methods)
        if extra > 0:
            op = kind.split("::")[1]
            out.append(Problem("plain-arithmetic", _where(nodes[-1]),
                               f"{extra} plain tensor {op}(s) (x {'+' if op == 'add' else '*' if op == 'mul' else '-'} y) "
                               "between activations: quantized tensors have no such operator",
                               f"use FloatFunctional: self.f = torch.ao.nn.quantized.FloatFunctional() in __init__, "
                               f"self.f.{'add' if op != 'mul' else 'mul'}(x, y) in forward()", nnapi_only=False,
                               modes=("core", "full")))
    return out


def _two_tensors(node) -> bool:
    ins = list(node.inputs())
    return len(ins) >= 2 and all(i.type().kind() == "TensorType" and i.node().kind() != "prim::Constant"
                                 for i in ins[:2])


def _nnapi_ops(graph) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for node in graph.nodes():
        op = NNAPI_OF.get(_kind(node))
        if op == "CONV_2D" and node.kind() == "aten::_convolution":
            args = [_const(v) for v in node.inputs()]
            op = "TRANSPOSE_CONV_2D" if args[6] else ("DEPTHWISE_CONV_2D" if args[8] not in (None, 1) else "CONV_2D")
        if op:
            out[op] = out.get(op, 0) + 1
    return out


def describe(check: Precheck) -> List[str]:
    """Lines for the console and the manifest: what the NNAPI model will need."""
    ops = ", ".join(f"{k} x{v}" for k, v in sorted(check.nnapi_ops.items()))
    lines = [f"NNAPI operations: {ops}; needs API level {check.api_level}"]
    if check.quantization == "fx":
        lines.append(f"quantized modes: FX graph mode (torch.ao.quantization.quantize_fx): {check.quantization_reason}")
    bn = check.batchnorm
    if bn.get("kept_because"):
        lines.append(f"BatchNorm: {bn['folded']} of {bn['layers']} layers folded into their convolutions; the rest "
                     f"stay: {bn['kept_because']}")
    lines += [f"note: {p.line()}" for p in check.problems if not p.blocking]
    return lines


__all__: Iterable[str] = ["Problem", "Precheck", "check_model", "refuse", "refusal_fix", "nnapi_refused", "describe"]
