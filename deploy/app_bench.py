"""The in-app benchmark: launch the app's benchmark intent and follow its own logcat lines.

The app (templates/android_app) logs ``TORCHDROID_PROGRESS {...}`` after loading the model, after the
warm-up and every tenth of the timed iterations, then one ``TORCHDROID_BENCH {...}`` line with the
result (toolchain.records documents the contract).  Deploy waits on those lines: the first must come
within ``launch_wait`` seconds (app start + model load), then each next one within a time scaled to
the iterations.  A failing ``am start``, a failing ``logcat`` or an app crash ends the wait at once.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

from toolchain.errors import TorchdroidError
from toolchain.records import APP_BENCH_PREFIX, APP_BENCH_TAG, APP_PROGRESS_PREFIX

from .adb import Device

log = logging.getLogger(__name__)

SECONDS_PER_ITERATION = 2.0  # ceiling per iteration between two progress lines (a slow phone, a big model)
POLL_S = 0.5
_AM_ERROR = re.compile(r"^(Error( type \d+)?:?|Exception|java\.lang\.\w+|Warning: Activity not started|"
                       r"Security exception)", re.M)
_SPECIFIC = re.compile(r"^(java\.[\w.$]+(Exception|Error)\b|Error: |Warning: Activity not started)")


@dataclass
class AppBench:
    backend: str
    record: Optional[dict]
    problem: Optional[str] = None
    device_fault: bool = False  # am start or logcat failed: another backend would fail the same way


def parse_prefixed(output: str, prefix: str) -> List[dict]:
    """The JSON objects of every logcat line that carries ``prefix``."""
    out = []
    for line in output.splitlines():
        idx = line.find(prefix)
        if idx < 0:
            continue
        try:
            rec = json.loads(line[idx + len(prefix):])
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def parse_app_lines(output: str) -> List[dict]:
    return parse_prefixed(output, APP_BENCH_PREFIX)


def app_command(application_id: str, activity: str, backend: str, opts) -> str:
    component = f"{application_id}/{activity}"
    # -S: a fresh process per run. Without it the second run's intent only brings the first run's task to
    # the front ("Warning: Activity not started, ..."): its extras never reach the app (docs/facts.md D8).
    return (f"am start -S -W -n {shlex.quote(component)} --ez benchmark true --ei iters {int(opts.iters)} "
            f"--ei warmup {int(opts.warmup)} --es backend {shlex.quote(backend)}")


def am_start_problem(code: int, output: str) -> Optional[str]:
    """Why ``am start`` did not start the activity (it often exits 0 with an ``Error:`` line), or None."""
    m = _AM_ERROR.search(output)
    if m or code != 0:
        lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
        specific = [ln for ln in lines if _SPECIFIC.match(ln)]
        detail = specific[0] if specific else next((ln for ln in lines if _AM_ERROR.match(ln)), None)
        return detail or (lines[-1] if lines else f"exit code {code}")
    return None


def crash_line(output: str, package: str) -> Optional[str]:
    """The AndroidRuntime line naming our process's crash, if logcat shows one."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "FATAL EXCEPTION" in line:
            near = "\n".join(lines[i:i + 4])
            if f"Process: {package}" in near:
                cause = next((ln.split(": ", 1)[-1] for ln in lines[i + 2:i + 5] if "Exception" in ln
                              or "Error" in ln), "")
                return cause.strip() or "FATAL EXCEPTION"
    return None


class _Follower:
    """Reads the app's logcat lines for one backend; knows when to give up."""

    def __init__(self, device: Device, package: str, backend: str, launch_wait: float, gap: float):
        self.device = device
        self.package = package
        self.backend = backend
        self.launch_wait = launch_wait
        self.gap = gap
        self.last_seen = time.monotonic()
        self.progress = 0

    def read(self) -> str:
        res = self.device.shell(f"logcat -d -s {APP_BENCH_TAG}:I AndroidRuntime:E")
        if not res.ok:
            raise _Stop(f"`logcat` failed on {self.device.serial} (exit code {res.code}): "
                        + (" / ".join(res.tail(2)) or "no output"), device_fault=True)
        return res.output

    def step(self, output: str) -> Optional[dict]:
        """The result line if it is there; raises _Stop on a crash or when the app went quiet too long."""
        results = [r for r in parse_app_lines(output) if r.get("backend") in (self.backend, None)
                   or r.get("requested") == self.backend]
        if results:
            return results[-1]
        crash = crash_line(output, self.package)
        if crash:
            raise _Stop(f"the app crashed: {crash}")
        seen = [p for p in parse_prefixed(output, APP_PROGRESS_PREFIX) if p.get("backend") == self.backend]
        now = time.monotonic()
        if len(seen) > self.progress:
            self.progress, self.last_seen = len(seen), now
        limit = self.launch_wait if self.progress == 0 else self.gap
        if now - self.last_seen > limit:
            what = "no progress line" if self.progress == 0 else f"no progress for {limit:g}s after line {self.progress}"
            raise _Stop(f"{what} from the app within {limit:g}s (see `adb -s {self.device.serial} logcat -s "
                        f"{APP_BENCH_TAG}`)")
        return None


class _Stop(Exception):
    def __init__(self, reason: str, device_fault: bool = False):
        super().__init__(reason)
        self.device_fault = device_fault


def run_app(device: Device, application_id: str, activity: str, backend: str, opts, launch_wait: float = 60.0,
            sleep: Callable[[float], None] = time.sleep) -> AppBench:
    """Launch the benchmark intent and wait on the app's own progress lines; never raises for the app's faults."""
    gap = launch_wait + SECONDS_PER_ITERATION * max(1, (int(opts.iters) + int(opts.warmup)) // 10)
    follower = _Follower(device, application_id, backend, launch_wait, gap)
    try:
        clear = device.shell("logcat -c")
        if not clear.ok:
            raise _Stop(f"`logcat -c` failed on {device.serial} (exit code {clear.code}): "
                        + (" / ".join(clear.tail(2)) or "no output"), device_fault=True)
        res = device.shell(app_command(application_id, activity, backend, opts), timeout=60)
        problem = am_start_problem(res.code, res.output)
        if problem:
            raise _Stop(f"`am start` could not start {application_id}/{activity}: {problem}", device_fault=True)
        while True:
            rec = follower.step(follower.read())
            if rec is not None:
                return AppBench(backend, rec, rec.get("error"))
            sleep(POLL_S)
    except _Stop as e:
        return AppBench(backend, None, str(e), e.device_fault)
    except TorchdroidError as e:  # the device went away or a call timed out
        return AppBench(backend, None, e.what, True)
