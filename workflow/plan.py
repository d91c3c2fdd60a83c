"""Which stages `invoke all` runs on this machine, and the record of what it did."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from toolchain import records
from toolchain.errors import UsageError

# The order `invoke all` runs them: the quick host stages first, the long build after them,
# then what needs the build or a phone.
STAGES: Tuple[str, ...] = (
    "convert", "verify", "make-app", "build-app", "bench", "build-android", "check-compat", "deploy", "report",
)

ALL_KIND = "torchdroid-all"
ALL_SCHEMA = 1

RAN, SKIPPED, UP_TO_DATE, FAILED, INTERRUPTED = "ran", "skipped", "up to date", "failed", "interrupted"
PARTLY = "partly made"  # convert made some of what was asked and refused the rest (exit 10): the chain goes on

# Doctor rows `all` reads: fact -> the doctor's stable id ("deploy.devices@HOST:PORT" rows count as devices).
DOCTOR_IDS = {"ndk": "build-android.ndk", "sdk": "make-app.sdk", "devices": "deploy.devices"}


@dataclass(frozen=True)
class Facts:
    """What this machine has, as far as `invoke all` cares.  Each entry: (available, why or where)."""

    host_nnapi: Tuple[bool, str]
    ndk: Tuple[bool, str]
    sdk: Tuple[bool, str]
    devices: Tuple[bool, str]
    build_info: Optional[Path] = None  # an existing build-info.json for the configured ABI
    apk: Optional[Path] = None  # an APK to install: deploy.apk, else the one recorded in the app-info
    binary: Optional[Path] = None  # a benchmark binary from deploy.binary (besides the build-info's)
    app: Tuple[bool, str] = (False, "not generated yet")  # is the generated app current?
    failed: Tuple[str, ...] = ()  # stages that failed so far
    ran: Tuple[str, ...] = ()  # stages that ran and succeeded so far


@dataclass(frozen=True)
class StageDecision:
    stage: str
    run: bool
    reason: str


@dataclass
class StageOutcome:
    stage: str
    status: str  # ran | skipped | up to date | failed | interrupted | partly made (convert's exit 10)
    detail: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"stage": self.stage, "status": self.status, "detail": self.detail, "seconds": round(self.seconds, 2)}


def _fact_of(check) -> Optional[str]:
    """Which fact a doctor row feeds, by its stable id (every adb server's devices row feeds "devices")."""
    row_id = getattr(check, "id", "") or ""
    for fact, wanted in DOCTOR_IDS.items():
        if row_id == wanted or row_id.startswith(wanted + "@"):
            return fact
    return None


def facts_from_doctor(checks: Sequence, **extra) -> Facts:
    """Facts from `invoke doctor`'s checks (workflow.doctor.Check rows) plus the ones only `all` knows."""
    by_id: Dict[str, list] = {}
    for c in checks:
        fact_name = _fact_of(c)
        if fact_name:
            by_id.setdefault(fact_name, []).append(c)

    def fact(row_id: str, fix_default: str) -> Tuple[bool, str]:
        rows = by_id.get(row_id) or []
        if not rows:
            return False, f"not checked ({fix_default})"
        good = [c for c in rows if c.status == "ok"]
        if good:  # one adb server with a ready phone is enough
            return True, "; ".join(c.found for c in good)
        return False, "; ".join(f"{c.found}; {c.fix or fix_default}" for c in rows)

    return Facts(
        ndk=fact("ndk", "install the NDK and set ANDROID_NDK"),
        sdk=fact("sdk", "install the Android SDK and set ANDROID_HOME"),
        devices=fact("devices", "connect a phone with USB debugging on"),
        **extra,
    )


def _needs(fact: Tuple[bool, str], what: str) -> Tuple[bool, str]:
    ok, why = fact
    return ok, "" if ok else f"{what}: {why}"


def _build_app(f: Facts, skip: Sequence[str]) -> Tuple[bool, str]:
    if "make-app" in f.failed or "make-app" in skip:
        return False, "no generated app"
    return _needs(f.sdk, "no Android SDK")


def _check_compat(f: Facts, skip: Sequence[str]) -> Tuple[bool, str]:
    if f.build_info is None:
        return False, "no build-info (`invoke build-android` has not built the runtime)"
    return True, ""


def _deploy(f: Facts, skip: Sequence[str]) -> Tuple[bool, str]:
    ok, why = f.devices
    if not ok:
        return False, f"no phone: {why}"
    if f.build_info is None and f.binary is None and f.apk is None:
        return False, ("nothing to deploy: no benchmark binary (build-android or deploy.binary) and no APK "
                       "(build-app or deploy.apk)")
    return True, ""


def _report(f: Facts, skip: Sequence[str]) -> Tuple[bool, str]:
    if "deploy" in f.ran:
        return True, ""
    return False, "deploy failed" if "deploy" in f.failed else "no deployment to report on"


# What each stage needs from the machine and the stages before it: (run?, why not).
_CONDITIONS: Dict[str, Callable[[Facts, Sequence[str]], Tuple[bool, str]]] = {
    "convert": lambda f, skip: (True, ""),
    "verify": lambda f, skip: _needs(f.host_nnapi, "no host NNAPI here"),
    "make-app": lambda f, skip: (True, ""),
    "build-app": _build_app,
    "bench": lambda f, skip: (True, ""),
    "build-android": lambda f, skip: _needs(f.ndk, "no usable Android NDK"),
    "check-compat": _check_compat,
    "deploy": _deploy,
    "report": _report,
}


def decide(stage: str, f: Facts, skip: Sequence[str] = ()) -> StageDecision:
    """Run ``stage`` now?  Never raises: a stage the machine cannot do is skipped with the reason and the fix."""
    if stage not in STAGES:
        raise ValueError(stage)
    if stage in skip:
        return StageDecision(stage, False, "skipped with --skip")
    if "convert" in f.failed:
        return StageDecision(stage, False, "convert failed")
    run, why = _CONDITIONS[stage](f, skip)
    return StageDecision(stage, run, why)


def resolve_weights(requested: Optional[str], model: str,
                    status: Callable[[str], Tuple[bool, str]]) -> Tuple[str, str, bool]:
    """``(weights, note, substituted)`` for `invoke all`.

    ``auto`` (the default) means pretrained when they can be had, else random weights, announced
    loudly and recorded: the manifest says ``random``, and the summary says why.  Any explicit
    value (``pretrained``, ``random``, a path) is passed on unchanged: an explicit ``pretrained``
    fails offline with the converter's message.
    """
    from converter.models import RANDOM_WEIGHTS

    value = (requested or "auto").strip()
    if value != "auto":
        return value, f"--weights {value} (as requested)", False
    ok, why = status(model)
    if ok:
        return "pretrained", f"pretrained weights ({why})", False
    return "random", (f"pretrained weights are not available here ({why}), so this run uses {RANDOM_WEIGHTS}. "
                      "`--weights pretrained` requires them; `--weights PATH` uses a local state_dict"), True


@dataclass
class AllSummary:
    weights: Dict[str, object]
    outcomes: List[StageOutcome] = field(default_factory=list)
    started: float = field(default_factory=time.time)

    @property
    def failed(self) -> Tuple[str, ...]:
        return tuple(o.stage for o in self.outcomes if o.status == FAILED)

    @property
    def partly(self) -> Tuple[str, ...]:
        """Stages that made some of what was asked and refused the rest (convert's exit 10); not failures."""
        return tuple(o.stage for o in self.outcomes if o.status == PARTLY)

    def write(self, path: Path, facts: Optional[Mapping[str, object]] = None) -> Path:
        return records.write_record(Path(path), ALL_KIND, ALL_SCHEMA, {
            "weights": self.weights,
            "machine": dict(facts or {}),
            "stages": [o.to_dict() for o in self.outcomes],
            "seconds": round(time.time() - self.started, 1),
            "ok": not self.failed,
            "partly": list(self.partly),
        })


def check_stage_names(names: Sequence[str]) -> List[str]:
    bad = [n for n in names if n not in STAGES]
    if bad:
        raise UsageError(f"unknown stage {', '.join(bad)} in --skip", remedy=f"stages: {', '.join(STAGES)}")
    return list(names)
