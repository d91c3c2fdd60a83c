"""Load the host libneuralnetworks.so into this process and run its executions with the Python kernels.

``load()`` builds (first time) and preloads the library with RTLD_GLOBAL, so
torch's later ``dlopen("libneuralnetworks.so")`` finds the already-loaded
SONAME, and installs the executor: a ctypes callback the C library calls on
``Compilation_finish`` (build and validate a :class:`~host_nnapi.kernels.Plan`),
``Execution_compute`` (run it on the execution's buffers) and
``Compilation_free``.  A process that loads the library some other way (e.g.
``LIBNEURALNETWORKS_PATH`` in PyTorch's test_nnapi.py) gets the executor
installed by the library itself, which imports this module and calls
:func:`attach`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import threading
from pathlib import Path
from typing import Dict, Iterator, Optional

from . import nnapi_defs as nn
from .graph import Graph, Operand, Operation
from .kernels import DEFAULT_ROUNDING, ROUNDING_MODES, BadModel, Plan, torch_dtype

log = logging.getLogger(__name__)

ROUNDING_ENV = "TORCHDROID_NNAPI_ROUNDING"
_LIFETIMES = nn.LIFETIME_NAMES
_PREPARE, _COMPUTE, _RELEASE = nn.EXECUTOR_PREPARE, nn.EXECUTOR_COMPUTE, nn.EXECUTOR_RELEASE

_lock = threading.RLock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None
_callback = None  # the CFUNCTYPE object must stay alive as long as the library may call it
_compiled: Dict[int, "_Compiled"] = {}
_rounding: Optional[str] = None
_last_error = ""
_stats = {"prepared": 0, "computed": 0, "failed": 0}

_EXECUTOR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class _Compiled:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.plans: Dict[str, Plan] = {}

    def plan(self, rounding: str) -> Plan:
        p = self.plans.get(rounding)
        if p is None:
            p = self.plans[rounding] = Plan(self.graph, rounding)
        return p


# --------------------------------------------------------------------------- rounding


def rounding() -> str:
    """The rounding of quantized kernels: set_rounding() > $TORCHDROID_NNAPI_ROUNDING > "nnapi"."""
    mode = _rounding or os.environ.get(ROUNDING_ENV) or DEFAULT_ROUNDING
    if mode not in ROUNDING_MODES:
        raise ValueError(f"{ROUNDING_ENV}={mode!r}: use one of {', '.join(ROUNDING_MODES)}")
    return mode


def set_rounding(mode: Optional[str]) -> None:
    global _rounding
    if mode is not None and mode not in ROUNDING_MODES:
        raise ValueError(f"rounding must be one of {ROUNDING_MODES}, not {mode!r}")
    _rounding = mode


@contextlib.contextmanager
def using_rounding(mode: str) -> Iterator[None]:
    old = _rounding
    set_rounding(mode)
    try:
        yield
    finally:
        set_rounding(old)


# --------------------------------------------------------------------------- loading


def load(path: Optional[Path] = None, cache: Optional[Path] = None) -> Path:
    """Build if needed and load the library into this process (before the first NNAPI model runs)."""
    global _lib_path
    with _lock:
        if _lib is not None:
            return Path(_lib_path)
        if path is None:
            from .build import build_library

            path = build_library(cache)
        handle = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        _install(handle, str(path))
        return Path(path)


def attach(path: Optional[str] = None) -> None:
    """Install the executor into an already-loaded library (called by the library's bootstrap)."""
    with _lock:
        if _lib is not None:
            return
        handle = ctypes.CDLL(path or "libneuralnetworks.so", mode=ctypes.RTLD_GLOBAL)
        _install(handle, path or "libneuralnetworks.so")


def last_error() -> str:
    """The last NNAPI error the library or the kernels reported (torch only shows the error code)."""
    if _lib is not None:
        msg = _lib.TorchdroidNN_lastError()
        if msg:
            return msg.decode("utf-8", "replace")
    return _last_error


def stats() -> Dict[str, int]:
    return dict(_stats)


def _install(handle: ctypes.CDLL, path: str) -> None:
    global _lib, _lib_path, _callback
    try:
        version = handle.TorchdroidNN_version
    except AttributeError:
        raise RuntimeError(f"{path} is a libneuralnetworks.so but not torchdroid's host NNAPI") from None
    version.restype = ctypes.c_char_p
    P, U32, I32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32
    pu32 = ctypes.POINTER(U32)
    sigs = {
        "TorchdroidNN_setExecutor": (None, [_EXECUTOR]),
        "TorchdroidNN_lastError": (ctypes.c_char_p, []),
        "TorchdroidNN_setLastError": (None, [ctypes.c_char_p]),
        "TorchdroidNN_modelCounts": (ctypes.c_int, [P, pu32]),
        "TorchdroidNN_operand": (ctypes.c_int, [P, U32, ctypes.POINTER(I32), pu32, ctypes.POINTER(pu32),
                                               ctypes.POINTER(ctypes.c_float), ctypes.POINTER(I32),
                                               ctypes.POINTER(ctypes.c_int), ctypes.POINTER(P),
                                               ctypes.POINTER(ctypes.c_size_t)]),
        "TorchdroidNN_operation": (ctypes.c_int, [P, U32, ctypes.POINTER(I32), pu32, ctypes.POINTER(pu32), pu32,
                                                 ctypes.POINTER(pu32)]),
        "TorchdroidNN_modelIO": (ctypes.c_int, [P, ctypes.POINTER(pu32), ctypes.POINTER(pu32)]),
        "TorchdroidNN_compilationModel": (P, [P]),
        "TorchdroidNN_executionIO": (ctypes.c_int, [P, ctypes.c_int, U32, ctypes.POINTER(P),
                                                   ctypes.POINTER(ctypes.c_size_t), pu32, ctypes.POINTER(pu32)]),
        "TorchdroidNN_setOutputDims": (ctypes.c_int, [P, U32, U32, pu32]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(handle, name)
        fn.restype = res
        fn.argtypes = args
    _callback = _EXECUTOR(_executor)
    handle.TorchdroidNN_setExecutor(_callback)
    _lib, _lib_path = handle, path
    atexit.register(_detach)
    log.debug("host NNAPI %s attached from %s", version().decode(), path)


def _detach() -> None:
    """At interpreter exit: stop the library from calling back into a dying interpreter."""
    if _lib is not None:
        _lib.TorchdroidNN_setExecutor(_EXECUTOR())
    _compiled.clear()


# --------------------------------------------------------------------------- executor


def _executor(kind: int, compilation: int, execution: int) -> int:
    global _last_error
    try:
        if kind == _PREPARE:
            graph = graph_from_library(_lib.TorchdroidNN_compilationModel(compilation))
            entry = _Compiled(graph)
            entry.plan(rounding())  # validates every operation now, as Compilation_finish does
            _compiled[compilation] = entry
            _stats["prepared"] += 1
            return nn.NO_ERROR
        if kind == _COMPUTE:
            entry = _compiled.get(compilation)
            if entry is None:
                raise RuntimeError("execution of a compilation the executor never prepared")
            rc = _compute(entry.plan(rounding()), execution)
            _stats["computed"] += 1
            return rc
        if kind == _RELEASE:
            _compiled.pop(compilation, None)
            return nn.NO_ERROR
        raise RuntimeError(f"unknown executor call {kind}")
    except BadModel as e:
        _stats["failed"] += 1
        return _report(nn.BAD_DATA, f"host NNAPI rejected the model: {e}")
    except Exception as e:  # noqa: BLE001 - every failure must become an NNAPI result code
        _stats["failed"] += 1
        log.debug("host NNAPI executor failed", exc_info=True)
        return _report(nn.OP_FAILED, f"host NNAPI kernel failed: {type(e).__name__}: {e}")


def _report(code: int, message: str) -> int:
    global _last_error
    _last_error = message
    log.warning("%s (%s)", message, nn.RESULT_NAMES.get(code, code))
    if _lib is not None:
        _lib.TorchdroidNN_setLastError(message.encode("utf-8", "replace"))
    return code


def _io_tensor(execution: int, is_output: bool, index: int, operand: Operand):
    import torch

    buf, length = ctypes.c_void_p(), ctypes.c_size_t()
    rank, dims = ctypes.c_uint32(), ctypes.POINTER(ctypes.c_uint32)()
    rc = _lib.TorchdroidNN_executionIO(execution, int(is_output), index, ctypes.byref(buf), ctypes.byref(length),
                                       ctypes.byref(rank), ctypes.byref(dims))
    if rc:
        raise RuntimeError(f"cannot read execution {'output' if is_output else 'input'} {index}")
    shape = tuple(dims[k] for k in range(rank.value)) if rank.value else tuple(operand.dims)
    dtype = torch_dtype(operand.type)
    if not length.value:
        return torch.empty(0, dtype=dtype), shape, 0
    raw = (ctypes.c_uint8 * length.value).from_address(buf.value)
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype), shape, length.value


def _compute(plan: Plan, execution: int) -> int:
    g = plan.graph
    inputs = []
    for k, idx in enumerate(g.inputs):
        flat, shape, _ = _io_tensor(execution, False, k, g.operands[idx])
        inputs.append(flat.view(shape))
    outs = plan.run(inputs)
    status = nn.NO_ERROR
    for k, (idx, value) in enumerate(zip(g.outputs, outs)):
        o = g.operands[idx]
        flat, _, length = _io_tensor(execution, True, k, o)
        value = value.to(torch_dtype(o.type))
        dims = (ctypes.c_uint32 * max(1, value.dim()))(*value.shape)
        _lib.TorchdroidNN_setOutputDims(execution, k, value.dim(), dims)
        if value.numel() * value.element_size() > length:
            status = nn.OUTPUT_INSUFFICIENT_SIZE
            continue
        flat[: value.numel()].view(value.shape).copy_(value)
    return status


def graph_from_library(model: int) -> Graph:
    """Read the model the library was given back into a :class:`Graph`."""
    lib = _lib
    counts = (ctypes.c_uint32 * 4)()
    if lib.TorchdroidNN_modelCounts(model, counts):
        raise RuntimeError("cannot read the model")
    n_operands, n_operations, n_in, n_out = list(counts)
    operands = []
    t, rank, scale, zp, life = ctypes.c_int32(), ctypes.c_uint32(), ctypes.c_float(), ctypes.c_int32(), ctypes.c_int()
    dims, value, length = ctypes.POINTER(ctypes.c_uint32)(), ctypes.c_void_p(), ctypes.c_size_t()
    for i in range(n_operands):
        lib.TorchdroidNN_operand(model, i, ctypes.byref(t), ctypes.byref(rank), ctypes.byref(dims), ctypes.byref(scale),
                                 ctypes.byref(zp), ctypes.byref(life), ctypes.byref(value), ctypes.byref(length))
        lifetime = _LIFETIMES.get(life.value, "temporary")
        data = ctypes.string_at(value.value, length.value) if lifetime == "constant" and length.value else (
            b"" if lifetime == "constant" else None)
        operands.append(Operand(i, t.value, tuple(dims[k] for k in range(rank.value)), scale.value, zp.value,
                                lifetime, data))
    operations = []
    n_i, n_o = ctypes.c_uint32(), ctypes.c_uint32()
    ins, outs = ctypes.POINTER(ctypes.c_uint32)(), ctypes.POINTER(ctypes.c_uint32)()
    for k in range(n_operations):
        lib.TorchdroidNN_operation(model, k, ctypes.byref(t), ctypes.byref(n_i), ctypes.byref(ins), ctypes.byref(n_o),
                                   ctypes.byref(outs))
        operations.append(Operation(k, t.value, tuple(ins[j] for j in range(n_i.value)),
                                    tuple(outs[j] for j in range(n_o.value))))
    lib.TorchdroidNN_modelIO(model, ctypes.byref(ins), ctypes.byref(outs))
    return Graph(operands, operations, [ins[j] for j in range(n_in)], [outs[j] for j in range(n_out)])
