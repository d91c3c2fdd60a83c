"""Which hardware ran each operation of an NNAPI model on a phone, from the NNAPI runtime's own log.

One shell command per phone x NNAPI model (``probe_command``): read ``debug.nn.vlog``, set it to
``compilation,execution,manager``, run the model once (a fresh process compiles it), put the property back (also when the
shell is hung up or interrupted: a trap), then dump that process's log lines (``logcat --pid``).  ``parse`` reads
the lines the runtime writes (AOSP frameworks/ml/nn, docs/facts.md NH1-NH7):

* tag ``ExecutionPlan``: ``ModelBuilder::findBestDeviceForEachOperation(CONV_2D) = 1 (qti-dsp)`` (Android 10-11;
  Android 12 on: ``(CONV_2D:7) = 1 (qti-dsp)``), and ``ModelBuilder::partitionTheWork: only one best device: 1 =
  qti-dsp`` when one device takes the whole graph;
  ``Device qti-gpu can't do operation AVERAGE_POOL_2D`` (Android 12 on: ``AVERAGE_POOL_2D:3``), the reason an
  operation did not go to a driver;
* tag ``CompilationBuilder``: ``CompilationBuilder::finish with CPU fallback``: a driver's ``prepareModel`` failed
  and the runtime threw the plan away, the whole model runs on ``nnapi-reference`` (PyTorch's binding is told
  nothing: the compilation still succeeds);
* tag ``ExecutionBuilder``: ``cpuFallbackPartial`` (a step of a partitioned plan failed and re-ran on the CPU) and
  ``cpuFallbackFull`` (the whole model re-ran on the CPU) when a driver's execution failed;
* tag ``Manager``: ``Found interface qti-dsp`` (Android 12 on: ``... (version = X)``);
* tag ``chatty`` (logd's de-duplication): ``uid=2000(shell) ./speed_benchmark_torch identical 4 lines`` stands for
  four more copies of the previous line; ``expire N lines`` says lines were dropped.

Nothing is guessed: no line, or lines in a format not known here, make the placement ``unknown`` with the reason.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from typing import List, Optional, Tuple

from toolchain.hardware_records import CPU_FALLBACK, DEVICE_TYPES, LISTER_NAME, Placement, feature_level_name
from toolchain.records import ModelFile

from .bench import PID_FILE, BenchOptions, bench_args
from .environment import SAVED_DIR, restore_command, set_command

VLOG_PROP = "debug.nn.vlog"
VLOG_VALUE = "compilation,execution,manager"  # Utils.cpp initVLogMask splits on " ,:" (NH1)
TAGS = ("ExecutionPlan", "CompilationBuilder", "ExecutionBuilder", "Manager", "chatty")
MARK = "TORCHDROID_NNLOG"
NO_LISTER = (f"no {LISTER_NAME} in the build-info: the build-android that made the benchmark binary did not build "
             "the NNAPI device lister; run `invoke build-android` again")

_LINE = re.compile(r"^\S+\s+\S+\s+(\d+)\s+\d+\s+[VDIWEF]\s+(\S+?)\s*: (.*)$")  # logcat -v threadtime
_BEST = re.compile(r"ModelBuilder::findBestDeviceForEachOperation\(([A-Z0-9_]+)(?::\d+)?\) = (-?\d+) \(([^)]*)\)$")
_ONLY = re.compile(r"ModelBuilder::partitionTheWork: only one best device: (-?\d+) = (\S+)$")
_CANT = re.compile(r"Device (\S+) can't do operation ([A-Z0-9_]+)(?::\d+)?$")
COMPILE_FALLBACK = "CompilationBuilder::finish with CPU fallback"  # docs/facts.md PW1
EXECUTION_FALLBACKS = ("cpuFallbackPartial", "cpuFallbackFull")  # docs/facts.md PW2
_FOUND = re.compile(r"Found interface (\S+?)(?: \(version = .*\))?$")
_CHATTY = re.compile(r"identical (\d+) lines?$")
_EXPIRE = re.compile(r"expire (\d+) lines?$")


def probe_command(directory: str, m: ModelFile, opts: BenchOptions, saved_dir: str = SAVED_DIR) -> str:
    """The property set (the user's value saved to a file on the phone first: a link that drops before the
    restore leaves it for the next run to put back, deploy/environment.py), the model run once (its pid in the
    benchmark's pid file: Ctrl-C stops it at once, bench.stop_command), the property put back, the run's log
    lines: one device shell.  ``saved_dir``: where the user's value is kept (a test's phone elsewhere)."""
    argv = " ".join(shlex.quote(a) for a in bench_args(m.file, m.backend, dataclasses.replace(opts, gatord=False),
                                                        m.inputs, warmup=0, iters=1))
    restore = restore_command(VLOG_PROP, saved_dir)
    return (f"cd {shlex.quote(directory)} || exit 1; old=$(getprop {VLOG_PROP}); "
            f"trap {shlex.quote(restore)} EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 141' PIPE; "
            f"trap 'exit 143' TERM; echo \"{MARK} before [$old]\"; {set_command(VLOG_PROP, VLOG_VALUE, saved_dir)}; "
            f"echo \"{MARK} set [$(getprop {VLOG_PROP})]\"; "
            f"{argv} >/dev/null 2>&1 & p=$!; echo $p > {PID_FILE}; wait $p; c=$?; rm -f {PID_FILE}; {restore}; "
            f"echo \"{MARK} run $p $c [$(getprop {VLOG_PROP})]\"; "
            f"logcat -d -v threadtime --pid=$p -s {' '.join(t + ':V' for t in TAGS)}")


@dataclasses.dataclass
class ProbeOutput:
    before: Optional[str] = None  # debug.nn.vlog before
    set_to: Optional[str] = None  # read back after torchdroid set it
    pid: Optional[int] = None
    exit_code: Optional[int] = None
    after: Optional[str] = None  # read back after the restore
    lines: List[Tuple[str, str]] = dataclasses.field(default_factory=list)  # (tag, message) of that pid


def read_probe(output: str) -> ProbeOutput:
    out = ProbeOutput()
    for line in output.splitlines():
        if line.startswith(MARK + " "):
            _mark(out, line[len(MARK) + 1:])
            continue
        m = _LINE.match(line.rstrip())
        if m and (out.pid is None or int(m.group(1)) == out.pid):
            out.lines.append((m.group(2), m.group(3)))
    return out


def _mark(out: ProbeOutput, text: str) -> None:
    value = text[text.find("[") + 1:text.rfind("]")] if "[" in text else None
    word, _, rest = text.partition(" ")
    if word == "before":
        out.before = value
    elif word == "set":
        out.set_to = value
    elif word == "run":
        parts = rest.split()
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].lstrip("-").isdigit():
            out.pid, out.exit_code = int(parts[0]), int(parts[1])
        out.after = value


def _expanded(lines: List[Tuple[str, str]]) -> Tuple[List[Tuple[str, str]], int]:
    """The lines with chatty's "identical N lines" replaced by N copies of the line before; and how many lines
    logd says it dropped ("expire N lines")."""
    out: List[Tuple[str, str]] = []
    dropped = 0
    for tag, msg in lines:
        if tag == "chatty":
            same, gone = _CHATTY.search(msg), _EXPIRE.search(msg)
            if same and out:
                out += [out[-1]] * int(same.group(1))
            elif gone:
                dropped += int(gone.group(1))
            continue
        out.append((tag, msg))
    return out, dropped


@dataclasses.dataclass
class _PlanLines:
    """What the placement lines of one run say: (operation, device) pairs, the single device, drivers, the
    operations a driver said it can't do, the runtime's CPU fallbacks (its log lines, in order), and ExecutionPlan
    lines about placement in a format not known here."""

    ops: List[List[str]] = dataclasses.field(default_factory=list)
    only: str = ""
    drivers: List[str] = dataclasses.field(default_factory=list)
    cannot: List[List[str]] = dataclasses.field(default_factory=list)
    fallbacks: List[str] = dataclasses.field(default_factory=list)
    unread: List[str] = dataclasses.field(default_factory=list)

    def add(self, tag: str, msg: str) -> None:
        if tag == "Manager":
            found = _FOUND.search(msg)
            if found:
                self.drivers.append(found.group(1))
        elif tag == "ExecutionPlan":
            self._add_plan(msg)
        elif (tag == "CompilationBuilder" and msg.strip() == COMPILE_FALLBACK) or \
                (tag == "ExecutionBuilder" and msg.strip() in EXECUTION_FALLBACKS):
            self.fallbacks.append(f"{tag}: {msg.strip()}")

    def _add_plan(self, msg: str) -> None:
        best, one, cant = _BEST.search(msg), _ONLY.search(msg), _CANT.search(msg)
        if best:
            self.ops.append([best.group(1), best.group(3)])
        elif one:
            self.only = one.group(2)
        elif cant:
            if [cant.group(1), cant.group(2)] not in self.cannot:
                self.cannot.append([cant.group(1), cant.group(2)])
        elif "findBestDevice" in msg or "only one best device" in msg:
            self.unread.append(msg)

    def whole_model_on_cpu(self) -> bool:
        """The runtime threw the plan away (compilation) or re-ran the whole model on the CPU (execution)."""
        return any(f.endswith((COMPILE_FALLBACK, "cpuFallbackFull")) for f in self.fallbacks)


def _status(devices: set) -> str:
    if devices == {CPU_FALLBACK}:
        return "cpu"
    return "partly-cpu" if CPU_FALLBACK in devices else "accelerated"


def _fallback_note(plan: _PlanLines) -> str:
    """The runtime's own words when it did not run the plan: the log line and what it means."""
    if not plan.fallbacks:
        return ""
    if any(f.endswith(COMPILE_FALLBACK) for f in plan.fallbacks):
        meaning = ("a driver's prepareModel failed and the runtime threw its plan away: the whole model ran on "
                   f"{CPU_FALLBACK}")
    elif plan.whole_model_on_cpu():
        meaning = f"a driver's execution failed and the runtime ran the whole model again on {CPU_FALLBACK}"
    else:
        meaning = f"a driver's execution failed and the runtime ran that step again on {CPU_FALLBACK}"
    return f"the runtime logged {' then '.join(repr(f) for f in dict.fromkeys(plan.fallbacks))}: {meaning}"


