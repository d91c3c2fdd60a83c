"""How a host timing was taken (toolchain/host_conditions.py), from injected /proc and /sys readings."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolchain import host_conditions as hc

OWN, CHILD, OTHER, IDLE = 4242, 4243, 777, 1


class FakeMachine:
    """A /proc and /sys tree whose CPU tick counters the test moves forward, as the kernel would."""

    def __init__(self, root: Path, governor: str | None = "schedutil"):
        self.proc, self.sys_cpu = root / "proc", root / "sys" / "devices" / "system" / "cpu"
        self.proc.mkdir(parents=True)
        (self.proc / "cpuinfo").write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Fake(R) CPU 3.0GHz\n")
        if governor:
            (self.sys_cpu / "cpu0" / "cpufreq").mkdir(parents=True)
            (self.sys_cpu / "cpu0" / "cpufreq" / "scaling_governor").write_text(governor + "\n")
        self.busy, self.total, self.load = 10_000, 40_000, 0.5
        self.ticks = {OWN: 100, CHILD: 5, OTHER: 2_000, IDLE: 0}
        self.write()

    def write(self) -> None:
        idle = self.total - self.busy
        # user nice system idle iowait irq softirq steal: busy = user + system here
        (self.proc / "stat").write_text(f"cpu  {self.busy - 100} 0 100 {idle} 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
        (self.proc / "loadavg").write_text(f"{self.load:.2f} 0.40 0.30 1/123 {OWN}\n")
        names = {OWN: "python", CHILD: "python", OTHER: "cc1plus (x)", IDLE: "init"}
        parents = {OWN: 10, CHILD: OWN, OTHER: 1, IDLE: 0}
        for pid, ticks in self.ticks.items():
            d = self.proc / str(pid)
            d.mkdir(exist_ok=True)
            # fields 1-15 of proc(5)'s /proc/pid/stat: utime (14) and stime (15) hold the ticks, split in two
            (d / "stat").write_text(f"{pid} ({names[pid]}) R {parents[pid]} 1 1 0 -1 0 0 0 0 0 "
                                    f"{ticks - ticks // 2} {ticks // 2} 0 0 20 0 1 0\n")

    def run(self, seconds_ticks: int, own: int, child: int, other: int, unseen: int = 0, load: float = 0.5) -> None:
        """``seconds_ticks`` ticks of the whole machine pass: this process, its child, another process and a
        process that came and went (``unseen``) use theirs."""
        self.total += seconds_ticks
        self.busy += own + child + other + unseen
        self.ticks[OWN] += own
        self.ticks[CHILD] += child
        self.ticks[OTHER] += other
        self.load = load
        self.write()


def _watched(machine: FakeMachine, **used) -> hc.Conditions:
    with hc.watch(1, machine.proc, machine.sys_cpu, pid=OWN) as w:
        machine.run(**used)
    return w.conditions


def test_a_busy_machine_is_flagged_with_the_processes_that_took_the_cpu(tmp_path):
    m = FakeMachine(tmp_path)
    c = _watched(m, seconds_ticks=200, own=90, child=10, other=60, unseen=20, load=3.1)
    assert c.others_cpu_pct == 40.0  # 60 + 20 of 200 ticks; this process and its child are not "others"
    assert c.busy and c.busiest == [{"name": "cc1plus (x)", "pid": OTHER, "cpu_pct": 30.0}]
    assert c.cpu_model == "Fake(R) CPU 3.0GHz" and c.threads == 1 and c.governor == "schedutil"
    assert c.load_before == [0.5, 0.4, 0.3] and c.load_after == [3.1, 0.4, 0.3]
    busy = [n for n in c.notes() if n.startswith("busy machine")]
    assert busy and "40%" in busy[0] and "cc1plus (x) (pid 777) 30%" in busy[0]
    assert "BUSY" in c.line() and "load 0.50 -> 3.10" in c.line()
    assert hc.Conditions.from_dict(c.as_dict()) == c  # what the record keeps is what was measured


def test_a_quiet_machine_is_not_flagged(tmp_path):
    m = FakeMachine(tmp_path, governor="performance")
    c = _watched(m, seconds_ticks=200, own=100, child=0, other=4)
    assert c.others_cpu_pct == 2.0 and not c.busy
    assert c.notes() == [] and "BUSY" not in c.line()


def test_an_unreadable_governor_or_proc_is_said_never_guessed(tmp_path):
    m = FakeMachine(tmp_path, governor=None)
    c = _watched(m, seconds_ticks=200, own=100, child=0, other=0)
    assert c.governor is None and "governor not readable" in c.line()
    empty = tmp_path / "empty"
    empty.mkdir()
    with hc.watch(1, empty, empty, pid=OWN) as w:
        pass
    assert w.conditions.others_cpu_pct is None and not w.conditions.busy
    assert "other processes: not measured" in w.conditions.line() and "load not readable" in w.conditions.line()


def test_a_governor_other_than_performance_is_noted_as_pyperf_advises(tmp_path):
    c = _watched(FakeMachine(tmp_path, governor="powersave"), seconds_ticks=200, own=100, child=0, other=0)
    assert any("'powersave'" in n and "'performance'" in n for n in c.notes())


def test_the_timing_rounds_are_watched(tmp_path, monkeypatch):
    """converter.host_bench.time_alternated (both host benchmarks' rounds) returns the conditions of its rounds."""
    from converter.host_bench import time_alternated
    from converter.rounds import prepare

    m = FakeMachine(tmp_path)
    monkeypatch.setattr(hc, "PROC", m.proc)
    monkeypatch.setattr(hc, "SYS_CPU", m.sys_cpu)
    monkeypatch.setattr(hc.os, "getpid", lambda: OWN)
    subjects = [prepare(k, lambda: (lambda: m.run(seconds_ticks=20, own=5, child=0, other=12)), warmup=0)
                for k in "ab"]
    m.run(seconds_ticks=1000, own=0, child=0, other=0)  # loading and warm-up are not the rounds

    class Bar:
        def advance(self, text=""):
            pass

    c = time_alternated(subjects, 2, 3, Bar(), threads=2)
    assert c.threads == 2 and c.others_cpu_pct == 60.0 and c.busy


@pytest.mark.parametrize("per_round,noisy", [
    ((2.9, 3.0, 3.2), False),  # a 2x difference, rounds 0.3x apart
    ((1.05, 1.10, 1.20), True),  # a 0.10x difference, rounds 0.15x apart
    ((2.69, 1.50, 2.10), True),  # every round faster, but the size (1.10x) is within the rounds' spread (1.19x)
    ((1.5,), False),  # one round: no spread to judge
])
def test_a_comparison_whose_rounds_spread_more_than_its_difference_is_noisy(per_round, noisy):
    from converter.rounds import Ratio, ratio_notes
    from toolchain.stats import compare

    c = compare(per_round)
    assert c.noisy is noisy and bool(c.noise_note("b", "a")) is noisy
    r = Ratio("a", "b", list(per_round))
    assert r.as_dict()["noisy"] is noisy
    assert len(ratio_notes([r])) == (1 if noisy else 0)


def test_rounds_that_disagree_on_a_busy_machine_are_said_inside_the_busy_note_once(tmp_path):
    """Both notes name the same cause and remedy: on a busy machine one note says both (the output stays short:
    tests/integration/test_newcomer.py counts `invoke all`'s lines); on a quiet one the disagreement is its own."""
    from converter.host_bench import unstable_notes

    busy = _watched(FakeMachine(tmp_path, governor="performance"), seconds_ticks=200, own=100, child=0, other=80)
    notes = unstable_notes({"a.pt": 21.0, "b.pt": 44.0}, 3, busy)
    assert len(notes) == 1 and notes[0].startswith("busy machine") and "a.pt, b.pt: the 3 rounds disagree" in notes[0]
    quiet = _watched(FakeMachine(tmp_path / "q", governor="performance"), seconds_ticks=200, own=100, child=0, other=0)
    assert unstable_notes({"a.pt": 21.0}, 3, quiet) == [
        "a.pt: the 3 rounds disagree (their medians differ by 21% > 10%): the machine is busy or throttling; close "
        "other work and rerun"]
    assert unstable_notes({}, 3, quiet) == [] and unstable_notes({}, 3, busy) == busy.notes()
