#!/usr/bin/env python3
"""Deploy throughput as a ratio to a plain `adb push` of the same files to the same device, and the time
of an unchanged re-deploy.  Targets (issue 22): >= 0.95 on a 40 MB/s link (USB 2), >= 0.85 at 150 MB/s
(USB 3 class); one run measures both.  ``--link 0`` (the unlimited loopback) has no target: there the figure
measures this machine's CPU, not a phone's link.

Uses the real adb server and the virtual device of the tests (127.0.0.1 only).  The files are six
model files of a float MobileNetV2's size (~14 MB each at --scale 1).  The device's link is one for all its
pushes (tests/virtual_device/device.py Link): files the deploy has in flight together share it, as on a phone.

    .venv/bin/python benchmarks/bench_deploy.py [--scale 1.0] [--repeat 3] [--link MB/s ...]

The virtual device's storage is a directory on /dev/shm when there is one (--workdir): a phone's flash writes
are not this machine's CPU work.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deploy import DeploySettings, deploy  # noqa: E402
from tests.deploy_support.fixtures import make_inputs  # noqa: E402
from tests.virtual_device.harness import adb_with_devices  # noqa: E402

from bench_deploy_fleet import default_workdir  # noqa: E402

TARGETS = {40.0: 0.95, 150.0: 0.85}  # link MB/s -> minimum ratio


def target(link: float) -> Optional[float]:
    """The issue's target for a link speed (the nearest one at or below it); the unlimited loopback has none."""
    if not link:
        return None
    return min((v for k, v in TARGETS.items() if k <= link), default=TARGETS[40.0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="model size multiplier (1.0: ~14 MB per model file)")
    ap.add_argument("--repeat", type=int, default=3, help="measurements per method (median reported)")
    ap.add_argument("--link", type=float, action="append", default=None,
                    help="virtual device link speed in MB/s, 0 = unlimited loopback (repeatable; default: 40 (USB 2) "
                         "and 150 (USB 3 class))")
    ap.add_argument("--workdir", default=default_workdir(), help="where the device's storage goes (default: %(default)s)")
    args = ap.parse_args(argv)
    ok = True
    import adbutils  # noqa: F401  - imported once per process (~0.6 s), as by `invoke deploy`: not a push's time
    print(f"load average before the runs: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for link in args.link or [40.0, 150.0]:
        ok &= measure(args.scale, args.repeat, link, args.workdir)
    return 0 if ok else 1


def measure(scale: float, repeat: int, link: float, workdir: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="bench-deploy-", dir=workdir) as tmp:
        tmp = Path(tmp)
        inp = make_inputs(tmp / "in", modes=("none", "core", "full"), model_size=int(14_000_000 * scale))
        files = sorted(inp.models.glob("*.pt"))  # --no-bench: the deploy pushes exactly these
        total = sum(f.stat().st_size for f in files)
        with adb_with_devices(tmp / "adb", {"bench": {"link_mb_s": link}}) as (server, devs):
            serial = devs["bench"].serial
            plain, fresh, again = [], [], []
            for i in range(repeat):
                server.adb("-s", serial, "shell", f"mkdir -p /data/local/tmp/plain{i}")
                t = time.perf_counter()
                r = server.adb("-s", serial, "push", *map(str, files), f"/data/local/tmp/plain{i}/", timeout=600)
                plain.append(time.perf_counter() - t)
                if r.returncode != 0:
                    print(r.stdout + r.stderr, file=sys.stderr)
                    return False
                s = DeploySettings(models=inp.models, results=tmp / "results", build_info=inp.build_info,
                                   adb_port=server.port, project=f"bench{i}", bench=False, install=False,
                                   serials=(serial,))
                t = time.perf_counter()
                res = deploy(s)
                fresh.append(time.perf_counter() - t)
                assert not res.failed, res.devices[0].errors
                assert res.devices[0].pushed_bytes == total, (res.devices[0].pushed_bytes, total)
                t = time.perf_counter()
                res = deploy(s)
                again.append(time.perf_counter() - t)
                assert res.devices[0].pushed_bytes == 0 and not res.failed
    p, f, a = statistics.median(plain), statistics.median(fresh), statistics.median(again)
    ratio = p / f
    goal = target(link)
    where = f"link limited to {link:g} MB/s" if link else "unlimited loopback link"
    print(f"== virtual device, {where}: {len(files)} files, {total / 1e6:.1f} MB; median of {repeat}; "
          f"load average {os.getloadavg()[0]:.1f} after the runs")
    print(f"plain adb push:        {p:6.3f} s  ({total / p / 1e6:7.1f} MB/s)")
    print(f"invoke deploy (fresh): {f:6.3f} s  ({total / f / 1e6:7.1f} MB/s)  incl. checks, hashes, verify, rename")
    verdict = "(no target)" if goal is None else f"(target >= {goal}) {'OK' if ratio >= goal else 'BELOW TARGET'}"
    print(f"deploy throughput / adb push throughput: {ratio:.3f} {verdict}")
    print(f"unchanged re-deploy:   {a:6.3f} s  (0 bytes pushed)")
    return goal is None or ratio >= goal


if __name__ == "__main__":
    sys.exit(main())
