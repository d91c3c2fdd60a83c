"""The host's reference outputs for deploy's on-phone numerics check (issue 23 item 2).

For every model file of a manifest, on every input bundled in it: a CPU model run by the host's torch
(``host-cpu``); an NNAPI model run on the host NNAPI in each rounding (``host-nnapi-nnapi``,
``host-nnapi-qnnpack``): a phone's driver is right when it sits within tolerance of one of them.  Written to
``<models>/reference-outputs.json`` (toolchain/numerics_records.py), computed again only for files whose
bytes changed.  What the host cannot compute is recorded with the reason, never skipped silently.
torch is imported lazily.
"""

from __future__ import annotations

import contextlib
import logging
import zipfile
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from toolchain.numerics_records import (
    HOST_CPU,
    FileReference,
    ReferenceOutputs,
    TensorValues,
    host_nnapi_key,
    references_path,
)
from toolchain.records import ModelFile

from .endtoend import as_float, tensors
from .kernels import ROUNDING_MODES

log = logging.getLogger(__name__)


def ensure(models_dir: Path, files: Sequence[ModelFile], cache: Optional[Path] = None) -> ReferenceOutputs:
    """The reference record of ``models_dir`` with a current entry for every file of ``files``."""
    record = ReferenceOutputs.load_or_empty(references_path(models_dir))
    todo = [f for f in files if record.current(f.file, f.sha256) is None]
    if not todo:
        return record
    engine = contextlib.nullcontext()
    if any(zipfile.is_zipfile(f.path) for f in todo):  # torch only for files it can load
        from host_nnapi.verify import _qengine

        engine = _qengine("qnnpack")  # quantized weights are packed for the engine current at load time (as verify)
    from toolchain.logs import native_output_to_log

    with engine, native_output_to_log():  # torch's C++ warnings go to the run log, not between deploy's lines
        for f in todo:
            log.info("host reference outputs of %s", f.file)
            record.files[f.file] = file_reference(f, cache)
    record.write()
    return record


def file_reference(f: ModelFile, cache: Optional[Path] = None) -> FileReference:
    ref = FileReference(f.file, f.sha256, f.backend, f.mode)
    if not zipfile.is_zipfile(f.path):  # a TorchScript file is a zip archive: nothing to load (and no torch import)
        key = HOST_CPU if f.backend == "cpu" else ",".join(host_nnapi_key(r) for r in ROUNDING_MODES)
        ref.problems = {key: f"{f.file} is not a TorchScript file (not a zip archive): the host cannot run it"}
        return ref
    if f.backend == "nnapi":
        from . import availability

        ok, why = availability()
        keys = [host_nnapi_key(r) for r in ROUNDING_MODES]
        if not ok:
            ref.problems = {k: f"no host NNAPI here: {why}" for k in keys}
            return ref
        from . import runtime

        runtime.load(cache=cache)
        for r in ROUNDING_MODES:
            with runtime.using_rounding(r):
                _run_into(ref, host_nnapi_key(r), f.path)
    else:
        _run_into(ref, HOST_CPU, f.path)
    return ref


def _run_into(ref: FileReference, key: str, path: Path) -> None:
    try:
        ref.outputs[key], ref.inputs = bundled_outputs(path)
    except Exception as e:  # the host cannot run it: recorded with the reason (the phone's verdict is unknown)
        log.debug("reference %s of %s failed", key, path, exc_info=True)
        ref.problems[key] = f"the host could not run it: {type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"


def bundled_outputs(path: Path, run: Optional[Callable] = None) -> Tuple[List[TensorValues], int]:
    """Every output tensor of the model at ``path`` on each of its bundled inputs, run by run (``[input 0 output 0,
    input 0 output 1, ..., input 1 output 0, ...]``, a tuple's, list's or dict's tensors in the order the phone's
    binary prints them: deploy/numerics.py, as the ExecuTorch lane's host reference), and how many inputs."""
    import torch

    m = torch.jit.load(str(path), map_location="cpu").eval()
    out: List[TensorValues] = []
    bundled = m.get_all_bundled_inputs()
    with torch.no_grad():
        for inputs in bundled:
            out.extend(tensor_values(t) for t in tensors(m(*inputs)))
    return out, len(bundled)


def tensor_values(t) -> TensorValues:
    scale = zp = None
    if t.is_quantized:
        scale, zp = float(t.q_scale()), int(t.q_zero_point())
    return TensorValues(list(t.shape), [float(x) for x in as_float(t).reshape(-1).tolist()], scale, zp)
