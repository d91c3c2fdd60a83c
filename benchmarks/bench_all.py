#!/usr/bin/env python3
"""A newcomer's cold runs, measured in one run and printed as ratios and seconds (issue 22 item 5).

Each command runs as a user runs it: a whole `invoke` process, in a fresh working directory with the default
relative build dir, no INVOKE_* variables, random weights (no download here), nothing converted before.

1. cold `invoke all` / cold `invoke convert --no-verify` (target <= 1.5): `all` converts, makes the app, verifies
   on the host NNAPI library and times the CPU models; convert only converts.  The per-stage seconds `all` records
   in build/all.json are printed as its profile.
2. cold `invoke convert --format torchscript,executorch` (both formats, its default verify included): seconds
   (target <= 60).

The sides alternate over --rounds (convert, all, both, convert, ...) so no side always runs on a warmer disk cache.

Usage: python benchmarks/bench_all.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INVOKE = [sys.executable, "-m", "invoke", "--search-root", str(ROOT)]
SIDES = {
    "convert": ["convert", "--weights", "random", "--no-verify"],
    "all": ["all", "--weights", "random"],
    "both formats": ["convert", "--weights", "random", "--format", "torchscript,executorch"],
}


def cold(args, cwd: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "ANDROID_", "TORCHDROID_"))}
    env["CI"] = "1"
    t0 = time.perf_counter()
    res = subprocess.run([*INVOKE, *args], cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"`invoke {' '.join(args)}` failed (exit {res.returncode}):\n{res.stderr[-3000:]}")
    return seconds


def stage_profile(cwd: Path) -> str:
    path = cwd / "build" / "all.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    stages = data.get("stages", [])
    return ", ".join(f"{s['stage']} {s['seconds']:.1f} s" for s in stages) or "(no build/all.json)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    times = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="bench-all-") as tmp:
        for r in range(a.rounds):
            for side, args in SIDES.items():
                cwd = Path(tmp) / f"{side.replace(' ', '-')}-{r}"
                cwd.mkdir()
                times[side].append(cold(args, cwd))
                print(f"round {r + 1}: cold {side:13s} {times[side][-1]:7.1f} s", flush=True)
                if side == "all":
                    print(f"         all's stages: {stage_profile(cwd)}", flush=True)
    mean = {side: statistics.mean(t) for side, t in times.items()}
    ratio = mean["all"] / mean["convert"]
    print(f"cold all / cold convert --no-verify: {ratio:6.2f}   (target <= 1.5) {'met' if ratio <= 1.5 else 'NOT met'}")
    both = mean["both formats"]
    print(f"cold convert, both formats:          {both:6.1f} s (target <= 60)  {'met' if both <= 60 else 'NOT met'}")
    print(f"(torch threads: {os.cpu_count()} cores; means over {a.rounds} round(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
