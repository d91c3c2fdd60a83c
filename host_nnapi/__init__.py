"""Host NNAPI: run converted NNAPI models on this machine through torch's own NNAPI runtime.

``load()`` builds (once, cached) and loads a ``libneuralnetworks.so`` whose
kernels are reference implementations of the operations torch's NNAPI
serializer emits; :func:`host_nnapi.verify.verify` runs NNAPI and CPU models side by side.
torch is imported lazily.
"""

from __future__ import annotations

from typing import Tuple


def availability() -> Tuple[bool, str]:
    """(True, "") when the host NNAPI library can be built and used here, else (False, why)."""
    import platform

    from toolchain.errors import TorchdroidError

    if platform.system() != "Linux":
        return False, f"the host NNAPI needs Linux, this is {platform.system()}"
    try:
        from .build import CCompiler

        CCompiler.locate()
    except TorchdroidError as e:
        return False, e.what
    return True, ""


def available() -> bool:
    """Can the host NNAPI library be built and loaded on this machine?"""
    return availability()[0]


def load(path=None, cache=None):
    """Build (first use) and load the library; returns its path.  Call before the first NNAPI model runs."""
    from .runtime import load as _load

    return _load(path, cache)
