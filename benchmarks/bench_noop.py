#!/usr/bin/env python3
"""No-op benchmarks: unchanged `invoke convert` and `invoke all`, whole processes, in one run.

A fresh working directory (default relative build dir, no INVOKE_* variables), a cold run first, then
the same command again on the unchanged tree.  For each unchanged run it prints the seconds and
whether torch was imported (PYTHONPROFILEIMPORTTIME), since an unchanged run must decide from
hashes and records alone.

Targets (issue 14): unchanged `invoke convert` / cold `invoke convert` <= 0.1; unchanged `invoke all`
<= 5 s on an idle 2-core machine.

With --run-main it also times `./run main` twice in this checkout (its own build/, as a user runs it; the
first run converts when build/models is not current) and prints the unchanged run's seconds.

Usage: python benchmarks/bench_noop.py [--calibration-count N] [--skip-all] [--run-main]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INVOKE = str(Path(sys.executable).parent / "invoke")


def run(cwd: Path, args, count: int, check: bool = True):
    """(seconds, torch imported?, exit code) of one whole `invoke` process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "ANDROID_"))}
    env.update(CI="1", INVOKE_CONVERT_CALIBRATION_COUNT=str(count), PYTHONPROFILEIMPORTTIME="1")
    t0 = time.perf_counter()
    res = subprocess.run([INVOKE, "--search-root", str(ROOT), *args], cwd=cwd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    if check and res.returncode != 0:
        sys.exit(f"`invoke {' '.join(args)}` failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    torch_imported = any(line.rstrip().endswith("| torch") for line in res.stderr.splitlines())
    return seconds, torch_imported, res.returncode


def run_main_twice() -> None:
    """`./run main` in this checkout, then again on the unchanged tree (set-up check, adb server, all stages)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "ANDROID_"))}
    env.update(CI="1")
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        res = subprocess.run([str(ROOT / "run"), "main"], cwd=ROOT, capture_output=True, text=True, env=env)
        times.append(time.perf_counter() - t0)
        if res.returncode != 0:
            sys.exit(f"`./run main` failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    print(f"first ./run main:          {times[0]:8.2f} s")
    print(f"unchanged ./run main:      {times[1]:8.2f} s   (target <= 5 s on an idle 2-core machine) "
          f"{'OK' if times[1] <= 5 else 'MISSED'}   load average {os.getloadavg()[0]:.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibration-count", type=int, default=32)
    ap.add_argument("--skip-all", action="store_true", help="only `invoke convert`")
    ap.add_argument("--run-main", action="store_true", help="also time `./run main` twice in this checkout")
    args = ap.parse_args()
    if args.run_main:
        run_main_twice()
    with tempfile.TemporaryDirectory(prefix="td-bench-noop-") as tmp:
        user = Path(tmp) / "user"
        user.mkdir()
        cold, _, _ = run(user, ["convert", "--weights", "random"], args.calibration_count)
        warm, warm_torch, _ = run(user, ["convert", "--weights", "random"], args.calibration_count)
        print(f"cold invoke convert:       {cold:8.2f} s")
        print(f"unchanged invoke convert:  {warm:8.2f} s   torch imported: {'yes' if warm_torch else 'no'}")
        ratio = warm / cold
        print(f"unchanged / cold ratio:    {ratio:8.3f}   (target <= 0.1) {'OK' if ratio <= 0.1 else 'MISSED'}")
        if args.skip_all:
            return 0
        first, _, code = run(user, ["all", "--weights", "random"], args.calibration_count, check=False)
        again, again_torch, code2 = run(user, ["all", "--weights", "random"], args.calibration_count, check=False)
        print(f"first invoke all:          {first:8.2f} s   (exit {code})")
        print(f"unchanged invoke all:      {again:8.2f} s   torch imported: {'yes' if again_torch else 'no'}   "
              f"(exit {code2}; target <= 5 s on an idle 2-core machine) {'OK' if again <= 5 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
