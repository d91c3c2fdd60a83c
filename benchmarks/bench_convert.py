#!/usr/bin/env python3
"""Convert benchmarks, measured in one run and printed as ratios.

1. unchanged / cold `invoke convert`, whole processes as a user runs them (target <= 0.1): a fresh
   working directory with the default relative build dir, `invoke convert --weights random` twice
   (the default verify-after-convert included); the second run finds everything current from hashes
   and records alone.
2. torchdroid's in-process conversion of the six MobileNetV2 files / the PyTorch NNAPI tutorial's flow
   ("(Beta) Convert MobileNetV2 to NNAPI", make_mobilenetv2_nnapi() for none/core/full) for the same six files,
   same process, same torch thread count (printed), target <= 0.8, measured two ways, each with equal work on both
   sides (checked: the largest output difference of the CPU models is printed, 0 when they make the same models):
   a. the tutorial as written: `mobilenet_v2(pretrained=True, quantize=...)` reads torchvision's float weights and,
      for core/full, its pre-quantized QNNPACK weights from the torch hub cache.  torchdroid gets the same two files
      (`--weights FILE --quantized-weights FILE`) and calibrates nothing either.
   b. both sides calibrate: torchdroid's default (`--quantized-weights calibrate`) against the tutorial with its
      quantized modes calibrated the way torchdroid calibrates (same qconfig, images and chunks), each mode from
      scratch as the tutorial builds it.
   Offline, the weight files are stand-ins made before timing: seeded random float weights with BatchNorm statistics
   estimated on the calibration images (so quantization is not degenerate), and that model quantized (b's way) as
   the pre-quantized file.  torchvision is imported before timing, and the sides alternate (tutorial, torchdroid,
   tutorial; mean), so neither pays the imports or a cold cache.  Information: torchdroid calibrating / the tutorial
   as written (not the same work), and with --with-random torchdroid with --weights random.

Usage: python benchmarks/bench_convert.py [--calibration-count N] [--skip-cli] [--skip-tutorial] [--rounds N]
       [--with-random]
"""

from __future__ import annotations

import argparse
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


MODES = {"none": (False, False), "core": (True, False), "full": (True, True)}  # (quantize_core, quantize_iface)


def _tutorial_model(quantize_mode: str, weights: Path, how: str, calibration):
    """The tutorial's ``mobilenet_v2(pretrained=True, quantize=quantize_core)`` with the weights read from disk.

    ``how == "as-written"``: torchvision's own quantize_model (one dummy forward) and the pre-quantized state_dict,
    as the tutorial gets them; ``how == "calibrated"``: the float weights, calibrated here exactly as torchdroid
    calibrates (qnnpack default qconfig, the same images in the same chunks), so both sides make the same models.
    """
    import torch
    import torchvision.models.quantization.mobilenet as tvq

    from converter.export import CALIBRATION_CHUNK

    quantize_core = MODES[quantize_mode][0]
    if how == "as-written":
        model = tvq.mobilenet_v2(weights=None, quantize=quantize_core, backend="qnnpack")
        model.load_state_dict(torch.load(weights["quantized" if quantize_core else "float"], weights_only=True))
        model.eval()
        if not quantize_core:
            model.fuse_model()
        return model
    model = tvq.mobilenet_v2(weights=None, quantize=False)
    model.load_state_dict(torch.load(weights["float"], weights_only=True))
    model.eval()
    model.fuse_model()
    if quantize_core:
        torch.backends.quantized.engine = "qnnpack"
        model.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
        torch.ao.quantization.prepare(model, inplace=True)
        with torch.no_grad():
            for i in range(0, len(calibration), CALIBRATION_CHUNK):
                model(torch.cat(calibration[i:i + CALIBRATION_CHUNK], 0))
        torch.ao.quantization.convert(model, inplace=True)
    return model


def tutorial_flow(out: Path, weights, how: str = "calibrated", calibration=()) -> None:
    """The tutorial's make_mobilenetv2_nnapi() for none/core/full, each mode from scratch as the tutorial does."""
    import torch
    import torch.backends._nnapi.prepare
    import torch.utils.bundled_inputs

    for quantize_mode in ("none", "core", "full"):
        quantize_core, quantize_iface = MODES[quantize_mode]
        model = _tutorial_model(quantize_mode, weights, how, calibration)
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

        # the tutorial scripts the CPU model bare; wrapped here (a new class per call) because TorchScript shares a
        # class's compiled type within a process and bundled inputs can be added to a type only once (rounds)
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


def stand_in_weights(tmp: Path, batch) -> dict:
    """Offline stand-ins for the tutorial's torch hub cache, made before timing: a float state_dict (torchdroid's
    seeded random weights with BatchNorm statistics estimated on the calibration images, so quantization is not
    degenerate) and the quantized state_dict the tutorial would download (that float model, calibrated)."""
    import torch

    from converter.models import build_float_model, estimate_batchnorm, parse_model, parse_weights

    model, _ = build_float_model(parse_model("mobilenet_v2"), parse_weights("random", 0))
    estimate_batchnorm(model, batch)
    paths = {"float": tmp / "float-weights.pth", "quantized": tmp / "quantized-weights.pth"}
    torch.save(model.state_dict(), paths["float"])
    torch.save(_tutorial_model("full", paths, "calibrated", batch).state_dict(), paths["quantized"])
    return paths


