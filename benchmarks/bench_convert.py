#!/usr/bin/env python3
"""Convert benchmarks, measured in one run and printed as ratios.

1. warm re-run / cold run of `invoke convert` (target <= 0.1): the same CLI command twice
   into a fresh directory; the second run must reuse everything.
2. torchdroid's in-process conversion of all six MobileNetV2 files / the PyTorch NNAPI
   tutorial's flow for the same six files, both in one process (target <= 1.0).
   The tutorial downloads pre-quantized weights; offline, its quantized modes are
   reproduced with the same eager qnnpack calibration torchdroid uses, per mode, as the
   tutorial builds each mode from scratch.

Usage: python benchmarks/bench_convert.py [--calibration-count N]
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cli_convert(out: Path, count: int) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "invoke", "convert", "--weights", "random", "--out", str(out)],
                   cwd=ROOT, check=True, capture_output=True, env=dict(os.environ, CI="1",
                   INVOKE_CONVERT_CALIBRATION_COUNT=str(count)))
    return time.perf_counter() - t0


def tutorial_flow(out: Path, batch) -> None:
    """The tutorial's make_mobilenetv2_nnapi() for none/core/full (quantization done locally)."""
    import torch
    import torch.backends._nnapi.prepare
    import torch.utils.bundled_inputs
    import torchvision.models.quantization.mobilenet

    for quantize_mode in ("none", "core", "full"):
        quantize_core, quantize_iface = {"none": (False, False), "core": (True, False), "full": (True, True)}[quantize_mode]
        torch.manual_seed(0)
        model = torchvision.models.quantization.mobilenet.mobilenet_v2(weights=None, quantize=False)
        model.eval()
        model.fuse_model()
        if quantize_core:  # stands in for pretrained=True, quantize=True
            torch.backends.quantized.engine = "qnnpack"
            model.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
            torch.ao.quantization.prepare(model, inplace=True)
            for x in batch:
                model(x)
            torch.ao.quantization.convert(model, inplace=True)
        model.classifier[0] = torch.nn.Identity()
        input_float = torch.zeros(1, 3, 224, 224)
        input_tensor = input_float
        if quantize_core:
            quantizer, dequantizer = model.quant, model.dequant
            model.quant = torch.nn.Identity()
            model.dequant = torch.nn.Identity()
            input_tensor = quantizer(input_float)
        input_tensor = input_tensor.contiguous(memory_format=torch.channels_last)
        input_tensor.nnapi_nhwc = True
        with torch.no_grad():
            traced = torch.jit.trace(model, input_tensor)
        nnapi_model = torch.backends._nnapi.prepare.convert_model_to_nnapi(traced, input_tensor)
        if quantize_core and not quantize_iface:
            nnapi_model = torch.nn.Sequential(quantizer, nnapi_model, dequantizer)
            model.quant = quantizer
            model.dequant = dequantizer
            input_tensor = input_float.contiguous(memory_format=torch.channels_last)

        class BundleWrapper(torch.nn.Module):
            def __init__(self, mod):
                super().__init__()
                self.mod = mod

            def forward(self, arg):
                return self.mod(arg)

        cpu = torch.jit.script(BundleWrapper(model))  # optimize_for_mobile raises without XNNPACK
        nnapi = torch.jit.script(BundleWrapper(nnapi_model))
        torch.utils.bundled_inputs.augment_model_with_bundled_inputs(
            cpu, [(torch.utils.bundled_inputs.bundle_large_tensor(input_tensor),)])
        torch.utils.bundled_inputs.augment_model_with_bundled_inputs(
            nnapi, [(torch.utils.bundled_inputs.bundle_large_tensor(input_tensor),)])
        cpu.save(str(out / f"mobilenetv2-quant_{quantize_mode}-cpu.pt"))
        nnapi.save(str(out / f"mobilenetv2-quant_{quantize_mode}-nnapi.pt"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration-count", type=int, default=32)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory(prefix="td-bench-convert-") as tmp:
        tmp = Path(tmp)
        cold = cli_convert(tmp / "cli", args.calibration_count)
        warm = cli_convert(tmp / "cli", args.calibration_count)
        print(f"cold invoke convert:  {cold:8.2f} s")
        print(f"warm invoke convert:  {warm:8.2f} s")
        print(f"warm / cold ratio:    {warm / cold:8.3f}   (target <= 0.1) {'OK' if warm / cold <= 0.1 else 'MISSED'}")

        from converter import ConvertSettings, convert
        from converter.calibration import synthetic_images

        batch = synthetic_images(args.calibration_count, 0, (224, 224))
        (tmp / "tut1").mkdir()
        (tmp / "tut2").mkdir()
        t0 = time.perf_counter()
        tutorial_flow(tmp / "tut1", copy.deepcopy(batch))
        tut1 = time.perf_counter() - t0
        t0 = time.perf_counter()
        convert(ConvertSettings(out=tmp / "ours", weights="random", calibration_count=args.calibration_count,
                                build_dir=tmp / "build"))
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        tutorial_flow(tmp / "tut2", copy.deepcopy(batch))
        tut2 = time.perf_counter() - t0
        tut = (tut1 + tut2) / 2
        print(f"tutorial flow, six files: {tut1:6.2f} s and {tut2:6.2f} s (mean {tut:.2f} s)")
        print(f"torchdroid convert, six files (incl. host check, manifest): {ours:6.2f} s")
        print(f"torchdroid / tutorial ratio: {ours / tut:6.3f}   (target <= 1.0) {'OK' if ours / tut <= 1.0 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
