"""Small real TorchScript models (CPU and NNAPI) and a convert manifest for check-compat tests."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Optional

from toolchain.fsutil import sha256_file
from toolchain.records import MANIFEST_KIND, MANIFEST_NAME, MANIFEST_SCHEMA, write_record


def make_models_and_manifest(out: Path, git_version: Optional[str] = None, version: Optional[str] = None) -> Path:
    """conv+relu as CPU TorchScript and as an NNAPI model (torch's own converter); manifest.json beside them."""
    import torch
    from torch.backends._nnapi.prepare import convert_model_to_nnapi

    warnings.filterwarnings("ignore")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    x = torch.zeros(1, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    x.nnapi_nhwc = True
    traced = torch.jit.trace(model, x)
    traced.save(str(out / "tiny-quant_none-cpu.pt"))
    convert_model_to_nnapi(traced, x).save(str(out / "tiny-quant_none-nnapi.pt"))
    spec_in = {"shape": [1, 3, 8, 8], "dtype": "float32", "memory_format": "channels_last"}
    spec_out = {"shape": [1, 4, 6, 6], "dtype": "float32"}
    files = []
    for backend in ("cpu", "nnapi"):
        name = f"tiny-quant_none-{backend}.pt"
        files.append({"file": name, "sha256": sha256_file(out / name), "size": (out / name).stat().st_size,
                      "model": "tiny", "stem": "tiny", "mode": "none", "backend": backend,
                      "input": spec_in, "output": spec_out})
    conversions = {"tiny": {"torch": {"version": version or torch.__version__,
                                      "git_version": git_version or torch.version.git_version}}}
    write_record(out / MANIFEST_NAME, MANIFEST_KIND, MANIFEST_SCHEMA, {"files": files, "conversions": conversions})
    return out / MANIFEST_NAME
