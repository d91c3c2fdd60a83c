"""The quant_full app path on the host: what the lookup table and the uint8 wrapper cost.

Measured in one run, printed as ratios (no timed assertions anywhere):
  * per-frame preprocessing: table lookup (what the app's Java does) vs the float pipeline
    (normalise + quantize_per_tensor) it replaces;
  * inference: the packaged uint8 app model vs the converted CPU model fed a pre-quantized tensor
    (the wrapper's overhead: reinterpreting bytes, a permuted view, dequantize);
  * sizes: the app model vs the converted file.

  python benchmarks/appgen_app_path.py [--models build/models] [--variant quant_full] [--iters 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _median_ms(fn, iters: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=Path("build/models"))
    ap.add_argument("--variant", default="quant_full")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)

    import torch

    from appgen import assets
    from tests.appgen_support import app_input
    from appgen.app_model import wrap_uint8_input
    from toolchain.records import ConvertManifest

    torch.set_num_threads(1)
    cpu = ConvertManifest.load(args.models).find(args.variant)["cpu"]
    if cpu.input.dtype != "quint8":
        print(f"{args.variant} takes {cpu.input.dtype} input: the uint8 app path is only used for quant_full")
        return 2
    size = cpu.input.shape[-1]
    mean, std = assets.normalization(cpu.conversion)
    lut = assets.input_lut(mean, std, cpu.input.scale, cpu.input.zero_point)
    pixels = app_input.load_pixels(assets.sample_image(), size)

    def lut_path():
        return torch.from_numpy(app_input.apply_lut(pixels, lut))

    m = torch.tensor(mean).view(1, 3, 1, 1)
    s = torch.tensor(std).view(1, 3, 1, 1)

    def float_path():
        x = torch.from_numpy(pixels).permute(2, 0, 1).unsqueeze(0).float() / 255.0
        return torch.quantize_per_tensor((x - m) / s, cpu.input.scale, cpu.input.zero_point, torch.quint8)

    pre_lut = _median_ms(lut_path, args.iters)
    pre_float = _median_ms(float_path, args.iters)

    with tempfile.TemporaryDirectory() as tmp:
        app_file = wrap_uint8_input(cpu.path, Path(tmp) / "app.pt", cpu.input.scale, cpu.input.zero_point)
        app_model = torch.jit.load(str(app_file))
        app_size = app_file.stat().st_size
    model = torch.jit.load(str(cpu.path))
    q = float_path().contiguous(memory_format=torch.channels_last)
    u8 = lut_path()
    with torch.no_grad():
        inf_app = _median_ms(lambda: app_model(u8), args.iters)
        inf_raw = _median_ms(lambda: model(q).dequantize(), args.iters)
        same_top1 = int(app_model(u8).argmax()) == int(model(q).dequantize().argmax())

    result = {
        "model": cpu.file,
        "iters": args.iters,
        "preprocess_lut_ms": round(pre_lut, 4),
        "preprocess_float_ms": round(pre_float, 4),
        "preprocess_ratio_lut_over_float": round(pre_lut / pre_float, 3),
        "inference_app_ms": round(inf_app, 3),
        "inference_converted_ms": round(inf_raw, 3),
        "inference_ratio_app_over_converted": round(inf_app / inf_raw, 3),
        "size_ratio_app_over_converted": round(app_size / cpu.size, 4),
        "lut_bytes": len(lut),
        "same_top1": same_top1,
    }
    print(f"preprocessing per frame: table {pre_lut:.3f} ms vs float+quantize {pre_float:.3f} ms "
          f"(ratio {result['preprocess_ratio_lut_over_float']})")
    print(f"inference: app uint8 model {inf_app:.2f} ms vs converted model {inf_raw:.2f} ms "
          f"(ratio {result['inference_ratio_app_over_converted']}; same top-1: {same_top1})")
    print(f"size: app model / converted = {result['size_ratio_app_over_converted']}, table {len(lut)} bytes")
    print(json.dumps(result))
    return 0 if same_top1 else 1


if __name__ == "__main__":
    sys.exit(main())
