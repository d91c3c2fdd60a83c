#!/usr/bin/env python3
"""Convert benchmarks, measured in one run and printed as ratios.

1. unchanged / cold `invoke convert`, whole processes as a user runs them (target <= 0.1): a fresh
   working directory with the default relative build dir, `invoke convert --weights random` twice
   (the default verify-after-convert included); the second run finds everything current from hashes
   and records alone.
2. torchdroid's in-process conversion of the six MobileNetV2 files / the PyTorch NNAPI tutorial's flow
   for the same six files, same process (target <= 0.8).  The tutorial downloads pre-quantized weights;
   offline, its quantized modes are reproduced with the same eager qnnpack calibration torchdroid uses,
   per mode, as the tutorial builds each mode from scratch.  torchvision is imported before timing, and
   the tutorial runs before and after torchdroid (mean), so neither side pays the imports or a cold cache.

Usage: python benchmarks/bench_convert.py [--calibration-count N] [--skip-cli] [--skip-tutorial]
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
INVOKE = str(Path(sys.executable).parent / "invoke")


def cli_convert(cwd: Path, count: int) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_")}
    env.update(CI="1", INVOKE_CONVERT_CALIBRATION_COUNT=str(count))
    t0 = time.perf_counter()
    subprocess.run([INVOKE, "--search-root", str(ROOT), "convert", "--weights", "random"], cwd=cwd, check=True,
                   capture_output=True, env=env)
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


def verdict(ratio: float, target: float) -> str:
    return "OK" if ratio <= target else "MISSED"


def bench_cli(tmp: Path, count: int) -> None:
    (tmp / "user").mkdir()
    cold = cli_convert(tmp / "user", count)
    warm = cli_convert(tmp / "user", count)
    print(f"cold invoke convert (incl. verify):  {cold:8.2f} s", flush=True)
    print(f"unchanged invoke convert:            {warm:8.2f} s")
    print(f"unchanged / cold ratio:              {warm / cold:8.3f}   (target <= 0.1) {verdict(warm / cold, 0.1)}")


def bench_tutorial(tmp: Path, count: int, rounds: int = 3) -> None:
    import torchvision.models.quantization  # noqa: F401  (imports are a process cost, not either flow's)

    from converter import ConvertSettings, convert
    from converter.calibration import synthetic_images

    batch = synthetic_images(count, 0, (224, 224))
    wall = {"tutorial": [], "torchdroid": []}
    cpu = {"tutorial": [], "torchdroid": []}
    for i, who in enumerate(("tutorial", "torchdroid", "tutorial", "torchdroid")[:rounds]):
        out = tmp / f"{who}{i}"
        out.mkdir()
        t0, c0 = time.perf_counter(), time.process_time()
        if who == "tutorial":
            tutorial_flow(out, copy.deepcopy(batch))
        else:
            convert(ConvertSettings(out=out, weights="random", calibration_count=count, build_dir=tmp / "build"))
        wall[who].append(time.perf_counter() - t0)
        cpu[who].append(time.process_time() - c0)
        print(f"  {who}: {wall[who][-1]:.2f} s wall, {cpu[who][-1]:.2f} s CPU", flush=True)
    mean = {k: {w: sum(v[w]) / len(v[w]) for w in v} for k, v in (("wall", wall), ("cpu", cpu))}
    for kind in ("wall", "cpu"):
        ratio = mean[kind]["torchdroid"] / mean[kind]["tutorial"]
        print(f"torchdroid / tutorial, six files, {kind:4s} time: {mean[kind]['torchdroid']:7.2f} s / "
              f"{mean[kind]['tutorial']:7.2f} s = {ratio:6.3f}   (target <= 0.8) {verdict(ratio, 0.8)}")
    print("(wall time is what the target means on an idle machine; CPU time is steadier on a busy one)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration-count", type=int, default=32)
    ap.add_argument("--skip-cli", action="store_true")
    ap.add_argument("--skip-tutorial", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, choices=(2, 3, 4),
                    help="alternating runs: tutorial, torchdroid, tutorial[, torchdroid]")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory(prefix="td-bench-convert-") as tmp:
        if not args.skip_cli:
            bench_cli(Path(tmp), args.calibration_count)
        if not args.skip_tutorial:
            bench_tutorial(Path(tmp), args.calibration_count, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
