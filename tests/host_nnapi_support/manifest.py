"""Write converted models and a convert manifest the way `invoke convert` records them (test helper)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Tuple

import torch

from toolchain.fsutil import sha256_file
from toolchain.records import MANIFEST_KIND, MANIFEST_NAME, MANIFEST_SCHEMA, write_record


def _spec(t: torch.Tensor) -> dict:
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).replace("torch.", ""),
        "memory_format": "channels_last" if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last)
        and not t.is_contiguous() else "contiguous",
        "scale": float(t.q_scale()) if t.is_quantized else None,
        "zero_point": int(t.q_zero_point()) if t.is_quantized else None,
    }


def write_models(out: Path, variants: Dict[str, Tuple[object, object, torch.Tensor]], stem: str = "mobilenetv2") -> Path:
    """``variants``: mode -> (cpu module, nnapi module, example input).  Returns the manifest path."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for mode, (cpu, nnapi, x) in variants.items():
        with torch.no_grad():
            y = cpu(x)
        for backend, module in (("cpu", cpu), ("nnapi", nnapi)):
            scripted = module if isinstance(module, torch.jit.ScriptModule) else torch.jit.script(module)
            name = f"{stem}-quant_{mode}-{backend}.pt"
            scripted.save(str(out / name))
            files.append({
                "file": name, "sha256": sha256_file(out / name), "size": (out / name).stat().st_size,
                "model": "mobilenet_v2", "stem": stem, "mode": mode, "backend": backend,
                "input": _spec(x), "output": _spec(y),
            })
    return write_record(out / MANIFEST_NAME, MANIFEST_KIND, MANIFEST_SCHEMA,
                        {"conversions": {stem: {"torch": {"version": torch.__version__}}}, "files": files})
