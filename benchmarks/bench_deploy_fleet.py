#!/usr/bin/env python3
"""Deploying to 16 virtual devices on 4 adb servers takes about as long as deploying to one (issue 14:
wall time of the fleet / wall time of one device <= 1.5), each device's link limited to 40 MB/s so that
the links, not this machine's CPU, should be the bound.

Uses 4 real adb servers (127.0.0.1 only), each with 4 virtual devices of the tests, and
`deploy --no-bench --no-install` of six model files through all four servers at once.  The single-device
run is the same deploy (same files, same servers up) with --serial of one device; both are measured
alternately in this one run, median of --repeat.

    .venv/bin/python benchmarks/bench_deploy_fleet.py [--servers 4] [--per-server 4] [--link 40]
                                                      [--model-mb 4 | --sizes mobilenetv2] [--repeat 3]

--sizes mobilenetv2 uses the sizes of the six files of a real `invoke convert` of MobileNetV2 (45.3 MB per
device) instead of six files of --model-mb.  The virtual devices' storage is a directory on /dev/shm when
there is one (--workdir): a phone's flash writes are not this machine's CPU work, the host's ext4 and its
writeback threads would be.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deploy import DeploySettings, deploy  # noqa: E402
from tests.deploy_support.fixtures import make_inputs  # noqa: E402
from tests.virtual_device.harness import adb_servers_with_devices  # noqa: E402

TARGET = 1.5
# the files of `invoke convert` (MobileNetV2, torch 2.x, random weights; build/models of 2026-11-23), bytes
MOBILENETV2_SIZES = {"quant_none-cpu": 14_739_293, "quant_none-nnapi": 14_600_429, "quant_core-cpu": 4_216_749,
                     "quant_core-nnapi": 4_196_677, "quant_full-cpu": 3_763_357, "quant_full-nnapi": 3_741_757}


def default_workdir() -> str:
    """Where the devices' storage goes: /dev/shm when it is a writable directory, else the system's temp dir."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else tempfile.gettempdir()


def cpu_seconds(pids) -> tuple:
    """CPU time so far of this process and of ``pids`` (adb servers, virtual devices) with their finished
    children (the devices' shells and hash tools), from /proc: ``(deploy, [per pid: own, children])``."""
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            out.append((0.0, 0.0))
            continue
        out.append((sum(int(x) for x in fields[11:13]) / tick, sum(int(x) for x in fields[13:15]) / tick))
    return sum(os.times()[:2]), out


def cpu_used(before: tuple, after: tuple, n_servers: int) -> dict:
    """CPU seconds between two cpu_seconds() readings: deploy, adb servers, devices (Python), their shells."""
    d = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(after[1], before[1])]
    return {"deploy": after[0] - before[0], "adb servers": sum(x[0] + x[1] for x in d[:n_servers]),
            "devices": sum(x[0] for x in d[n_servers:]), "device shells": sum(x[1] for x in d[n_servers:])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--per-server", type=int, default=4, help="virtual devices per adb server")
    ap.add_argument("--link", type=float, default=40.0, help="each device's link in MB/s")
    ap.add_argument("--model-mb", type=float, default=4.0, help="size of each of the six model files")
    ap.add_argument("--sizes", choices=("uniform", "mobilenetv2"), default="uniform",
                    help="uniform: six files of --model-mb; mobilenetv2: the sizes of a real convert's six files")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default=default_workdir(), help="where the devices' storage goes (default: %(default)s)")
    args = ap.parse_args(argv)
    args.load_before = os.getloadavg()[0]  # the runs' own 40 processes raise the load average they end with
    with tempfile.TemporaryDirectory(prefix="bench-fleet-", dir=args.workdir) as tmp:
        return run(Path(tmp), args)


