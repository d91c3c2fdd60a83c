#!/usr/bin/env python3
"""Host numbers that do not depend on what ran before (issue 24 item 1), measured in one run.

The same converted files are timed twice: by `run_host_bench` in a process that has just converted (as `invoke
all` does; a conversion used to leave the QNNPACK engine behind, which made the quantized models ~3x slower) and
by `invoke bench --host` in a fresh process.  Printed per file: the fastest iteration of each side and their
ratio (target: < 1.2 on a quiet machine; the test tests/integration/test_host_numbers.py checks the cause, the
engine and thread count both sides record, not the time).

Usage: python benchmarks/bench_host_numbers.py [--iter N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iter", type=int, default=20)
    args = ap.parse_args()
    from converter import ConvertSettings, convert
    from converter.host_bench import HostBenchSettings, run_host_bench

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        models = tmp / "models"
        convert(ConvertSettings(out=models, weights="random", calibration_count=8, build_dir=tmp / "build"))
        run_host_bench(HostBenchSettings(models=models, warmup=2, iters=args.iter, threads=1, repeat=2,
                                         out=tmp / "in-process"))
        subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(ROOT), "bench", "--host", "--models",
                        str(models), "--warmup", "2", "--iter", str(args.iter), "--repeat", "2", "--threads", "1",
                        "--out", str(tmp / "fresh")], cwd=tmp, check=True, capture_output=True)
        a = json.loads((tmp / "in-process" / "host-bench.json").read_text())["rows"]
        b = json.loads((tmp / "fresh" / "host-bench.json").read_text())["rows"]
    print(f"{'file':40} {'after convert ms':>17} {'fresh ms':>9} {'ratio':>6}")
    for ra, rb in zip(a, b):
        ta, tb = ra["timing"], rb["timing"]
        ratio = max(ta["min_ms"], tb["min_ms"]) / min(ta["min_ms"], tb["min_ms"])
        print(f"{ra['file']:40} {ta['min_ms']:17.2f} {tb['min_ms']:9.2f} {ratio:6.2f}")


if __name__ == "__main__":
    main()