def _placement_notes(plan: _PlanLines, devices: set, dropped: int) -> List[str]:
    notes = [_fallback_note(plan)] if plan.fallbacks else []
    if dropped:
        notes.append(f"logd dropped {dropped} line(s) of this run (chatty 'expire'): the list may be incomplete")
    if plan.unread:
        notes.append(f"{len(plan.unread)} line(s) in a format not known here, e.g. {plan.unread[0]!r}")
    if plan.only and devices != {plan.only}:
        notes.append(f"the runtime said one device ({plan.only}) but listed operations on {sorted(devices)}")
    return notes


def _ran(plan: _PlanLines) -> Tuple[str, List[List[str]]]:
    """The status and the (operation, device) pairs as the model ran: the plan, unless the runtime fell back."""
    if plan.whole_model_on_cpu():
        return "cpu", [[op, CPU_FALLBACK] for op, _ in plan.ops]
    status = _status({d for _, d in plan.ops})
    return ("partly-cpu" if plan.fallbacks and status == "accelerated" else status), plan.ops


def placement(serial: str, m: ModelFile, probe: ProbeOutput,
              listed: Tuple[List[List[str]], str] = ([], NO_LISTER)) -> Placement:
    """What the log says about this model on this phone, or ``unknown`` and why; ``listed``: the phone's NNAPI
    devices from the lister (``parse_devices``), or none and why.  A CPU fallback the runtime logged overrides
    the plan: never ``accelerated`` for a model that ran on ``nnapi-reference``."""
    base = Placement(serial, m.file, m.mode, "unknown", reason="?", vlog=probe.set_to or "",
                     restored=None if probe.after is None or probe.before is None else probe.after == probe.before,
                     devices=listed[0], driver_details="" if listed[0] else listed[1])
    why = _cannot_read(probe)
    if why:
        return dataclasses.replace(base, reason=why)
    lines, dropped = _expanded(probe.lines)
    plan = _PlanLines()
    for tag, msg in lines:
        plan.add(tag, msg)
    if not plan.ops and not plan.whole_model_on_cpu():
        return dataclasses.replace(base, reason=_no_operations(probe, lines, plan.unread))
    status, ran = _ran(plan)
    drivers = list(dict.fromkeys(plan.drivers + [d for _, d in plan.ops]))
    return dataclasses.replace(base, status=status, operations=ran, planned=plan.ops if ran != plan.ops else [],
                               reason="; ".join(_placement_notes(plan, {d for _, d in plan.ops}, dropped)),
                               single_device=plan.only, drivers=drivers, cannot_do=plan.cannot,
                               fallback=list(dict.fromkeys(plan.fallbacks)))


