"""How a host timing was taken: the machine, its load, and what else ran while the rounds ran.

``invoke bench --host`` gave quant_full medians of 8.2 to 17.2 ms in six runs on a busy 2-core machine, and the run
that was twice as slow said nothing (issue 32).  Each host timing record now carries its conditions, read from
``/proc`` and ``/sys`` as pyperf reads them for Python benchmarks (docs/facts.md TC5): the CPU model
(``/proc/cpuinfo``), the cores this process may use and the torch threads it timed with, the load average before and
after (``/proc/loadavg``), the CPU frequency governor where the kernel shows it
(``/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor``; pyperf advises ``performance``), and the share of the
machine's CPU time other processes took while the rounds ran (``/proc/stat`` against this process's own
``/proc/<pid>/stat``, its children excluded; the busiest named from their ``/proc/<pid>/stat``).

A run is **busy** when other processes took more than :data:`BUSY_SHARE_PCT` of the machine's CPU time while it timed:
its times are slower and noisier than the same files on a quiet machine.  pyperf records the load but does not judge
it; the share measured over the rounds themselves is what slowed them.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

PROC = Path("/proc")
SYS_CPU = Path("/sys/devices/system/cpu")
BUSY_SHARE_PCT = 10.0  # other processes' share of the machine's CPU time above which a run is "busy"
BENCHMARK_GOVERNOR = "performance"  # what pyperf's `system tune` sets and advises (TC5)
BUSIEST = 3  # how many of the other processes are named


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpu_model(proc: Path = PROC) -> str:
    """The first ``model name`` (x86) or ``Hardware``/``Processor`` (Arm) line of /proc/cpuinfo; "" when none."""
    for line in _read(proc / "cpuinfo").splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
            return value.strip()
    return ""


def governor(sys_cpu: Path = SYS_CPU) -> Optional[str]:
    """cpu0's frequency governor, None where the kernel does not show one (containers, most VMs)."""
    return _read(sys_cpu / "cpu0" / "cpufreq" / "scaling_governor").strip() or None


def load_average(proc: Path = PROC) -> Optional[Tuple[float, float, float]]:
    fields = _read(proc / "loadavg").split()
    try:
        return float(fields[0]), float(fields[1]), float(fields[2])
    except (IndexError, ValueError):
        return None


def machine_ticks(proc: Path = PROC) -> Optional[Tuple[int, int]]:
    """(busy, total) CPU ticks of the whole machine since boot, from /proc/stat's ``cpu`` line (idle and iowait are
    not busy; guest time is already inside user time)."""
    for line in _read(proc / "stat").splitlines():
        if line.startswith("cpu "):
            ticks = [int(x) for x in line.split()[1:9]]
            total = sum(ticks)
            return total - ticks[3] - ticks[4], total
    return None


def process_ticks(proc: Path = PROC) -> Dict[int, Tuple[str, int, int]]:
    """Every process: pid -> (name, parent pid, user + system ticks), from /proc/<pid>/stat (fields 2, 4, 14, 15)."""
    out: Dict[int, Tuple[str, int, int]] = {}
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        text = _read(entry / "stat")
        name, _, rest = text.partition(" (")[2].rpartition(") ")
        fields = rest.split()
        if len(fields) >= 13:
            out[int(entry.name)] = (name, int(fields[1]), int(fields[11]) + int(fields[12]))
    return out


@dataclass(frozen=True)
class Sample:
    """One reading of /proc: the load average, the machine's busy and total ticks, every process's ticks."""

    load: Optional[Tuple[float, float, float]]
    machine: Optional[Tuple[int, int]]
    processes: Dict[int, Tuple[str, int, int]]
    at: float


def sample(proc: Path = PROC) -> Sample:
    return Sample(load_average(proc), machine_ticks(proc), process_ticks(proc), time.monotonic())


def _family(processes: Dict[int, Tuple[str, int, int]], pid: int) -> set:
    """``pid`` and its descendants: the timing's own CPU time."""
    family, grew = {pid}, True
    while grew:
        grew = False
        for p, (_, parent, _) in processes.items():
            if parent in family and p not in family:
                family.add(p)
                grew = True
    return family


