"""benchmarks/bench_host_nnapi.py runs and prints its one JSON line (tiny settings: numbers are not judged here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import host_nnapi

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not host_nnapi.available(), reason="no C compiler: host NNAPI unavailable")
def test_benchmark_script_prints_medians_and_their_ratio():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_host_nnapi.py"), "--size", "32", "--iters", "2",
                          "--warmup", "1"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    row = json.loads(res.stdout.strip().splitlines()[-1])
    assert row["benchmark"] == "host_nnapi_float_mobilenetv2" and row["size"] == 32 and row["target"] == 2.0
    assert row["cpu_median_ms"] > 0 and row["host_nnapi_median_ms"] > 0
    assert row["ratio"] == pytest.approx(row["host_nnapi_median_ms"] / row["cpu_median_ms"], rel=0.01)
    assert row["meets_target"] == (row["ratio"] <= 2.0)
    assert row["max_abs_diff"] < 1e-3  # the host NNAPI computed the same MobileNetV2
    assert row["library"].endswith("libneuralnetworks.so")