def _cannot_read(probe: ProbeOutput) -> str:
    if probe.set_to is None or probe.pid is None:
        return "the probe's output was cut short (no marker lines): the shell or the connection failed"
    wanted = {"compilation", "1", "all"}
    if not wanted & set(re.split(r"[ ,:]", probe.set_to)):
        return (f"setprop {VLOG_PROP} {VLOG_VALUE} did not take (read back {probe.set_to!r}): the shell user "
                "may not set debug properties on this phone")
    return ""


def _no_operations(probe: ProbeOutput, lines: List[Tuple[str, str]], unread: List[str]) -> str:
    if unread:
        return (f"NNAPI's log lines are in a format torchdroid does not know (e.g. {unread[0]!r}); nothing is "
                "guessed: report it with the phone's Android version")
    plan_lines = [msg for tag, msg in lines if tag == "ExecutionPlan"]
    if plan_lines:
        return (f"the runtime logged {len(plan_lines)} ExecutionPlan line(s) but none placing an operation "
                f"(e.g. {plan_lines[0]!r}): a format torchdroid does not know")
    ran = f"the model's run exited with {probe.exit_code}" if probe.exit_code else "the model ran"
    return (f"{ran}, but the phone logged no ExecutionPlan line for it with {VLOG_PROP}={probe.set_to}: its NNAPI "
            "runtime does not log placements (or logcat lost them)")


