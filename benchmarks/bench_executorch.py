#!/usr/bin/env python3
"""ExecuTorch XNNPACK vs legacy TorchScript CPU for the same MobileNetV2, measured in one run on this machine.

    .venv/bin/python benchmarks/bench_executorch.py [--models DIR] [--iters 30] [--warmup 5] [--threads 1]

Without --models it converts MobileNetV2 (random weights, BatchNorm statistics estimated on the built-in
calibration set, exactly as `invoke convert --weights random` does) into a temporary directory: the legacy
quant_none and quant_full TorchScript CPU models and the fp32/int8 XNNPACK .pte programs.  With --models it
uses a directory `invoke convert --format torchscript,executorch` wrote.

Prints the best median of each side and ExecuTorch's speed-up (legacy latency / ExecuTorch latency, > 1:
ExecuTorch is faster) for fp32-xnnpack.pte over TorchScript CPU quant_none and int8-xnnpack.pte over
TorchScript CPU quant_full, all at the same intra-op thread count, each pair interleaved over --rounds rounds
(so load from other processes hits both alike): the speed-up is the median of the per-round ones with their
range, and "no measured difference" when that range includes 1.0 (toolchain.stats.Comparison).  It also reproduces the spike's pair (eager PyTorch vs the
fp32 XNNPACK .pte, default threads) so its 52 ms vs 4.8 ms can be compared with this machine's numbers.
One JSON line at the end holds everything, with the machine's load average (the ratios are measured
interleaved, so load hits both sides; the absolute milliseconds are only meaningful on an idle machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def convert_into(out: Path, calibration_count: int) -> None:
    from converter import ConvertSettings, convert
    from converter.executorch import ExecutorchSettings, convert_executorch

    convert(ConvertSettings(out=out, weights="random", modes=("none", "full"), calibration_count=calibration_count))
    convert_executorch(ExecutorchSettings(out=out, weights="random", calibration_count=calibration_count,
                                          delegates=("xnnpack",)))


def best_median(call, warmup: int, iters: int) -> float:
    import statistics

    from converter.rounds import timed

    for _ in range(warmup):
        call()
    return statistics.median([timed(call) for _ in range(iters)])


def legacy_call(mf):
    import torch

    mf.check_hash()
    module = torch.jit.load(str(mf.path), map_location="cpu")
    inputs = module.get_all_bundled_inputs()[0]

    def call():
        with torch.no_grad():
            module(*inputs)
    return call


def pte_call(pf, example):
    from toolchain.records import load_method

    pf.check_hash()
    method = load_method(pf.path)
    return lambda: method.execute([example])


ROUND_RATIOS = {}  # label -> per-round ratios of the last pair() with that label (printed in the JSON)


def pair(legacy, pte, rounds: int, warmup: int, iters: int, label: str = ""):
    a, b = [], []
    for _ in range(rounds):  # interleaved
        a.append(best_median(legacy, warmup, iters))
        b.append(best_median(pte, warmup, iters))
    if label:
        ROUND_RATIOS[label] = [y / x for x, y in zip(a, b)]
    return min(a), min(b)


def rounds_verdict(label: str) -> dict:
    """ExecuTorch's speed-up over legacy in each round, their median (the headline) and range, and the verdict of
    toolchain.stats.Comparison, the one rule every timing comparison of torchdroid uses."""
    from toolchain.stats import compare

    c = compare([1.0 / x for x in ROUND_RATIOS[label]])
    return {"speedup_per_round": [round(x, 3) for x in c.per_round], "speedup": round(c.headline, 3),
            "low": round(c.low, 3), "high": round(c.high, 3), "verdict": c.verdict}


def eager_model():
    """The float MobileNetV2 of the conversion (same seed and BatchNorm estimation) in eager mode."""
    from converter.calibration import load_batch, parse_calibration
    from converter.models import build_float_model, estimate_batchnorm, parse_model, parse_weights

    spec = parse_model("mobilenet_v2")
    model, _ = build_float_model(spec, parse_weights("random", 0))
    estimate_batchnorm(model, load_batch(parse_calibration(None, 32, 0), spec.input_hw))
    return model.eval()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, help="a directory `invoke convert --format torchscript,executorch` wrote")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calibration-count", type=int, default=32)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory(prefix="torchdroid-bench-et-") as tmp:
        models = args.models or Path(tmp)
        if args.models is None:
            convert_into(models, args.calibration_count)
        print(json.dumps(measure(models, args)))
    return 0


def measure(models: Path, args) -> dict:
    import torch

    from converter.host_bench import set_threads
    from tests.executorch_support.lane import find_pte
    from toolchain.records import ConvertManifest

    man = ConvertManifest.load(models)
    legacy = {m: man.find(f"mobilenetv2-quant_{m}")["cpu"] for m in ("none", "full")}
    pte = {p: find_pte(models, f"mobilenetv2-{p}-xnnpack") for p in ("fp32", "int8")}
    example = torch.load(models / "mobilenetv2-executorch-reference.pt", weights_only=True)["inputs"][0]
    executorch_threads = set_threads(args.threads)
    ts_fp32, et_fp32 = pair(legacy_call(legacy["none"]), pte_call(pte["fp32"], example), args.rounds, args.warmup,
                            args.iters, "fp32")
    ts_int8, et_int8 = pair(legacy_call(legacy["full"]), pte_call(pte["int8"], example), args.rounds, args.warmup,
                            args.iters, "int8")
    spike = spike_pair(pte["fp32"], example, args)
    return {"benchmark": "executorch_vs_torchscript_mobilenetv2", "threads": args.threads,
            "executorch_threads": executorch_threads, "iters": args.iters, "rounds": args.rounds,
            "torch": torch.__version__, "cpus": os.cpu_count(),
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],  # other work on the machine skews all numbers
            "torchscript_cpu_quant_none_ms": round(ts_fp32, 3), "executorch_fp32_xnnpack_ms": round(et_fp32, 3),
            "fp32_xnnpack_over_quant_none": rounds_verdict("fp32"),
            "torchscript_cpu_quant_full_ms": round(ts_int8, 3), "executorch_int8_xnnpack_ms": round(et_int8, 3),
            "int8_xnnpack_over_quant_full": rounds_verdict("int8"),
            "pte_sizes_mb": {p: round(f.size / 1e6, 2) for p, f in pte.items()},
            "spike": spike}


def spike_pair(pf, example, args) -> dict:
    """The spike's comparison: eager PyTorch vs the fp32 XNNPACK .pte, at default threads and at --threads."""
    import torch

    from converter.host_bench import set_threads

    model = eager_model()

    def eager():
        with torch.no_grad():
            model(example)
    out = {}
    for label, threads in (("default_threads", os.cpu_count() or 1), ("bench_threads", args.threads)):
        executorch_threads = set_threads(threads)
        e, x = pair(eager, pte_call(pf, example), args.rounds, args.warmup, args.iters, f"spike-{label}")
        out[label] = {"threads": threads, "executorch_threads": executorch_threads, "eager_ms": round(e, 3),
                      "executorch_fp32_xnnpack_ms": round(x, 3),
                      "executorch_over_eager": rounds_verdict(f"spike-{label}")}
    with torch.no_grad():
        out["max_abs_diff_vs_eager"] = float((pte_call_output(pf, example) - model(example)).abs().max())
    out["spike_claim"] = {"eager_ms": 52.0, "executorch_ms": 4.8, "max_abs_diff": 3e-15}
    set_threads(args.threads)
    return out


def pte_call_output(pf, example):
    from toolchain.records import load_method

    return load_method(pf.path).execute([example])[0]


if __name__ == "__main__":
    sys.exit(main())