def run(tmp: Path, args) -> int:
    sizes = MOBILENETV2_SIZES if args.sizes == "mobilenetv2" else int(args.model_mb * 1e6)
    inp = make_inputs(tmp / "in", modes=("none", "core", "full"), model_size=sizes)
    total = sum(f.stat().st_size for f in inp.models.glob("*.pt"))
    layout = {f"s{k}": {f"d{k}{j}": {"link_mb_s": args.link} for j in range(args.per_server)}
              for k in range(args.servers)}
    t = time.perf_counter()
    with adb_servers_with_devices(tmp / "adb", layout) as (servers, devs, _down):
        print(f"== {len(devs)} virtual devices on {len(servers)} adb servers, each link {args.link:g} MB/s; "
              f"6 files, {total / 1e6:.1f} MB per device (started in {time.perf_counter() - t:.1f} s)")
        fleet = Fleet(tmp, inp, total, servers, devs)
        fleet.deploy("warm", (fleet.one,))  # first connections, caches: not measured
        single, every = [], []
        for i in range(args.repeat):
            single.append(fleet.deploy(f"one{i}", (fleet.one,)))
            every.append(fleet.deploy(f"all{i}", ()))
    return report(single, every, total, len(devs), args.repeat, args.load_before)


class Fleet:
    """The servers and devices of the run, and one measured deploy to some or all of them."""

    def __init__(self, tmp: Path, inp, total: int, servers: dict, devs: dict):
        self.tmp, self.inp, self.total, self.servers, self.devs = tmp, inp, total, servers, devs
        self.addrs = tuple(f"127.0.0.1:{s.port}" for s in servers.values())
        self.one = next(iter(devs.values())).serial
        self.pids = [s.proc.pid for s in servers.values()] + [d.proc.pid for d in devs.values()]

    def deploy(self, project: str, serials: tuple) -> tuple:
        """``(wall seconds, CPU seconds by kind)`` of one fresh deploy (its files removed afterwards)."""
        s = DeploySettings(models=self.inp.models, results=self.tmp / "results", build_info=self.inp.build_info,
                           servers=self.addrs, project=project, bench=False, install=False, serials=serials)
        t, c = time.perf_counter(), cpu_seconds(self.pids)
        res = deploy(s, on_status=lambda serial, text: None)
        out = (time.perf_counter() - t, cpu_used(c, cpu_seconds(self.pids), len(self.servers)))
        bad = [(d.serial, d.errors) for d in res.devices if d.errors]
        assert not bad, bad
        assert all(d.pushed_bytes == self.total for d in res.devices), [d.pushed_bytes for d in res.devices]
        assert len(res.devices) == (len(serials) or len(self.devs))
        for d in self.devs.values():  # keep the disk use bounded
            shutil.rmtree(d.path(f"/data/local/tmp/torchdroid/{project}"), ignore_errors=True)
        return out


def report(single: list, every: list, total: int, n: int, repeat: int, load_before: float = 0.0) -> int:
    w1, c1 = statistics.median(x[0] for x in single), _cpu_text(single)
    wn, cn = statistics.median(x[0] for x in every), _cpu_text(every)
    ratio = wn / w1
    cpu_all = statistics.median(sum(x[1].values()) for x in every)
    print(f"one device:   {w1:6.3f} s  ({total / w1 / 1e6:6.1f} MB/s)   median of {repeat}; CPU s: {c1}")
    print(f"{n} devices:  {wn:6.3f} s  ({n * total / wn / 1e6:6.1f} MB/s in all)  CPU s: {cn}")
    print(f"(this machine: {os.cpu_count()} cores, load average {load_before:.1f} before the runs, "
          f"{os.getloadavg()[0]:.1f} after them; the {n} devices' work "
          f"needs {cpu_all:.2f} CPU s, i.e. at least {cpu_all / os.cpu_count() / w1:.2f} x one device's wall time "
          f"on {os.cpu_count()} idle cores)")
    host = statistics.median(x[1]["deploy"] + x[1]["adb servers"] for x in every)
    print(f"(of that, the deploy and the adb servers: {host:.2f} CPU s; the rest is the virtual phones' own work, "
          f"which real phones do on their own cores: without it at least {host / os.cpu_count() / w1:.2f} x)")
    print(f"fleet wall time / one device: {ratio:.2f} (target <= {TARGET}) "
          f"{'OK' if ratio <= TARGET else 'ABOVE TARGET'}")
    return 0 if ratio <= TARGET else 1


def _cpu_text(runs) -> str:
    keys = runs[0][1].keys()
    return ", ".join(f"{k} {statistics.median(r[1][k] for r in runs):.2f}" for k in keys)


if __name__ == "__main__":
    sys.exit(main())
