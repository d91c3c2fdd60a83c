"""Smoke test: benchmarks/appgen_app_path.py runs with tiny settings and reports consistent numbers."""

import json
import subprocess
import sys
from pathlib import Path

from tests.appgen_support.models import tiny_models

ROOT = Path(__file__).resolve().parents[2]


def test_app_path_benchmark_smoke():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks/appgen_app_path.py"), "--models", str(tiny_models()),
                          "--iters", "2"], capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["model"] == "tiny_net-quant_full-cpu.pt" and result["same_top1"] is True
    assert result["lut_bytes"] == 768
    assert result["preprocess_lut_ms"] > 0 and result["inference_app_ms"] > 0
    assert 0.5 < result["size_ratio_app_over_converted"] < 2.0