def others_share(before: Sample, after: Sample, pid: int) -> Tuple[Optional[float], List[Dict[str, Any]]]:
    """(other processes' % of the machine's CPU time between the samples, the busiest of them with their %)."""
    if before.machine is None or after.machine is None or after.machine[1] <= before.machine[1]:
        return None, []
    total = after.machine[1] - before.machine[1]
    own = _family(after.processes, pid) | _family(before.processes, pid)
    # a process started between the samples used all its ticks in between (a reused pid: its ticks restart)
    used = {p: t - before.processes[p][2] if p in before.processes and t >= before.processes[p][2] else t
            for p, (_, _, t) in after.processes.items()}
    own_ticks = sum(used.get(p, 0) for p in own)
    others = max(0, after.machine[0] - before.machine[0] - own_ticks)
    busiest = sorted(((p, t) for p, t in used.items() if p not in own and t), key=lambda x: -x[1])
    return (round(100.0 * others / total, 1),
            [{"name": after.processes[p][0], "pid": p, "cpu_pct": round(100.0 * t / total, 1)} for p, t in busiest[:BUSIEST]])


@dataclass
class Conditions:
    """What a host timing record says about how it was taken (``conditions`` in host-bench.json and
    executorch-host-bench.json)."""

    cpu_model: str = ""
    cores: int = 0  # the CPUs this process may run on
    threads: int = 0  # torch's intra-op threads while timing
    governor: Optional[str] = None  # cpu0's frequency governor; None: not readable here
    load_before: Optional[List[float]] = None  # 1, 5, 15 minute load averages
    load_after: Optional[List[float]] = None
    others_cpu_pct: Optional[float] = None  # other processes' share of the machine's CPU time while the rounds ran
    busiest: List[Dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    busy: bool = False

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Optional[Dict[str, Any]]) -> Optional["Conditions"]:
        if not isinstance(d, dict):
            return None
        try:
            return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
        except TypeError:
            return None

    def line(self) -> str:
        """One line for the console: how the numbers were taken."""
        load = (f"load {self.load_before[0]:.2f} -> {self.load_after[0]:.2f}"
                if self.load_before and self.load_after else "load not readable")
        others = "other processes: not measured" if self.others_cpu_pct is None else \
            f"other processes {self.others_cpu_pct:.0f}% of the CPU" + (" (BUSY)" if self.busy else "")
        return (f"taken on {self.cpu_model or 'an unknown CPU'}, {self.threads} torch thread(s) on {self.cores} "
                f"core(s), {load}, governor {self.governor or 'not readable'}, {others}")

    def notes(self, disagree: str = "") -> List[str]:
        """What makes these numbers worse than a quiet machine's, and what to do; ``disagree``: the models whose
        rounds disagree, said inside the busy note (the same cause and remedy)."""
        out = []
        if self.busy:
            names = ", ".join(f"{b['name']} (pid {b.get('pid')}) {b['cpu_pct']:.0f}%" for b in self.busiest)
            out.append(f"busy machine: other processes took {self.others_cpu_pct:.0f}% of the CPU time while the "
                       f"rounds ran (> {BUSY_SHARE_PCT:.0f}%{'; ' + names if names else ''}): these times are slower "
                       "and noisier than on a quiet machine" + (f" ({disagree})" if disagree else "")
                       + "; compare ratios, not times, or rerun when it is quiet")
        if self.governor and self.governor != BENCHMARK_GOVERNOR:
            out.append(f"CPU frequency governor {self.governor!r}: the clock moves with the load (pyperf advises "
                       f"{BENCHMARK_GOVERNOR!r} for benchmarks)")
        return out


def conditions(before: Sample, after: Sample, threads: int, pid: int, proc: Path = PROC,
               sys_cpu: Path = SYS_CPU) -> Conditions:
    share, busiest = others_share(before, after, pid)
    return Conditions(cpu_model(proc), _cores(), threads, governor(sys_cpu),
                      list(before.load) if before.load else None, list(after.load) if after.load else None,
                      share, busiest, round(after.at - before.at, 2), share is not None and share > BUSY_SHARE_PCT)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 0


class Watch:
    """Filled when the ``watch`` block ends: ``.conditions``."""

    conditions: Optional[Conditions] = None


@contextmanager
def watch(threads: int, proc: Optional[Path] = None, sys_cpu: Optional[Path] = None,
          pid: Optional[int] = None) -> Iterator[Watch]:
    """Read /proc before and after the block (the timing rounds); the block's result is ``Watch.conditions``.
    ``proc``, ``sys_cpu`` (default: :data:`PROC`, :data:`SYS_CPU`) and ``pid`` are for tests' injected readings."""
    proc, sys_cpu = PROC if proc is None else proc, SYS_CPU if sys_cpu is None else sys_cpu
    pid = os.getpid() if pid is None else pid
    w = Watch()
    before = sample(proc)
    try:
        yield w
    finally:
        w.conditions = conditions(before, sample(proc), threads, pid, proc, sys_cpu)
