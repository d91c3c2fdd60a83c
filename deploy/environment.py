"""The device's conditions around a benchmark: CPU governor and frequencies, thermal status and
temperatures, battery level and charging; read before and after, with a warning when it throttled.

Everything comes from one shell call that reads what Android exposes to the shell user:
``/sys/devices/system/cpu/cpuN/cpufreq/{scaling_governor,scaling_cur_freq,cpuinfo_max_freq}`` (kHz),
``/sys/class/thermal/thermal_zoneN/{type,temp}`` (millidegrees Celsius), ``dumpsys thermalservice``
("Thermal Status: N" and its temperature lines) and ``dumpsys battery`` ("level: 85", "status: 2",
"AC powered: false", "temperature: 285" in tenths of a degree).  Missing pieces are left empty:
an unreadable sysfs file is normal on many phones.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

SECTION = "--torchdroid-env--"
# android.os.Temperature / PowerManager THERMAL_STATUS_*: 0 none, 1 light, 2 moderate, 3 severe, ...
THERMAL_NAMES = {0: "none", 1: "light", 2: "moderate", 3: "severe", 4: "critical", 5: "emergency", 6: "shutdown"}
# android.os.BatteryManager BATTERY_STATUS_*
BATTERY_STATUS = {1: "unknown", 2: "charging", 3: "discharging", 4: "not charging", 5: "full"}

READ_COMMAND = (
    f"echo {SECTION}; for c in /sys/devices/system/cpu/cpu[0-9]*; do [ -d $c/cpufreq ] || continue; "
    "echo \"${c##*/} $(cat $c/cpufreq/scaling_governor 2>/dev/null || echo ?) "
    "$(cat $c/cpufreq/scaling_cur_freq 2>/dev/null || echo 0) $(cat $c/cpufreq/cpuinfo_max_freq 2>/dev/null || echo 0)\"; "
    f"done; echo {SECTION}; for z in /sys/class/thermal/thermal_zone[0-9]*; do "
    "echo \"$(cat $z/type 2>/dev/null || echo ?) $(cat $z/temp 2>/dev/null || echo ?)\"; done; "
    f"echo {SECTION}; dumpsys thermalservice 2>/dev/null; echo {SECTION}; dumpsys battery 2>/dev/null; exit 0"
)
_TEMP_NEW = re.compile(r"Temperature\{mValue=(-?[0-9.]+), mType=(-?\d+), mName=([^,]+), mStatus=(\d+)")
_TEMP_OLD = re.compile(r"Name: ([^,]+), Type: (-?\d+), Status: (\d+), Value: (-?[0-9.]+)")


@dataclass
class Snapshot:
    governors: Dict[str, int] = field(default_factory=dict)  # governor -> number of CPUs
    cur_khz: List[int] = field(default_factory=list)
    max_khz: List[int] = field(default_factory=list)
    temps_c: Dict[str, float] = field(default_factory=dict)  # sensor -> degrees Celsius
    thermal_status: Optional[int] = None
    battery_level: Optional[int] = None
    battery_status: Optional[str] = None
    charging: Optional[bool] = None
    battery_temp_c: Optional[float] = None

    @property
    def hottest_c(self) -> Optional[float]:
        return max(self.temps_c.values()) if self.temps_c else None

    def summary(self) -> str:
        parts = []
        if self.governors:
            parts.append("governor " + "/".join(sorted(self.governors)))
        if self.cur_khz:
            parts.append(f"CPU {min(self.cur_khz) / 1e3:.0f}-{max(self.cur_khz) / 1e3:.0f} MHz")
        if self.thermal_status is not None:
            parts.append(f"thermal {THERMAL_NAMES.get(self.thermal_status, self.thermal_status)}")
        if self.hottest_c is not None:
            parts.append(f"hottest {self.hottest_c:.1f} °C")
        if self.battery_level is not None:
            parts.append(f"battery {self.battery_level}% {self.battery_status or ''}".rstrip())
        return ", ".join(parts) or "unknown"


def parse_cpus(text: str, snap: Snapshot) -> None:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 4 or not parts[0].startswith("cpu"):
            continue
        if parts[1] != "?":
            snap.governors[parts[1]] = snap.governors.get(parts[1], 0) + 1
        if parts[2].isdigit() and int(parts[2]):
            snap.cur_khz.append(int(parts[2]))
        if parts[3].isdigit() and int(parts[3]):
            snap.max_khz.append(int(parts[3]))


def parse_zones(text: str, snap: Snapshot) -> None:
    for line in text.splitlines():
        name, _, value = line.strip().rpartition(" ")
        if name and name != "?" and re.fullmatch(r"-?\d+", value):
            milli = int(value)
            # most zones report millidegrees; a few report degrees
            snap.temps_c[name] = milli / 1000.0 if abs(milli) >= 1000 else float(milli)


def parse_thermalservice(text: str, snap: Snapshot) -> None:
    m = re.search(r"^Thermal Status: (-?\d+)", text, re.M)
    if m:
        snap.thermal_status = int(m.group(1))
    current = text.split("Current temperatures from HAL:", 1)[-1]
    for v, _t, name, _s in _TEMP_NEW.findall(current):
        snap.temps_c.setdefault(name.strip(), float(v))
    for name, _t, _s, v in _TEMP_OLD.findall(current):
        snap.temps_c.setdefault(name.strip(), float(v))


def parse_battery(text: str, snap: Snapshot) -> None:
    values = dict(re.findall(r"^\s+([A-Za-z ]+): (.*?)\s*$", text, re.M))
    if values.get("level", "").isdigit():
        snap.battery_level = int(values["level"])
    status = values.get("status", "")
    if status.isdigit():
        snap.battery_status = BATTERY_STATUS.get(int(status), status)
    # BatteryService.dumpInternal prints one "<source> powered" line per charger; newer releases add "Dock powered"
    powered = [values.get(k) for k in ("AC powered", "USB powered", "Wireless powered", "Dock powered")
               if k in values]
    if powered:
        snap.charging = any(p == "true" for p in powered)
    if re.fullmatch(r"-?\d+", values.get("temperature", "")):
        snap.battery_temp_c = int(values["temperature"]) / 10.0


def parse_snapshot(output: str) -> Snapshot:
    snap = Snapshot()
    parts = output.split(SECTION)
    parsers = [parse_cpus, parse_zones, parse_thermalservice, parse_battery]
    for text, parse in zip(parts[1:], parsers):
        parse(text, snap)
    return snap


def throttle_warnings(before: Optional[Snapshot], after: Optional[Snapshot]) -> List[str]:
    """Why the numbers of this device may be low: thermal status raised, clocks capped, a power-saving governor."""
    out = []
    for label, snap in (("before", before), ("after", after)):
        if snap is not None and snap.thermal_status:
            out.append(f"thermal status {THERMAL_NAMES.get(snap.thermal_status, snap.thermal_status)} {label} the "
                       "benchmark: the device throttled")
    if after is not None and after.governors.get("powersave"):
        out.append("the CPU governor is powersave: the clocks are held low")
    if before is not None and after is not None and before.hottest_c is not None and after.hottest_c is not None \
            and after.hottest_c - before.hottest_c >= 10:
        out.append(f"the device heated up by {after.hottest_c - before.hottest_c:.0f} °C during the benchmark")
    return out


@dataclass
class Conditions:
    """Per device and run: SoC, page size and the snapshots before and after."""

    serial: str
    soc: str = ""
    page_size: Optional[int] = None
    before: Optional[Snapshot] = None
    after: Optional[Snapshot] = None
    warnings: List[str] = field(default_factory=list)

    @property
    def throttled(self) -> bool:
        return bool(self.warnings)

    def to_dict(self) -> dict:
        return {"serial": self.serial, "soc": self.soc, "page_size": self.page_size,
                "before": asdict(self.before) if self.before else None,
                "after": asdict(self.after) if self.after else None,
                "throttled": self.throttled, "warnings": list(self.warnings)}


# --------------------------------------------------------------------------- phone settings torchdroid changes

SAVED_DIR = "/data/local/tmp/.torchdroid-saved-settings"  # one file per property a run changed: the user's value


def _saved(prop: str, saved_dir: str) -> str:
    return shlex.quote(f"{saved_dir}/{prop}")


def set_command(prop: str, value: str, saved_dir: str = SAVED_DIR) -> str:
    """Shell: write the user's value of ``prop`` to a file on the phone, then set ``value``.  A file there already
    holds the user's value (an earlier run set the property and was dropped before putting it back): it is kept,
    never replaced by the value that run left.  Exit code non-zero when the value could not be saved (nothing
    is changed then)."""
    f = _saved(prop, saved_dir)
    return (f"mkdir -p {shlex.quote(saved_dir)} && {{ [ -f {f} ] || {{ getprop {shlex.quote(prop)} > {f}.new && "
            f"mv {f}.new {f}; }}; }} && setprop {shlex.quote(prop)} {shlex.quote(value)}")


def restore_command(prop: str, saved_dir: str = SAVED_DIR) -> str:
    """Shell: put the user's value of ``prop`` back from its file and remove the file (nothing when there is none)."""
    f = _saved(prop, saved_dir)
    return f"{{ [ ! -f {f} ] || {{ setprop {shlex.quote(prop)} \"$(cat {f})\" && rm -f {f}; }}; }}"


def restore_all_command(saved_dir: str = SAVED_DIR) -> str:
    """Shell: every value an earlier run saved and did not put back (its link dropped, it was killed), put back;
    prints ``restored PROP [VALUE]`` for each."""
    d = shlex.quote(saved_dir)
    return (f"for f in {d}/*; do [ -f \"$f\" ] || continue; case $f in *.new) rm -f \"$f\"; continue;; esac; "
            "p=${f##*/}; v=$(cat \"$f\"); setprop \"$p\" \"$v\" && rm -f \"$f\" && echo \"restored $p [$v]\"; done")


def restored(output: str) -> List[str]:
    """The lines of :func:`restore_all_command`'s output, as notes: ``debug.nn.vlog put back to 'model'``."""
    out = []
    for line in output.splitlines():
        m = re.match(r"^restored (\S+) \[(.*)\]$", line.strip())
        if m:
            out.append(f"{m.group(1)} put back to {m.group(2)!r} (an earlier torchdroid run changed it and was cut "
                       "off before it could)")
    return out
