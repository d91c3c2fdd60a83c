"""Host-NNAPI latency of float MobileNetV2 as a ratio to the CPU model's host latency, measured in one run.

    /work/venv/bin/python benchmarks/bench_host_nnapi.py [--size 224] [--iters 20] [--warmup 3] [--threads 1]

Target: ratio <= 2.0.  Both models come from the same traced float MobileNetV2 (random weights, NHWC input,
as `invoke convert` makes them); the NNAPI one runs through torch's NNAPI runtime and the host libneuralnetworks.so.
Prints one JSON line with the medians and the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def median_ms(fn, x, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn(x)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    import torch
    import torchvision
    from torch.backends._nnapi.prepare import convert_model_to_nnapi

    import host_nnapi

    lib = host_nnapi.load()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torchvision.models.quantization.mobilenet_v2(weights=None, quantize=False).eval()
    model.fuse_model()
    model.classifier[0] = torch.nn.Identity()
    x = (torch.rand(1, 3, args.size, args.size) * 2 - 1).contiguous(memory_format=torch.channels_last)
    x.nnapi_nhwc = True
    with torch.no_grad():
        traced = torch.jit.trace(model, x)
        cpu = traced
        nnapi = convert_model_to_nnapi(traced, x)
        cpu_ms, nnapi_ms = [], []
        for _ in range(3):  # interleave so machine load hits both alike
            cpu_ms.append(median_ms(cpu, x, args.warmup, args.iters))
            nnapi_ms.append(median_ms(nnapi, x, args.warmup, args.iters))
        diff = float((cpu(x) - nnapi(x)).abs().max())
    cpu_med, nn_med = min(cpu_ms), min(nnapi_ms)
    ratio = nn_med / cpu_med
    print(json.dumps({"benchmark": "host_nnapi_float_mobilenetv2", "size": args.size, "threads": args.threads,
                      "iters": args.iters, "cpu_median_ms": round(cpu_med, 3), "host_nnapi_median_ms": round(nn_med, 3),
                      "ratio": round(ratio, 3), "target": 2.0, "meets_target": ratio <= 2.0,
                      "max_abs_diff": diff, "library": str(lib)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
