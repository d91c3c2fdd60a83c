"""The process-wide torch state that conversion and measurement change, set for a block and put back after it.

torch keeps the quantized engine (``torch.backends.quantized.engine``) and the intra-op thread count
(``torch.set_num_threads``) per process.  Converting for QNNPACK switches the engine, a benchmark sets its thread
count; left behind, either changes every later measurement in the same process (``invoke all`` runs convert and
``bench --host`` in one process: quantized models timed ~3x slower under QNNPACK than under the host's default
engine).  Every stage that changes them does so inside :func:`pinned`, which restores them on the way out, and
every measurement pins them explicitly, so a number never depends on what ran before it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator, Optional

# torch's own preference for the default quantized engine of a fresh process (x86 where FBGEMM is built, else
# QNNPACK); checked against a fresh process by tests/integration/test_host_numbers.py.
_DEFAULT_ENGINE_ORDER = ("x86", "fbgemm", "qnnpack", "onednn")


def host_engine() -> str:
    """The quantized engine a fresh torch process on this host starts with (what ``bench --host`` measures with)."""
    import torch

    supported = list(torch.backends.quantized.supported_engines)
    for name in _DEFAULT_ENGINE_ORDER:
        if name in supported:
            return name
    return supported[0] if supported else "none"


@contextlib.contextmanager
def pinned(threads: Optional[int] = None, engine: Optional[str] = None,
           mkldnn: Optional[bool] = None) -> Iterator[None]:
    """Run a block with ``threads`` intra-op threads, quantized ``engine`` and oneDNN (``mkldnn``) on or off (None:
    leave as is); restore all three."""
    import torch

    old_engine, old_threads = torch.backends.quantized.engine, torch.get_num_threads()
    old_mkldnn = torch.backends.mkldnn.enabled
    try:
        if engine is not None:
            torch.backends.quantized.engine = engine
        if threads is not None:
            torch.set_num_threads(threads)
        if mkldnn is not None:
            torch.backends.mkldnn.enabled = mkldnn
        yield
    finally:
        torch.backends.quantized.engine = old_engine
        torch.set_num_threads(old_threads)
        torch.backends.mkldnn.enabled = old_mkldnn


def for_conversion():
    """Conversion's numbers must not depend on the host's thread count: oneDNN's float convolutions sum in an order
    that follows the threads (MobileNetV2's outputs, hence BatchNorm statistics and calibration ranges, change
    between 1 and 2 threads), and on some CPUs torch's native kernels do too (an AVX-512 Xeon: MobileNetV2's
    output differs by 7e-16 between 1 and 2 threads with oneDNN off, enough to move quant_full's output by 1 LSB).
    So conversion runs on one intra-op thread with oneDNN off, and puts the engine, threads and oneDNN back
    afterwards (docs/facts.md EB10)."""
    return pinned(threads=1, mkldnn=False)


# --------------------------------------------------------------------------- memory of one model

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_kb(field: str) -> Optional[int]:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _release_free_memory() -> None:
    """Hand the allocator's free pages back to the system (glibc ``malloc_trim``), so that what the next block
    allocates shows as new resident memory instead of reusing pages an earlier model left behind."""
    import ctypes
    import ctypes.util

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


def reset_peak() -> Optional[int]:
    """Reset this process's peak resident size to its current size (Linux: ``5`` to /proc/self/clear_refs, see
    proc(5)); returns that size in kB, or None where the peak cannot be reset (then no per-model memory is shown)."""
    import gc

    gc.collect()
    _release_free_memory()
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return None
    return _status_kb("VmRSS")


def peak_above(baseline_kb: Optional[int]) -> Optional[int]:
    """The peak resident size since :func:`reset_peak` minus the size then: what the block added at its peak, kB."""
    if baseline_kb is None:
        return None
    peak = _status_kb("VmHWM")
    return None if peak is None else max(0, peak - baseline_kb)
