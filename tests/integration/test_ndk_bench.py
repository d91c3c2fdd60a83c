"""Smoke test: the build-android benchmark runs with tiny settings and prints sane ratios."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_build_android_smoke(tmp_path):
    out = tmp_path / "bench.json"
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_build_android.py"), "--bulk-bytes", "50000",
                          "--history", "1", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    data = json.loads(out.read_text())
    assert 0 < data["noop_over_cold"] < 1
    assert 0 < data["pinned_fetch_bytes"] < data["full_clone_bytes"]
    assert "no-op rebuild" in res.stdout and "full clone" in res.stdout