def lister_command(directory: str) -> str:
    return f"cd {shlex.quote(directory)} && ./{LISTER_NAME}"


def parse_devices(output: str) -> Tuple[List[List[str]], str]:
    """The lister's devices as ``[name, type, feature level, version]``; or none and why."""
    devices: List[List[str]] = []
    count: Optional[int] = None
    for line in output.splitlines():
        parts = line.rstrip("\r").split("\t")
        if line.startswith("unavailable: "):
            return [], f"the phone's NNAPI did not list its devices: {line[len('unavailable: '):].strip()}"
        if parts[0] == "devices" and len(parts) == 2 and parts[1].isdigit():
            count = int(parts[1])
        elif parts[0] == "device" and len(parts) == 6 and parts[3].lstrip("-").isdigit() \
                and parts[4].lstrip("-").isdigit():
            code, level = int(parts[3]), int(parts[4])
            devices.append([parts[2], DEVICE_TYPES.get(code, f"type code {code}"), feature_level_name(level),
                            parts[5]])
    if count is None:
        return [], f"{LISTER_NAME} printed nothing torchdroid can read: {output.strip()[:200]!r}"
    if count != len(devices):
        return [], f"{LISTER_NAME} announced {count} device(s) but listed {len(devices)}: its output was cut short"
    return devices, ""