def same_models(a: Path, b: Path, probe) -> str:
    """Largest output difference of the two sides' CPU files on one input: they must make the same models."""
    import torch

    worst = 0.0
    for mode in ("none", "core", "full"):
        x = probe.contiguous(memory_format=torch.channels_last)
        if mode == "full":  # quint8 in: the quantizer's own parameters, read from the saved core model
            m = torch.jit.load(str(b / "mobilenetv2-quant_core-cpu.pt"))
            q = m.mod.quant
            x = torch.quantize_per_tensor(x, float(q.scale), int(q.zero_point), torch.quint8)
        ys = []
        for side in (a, b):
            y = torch.jit.load(str(side / f"mobilenetv2-quant_{mode}-cpu.pt"))(x)
            ys.append(y.dequantize() if y.is_quantized else y)
        worst = max(worst, float((ys[0] - ys[1]).abs().max()))
    return f"largest output difference tutorial vs torchdroid, CPU models of the three modes: {worst:.3g}"


def timed(label: str, run) -> tuple:
    t0, c0 = time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"  {label}: {wall:.2f} s wall, {cpu:.2f} s CPU", flush=True)
    return wall, cpu


def alternate(label: str, sides: dict, rounds: int) -> dict:
    """Run the two ``sides`` ({name: (description, run(out_dir))}) alternately, first side first; print each run
    and the mean ratio second/first (wall and CPU).  Returns ``{"wall": {side: mean}, "cpu": {...}}``."""
    names = list(sides)
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    for i in range(rounds):
        who = names[i % 2]
        text, run = sides[who]
        w, c = timed(text, lambda: run(i))
        wall[who].append(w)
        cpu[who].append(c)
    mean = {k: {n: sum(v[n]) / len(v[n]) for n in names} for k, v in (("wall", wall), ("cpu", cpu))}
    first, second = names
    for kind in ("wall", "cpu"):
        ratio = mean[kind][second] / mean[kind][first]
        print(f"{label}, six files, {kind:4s} time: {mean[kind][second]:7.2f} s / {mean[kind][first]:7.2f} s = "
              f"{ratio:6.3f}   (target <= 0.8) {verdict(ratio, 0.8)}", flush=True)
    best = {k: {n: min(v[n]) for n in names} for k, v in (("wall", wall), ("cpu", cpu))}
    print(f"  least disturbed run of each side: {best['wall'][second] / best['wall'][first]:6.3f} wall, "
          f"{best['cpu'][second] / best['cpu'][first]:6.3f} CPU (other work on the machine inflates single runs)")
    return mean


def bench_tutorial(tmp: Path, count: int, rounds: int = 3, with_random: bool = False) -> None:
    import torch
    import torchvision.models.quantization  # noqa: F401  (imports are a process cost, not either flow's)

    from converter import ConvertSettings, convert
    from converter.calibration import synthetic_images

    batch = synthetic_images(count, 0, (224, 224))
    weights = stand_in_weights(tmp, batch)
    print(f"torch threads: {torch.get_num_threads()} (both flows, same process); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)

    def torchdroid(out: Path, how: str = "file", quantized: str = "calibrate") -> None:
        out.mkdir()
        convert(ConvertSettings(out=out, weights=str(weights["float"]) if how == "file" else "random",
                                calibration_count=count, build_dir=tmp / "build", quantized_weights=quantized))

    def tutorial(out: Path, how: str) -> None:
        out.mkdir()
        tutorial_flow(out, weights, how, list(batch))

    print("1. the tutorial as written: its quantized modes load torchvision's pre-quantized weights (stand-in made "
          "before timing); torchdroid gets the same two files (--weights FILE --quantized-weights FILE)")
    as_written = alternate("torchdroid / tutorial as written, same weight files", {
        "tutorial": ("tutorial as written (float + pre-quantized weights)",
                     lambda i: tutorial(tmp / f"tw{i}", "as-written")),
        "torchdroid": ("torchdroid --weights FILE --quantized-weights FILE",
                       lambda i: torchdroid(tmp / f"dq{i}", quantized=str(weights["quantized"])))}, rounds)
    print(same_models(tmp / "tw0", tmp / "dq1", batch[1]))
    print("2. both sides calibrate (torchdroid's default: no pre-quantized weights; the tutorial's quantized modes "
          "calibrated the way torchdroid calibrates)")
    calibrated = alternate("torchdroid / tutorial, both calibrating", {
        "tutorial": ("tutorial, calibrated like torchdroid", lambda i: tutorial(tmp / f"tc{i}", "calibrated")),
        "torchdroid": ("torchdroid --weights FILE (calibrates)", lambda i: torchdroid(tmp / f"dc{i}"))}, rounds)
    print(same_models(tmp / "tc0", tmp / "dc1", batch[1]))
    print("(wall time is what the target means on an idle machine; CPU time is steadier on a busy one)")
    print(f"information: torchdroid calibrating / tutorial as written (not the same work): "
          f"{calibrated['wall']['torchdroid'] / as_written['wall']['tutorial']:6.3f} wall")
    if with_random:
        timed("torchdroid --weights random (adds the BatchNorm re-estimation)", lambda: torchdroid(tmp / "random", "random"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration-count", type=int, default=32)
    ap.add_argument("--skip-cli", action="store_true")
    ap.add_argument("--skip-tutorial", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, choices=(2, 3, 4),
                    help="alternating runs: tutorial, torchdroid, tutorial[, torchdroid]")
    ap.add_argument("--with-random", action="store_true",
                    help="also time torchdroid with --weights random (information, not the target)")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory(prefix="td-bench-convert-") as tmp:
        if not args.skip_cli:
            bench_cli(Path(tmp), args.calibration_count)
        if not args.skip_tutorial:
            bench_tutorial(Path(tmp), args.calibration_count, args.rounds, args.with_random)
    return 0


if __name__ == "__main__":
    sys.exit(main())
