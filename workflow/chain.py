"""`invoke all`: check everything first, then run each stage the machine allows, in order, and record it.

``prepare`` resolves and checks every stage's settings before any work starts (a bad value anywhere is
a usage error naming it), ``machine_facts`` asks the doctor what this machine has, and ``run_chain``
walks :data:`STAGES`: skip with the reason, "up to date" from the records, or run the stage's task.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from invoke import Exit
from invoke.exceptions import UnexpectedExit

from toolchain.console import note
from toolchain.resolve import Resolver
from toolchain.variants import with_stem
from workflow.run import INTERRUPT_CODES
from workflow.task_options import declared

from . import plan, stage_settings
from .plan import STAGES, AllSummary, Facts, StageOutcome

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AllPlan:
    """Everything `all` decided before running anything."""

    skip: Tuple[str, ...]
    weights: str  # what convert gets
    weights_note: str
    substituted: bool  # random weights instead of the pretrained ones
    variant: str  # the app's variant
    models: Path
    app_dir: Path
    app_id: str  # the app's application id (make-app's for the model all was asked for)
    build_dir: Path
    build_info: Path
    binary: Optional[Path]  # deploy.binary (INVOKE_DEPLOY_BINARY, invoke.yaml)
    apk: Optional[Path]  # deploy.apk
    replace_app: bool
    adb_host: Optional[str]
    adb_port: Optional[int]
    adb_servers: Tuple[str, ...]
    bench: Any = None  # HostBenchSettings
    verify: Any = None  # VerifySettings


def prepare(config: Any, weights: Optional[str] = None, model: Optional[str] = None, skip: Any = None,
            replace_app: bool = False, pretrained_status: Optional[Callable] = None) -> AllPlan:
    """Resolve and check every stage's settings (usage errors before any work), and the weights policy."""
    r = Resolver(config, {"weights": weights, "model": model, "skip": skip}, declared("all_"))
    skipped = tuple(plan.check_stage_names(r.get("all.skip")))
    variant = r.get("app.model")
    requested = r.get("all.weights")
    # convert's other values, for check_values; the weights are all's own (resolve_weights below decides `auto` once,
    # and convert gets the result when it runs): never convert.weights' `auto`, which would look for pretrained ones
    convert = stage_settings.convert(config, weights="random")
    for build in (stage_settings.build_android, stage_settings.build_app, stage_settings.report):
        build(config)
    bench, verify = stage_settings.host_bench(config), stage_settings.verify(config)
    app = stage_settings.make_app(config, model=model)
    deploy = stage_settings.deploy(config)
    check_values(skipped, r.get("convert.model"), requested, app, deploy, convert)
    variant = named_with_its_model(variant, r.get("convert.model"))
    if pretrained_status is None:
        from . import weights

        def pretrained_status(model: str):
            return weights.pretrained_status(model, r.path("build_dir"))
    used, why, substituted = plan.resolve_weights(requested, r.get("convert.model"), pretrained_status)
    return AllPlan(skip=skipped, weights=used, weights_note=why, substituted=substituted, variant=variant,
                   models=r.path("convert.out"), app_dir=app.out, app_id=app.application_id, build_dir=r.path("build_dir"),
                   build_info=deploy.build_info, binary=deploy.binary, apk=deploy.apk, replace_app=bool(replace_app),
                   adb_host=deploy.adb_host, adb_port=deploy.adb_port, adb_servers=tuple(deploy.servers), bench=bench,
                   verify=verify)


def named_with_its_model(variant: str, model: str) -> str:
    """The app's variant named with the model `all` converts (``quant_full`` -> ``mobilenetv2-quant_full``), so
    another model's files in the same directory never make it ambiguous; a name with its model is kept."""
    from converter.models import parse_model

    return with_stem(variant, parse_model(model).stem)


def check_values(skipped: Tuple[str, ...], model: str, weights: str, app: Any, deploy: Any,
                 convert: Any = None) -> None:
    """The values of the stages that will run, checked before any stage starts or reads a record (exit 2)."""
    if "convert" not in skipped:
        from converter.calibration import parse_calibration
        from converter.models import parse_model, parse_weights
        from converter.prequantized import parse_quantized_weights

        spec = parse_model(model)
        if weights.strip() != "auto":
            parse_weights(weights)
        if convert is not None:  # convert's own inputs: calibration images, pre-quantized weights
            parse_calibration(convert.calibration, convert.calibration_count, convert.seed, warn=False)
            parse_quantized_weights(convert.quantized_weights, spec)
    if "make-app" not in skipped:
        from appgen.make import check as check_app

        check_app(app)
    if "deploy" not in skipped:
        from deploy.plan import check_values as check_deploy

        check_deploy(deploy)


def machine_facts(config: Any) -> Facts:
    """What `all` can do here: the doctor's NDK, SDK and device rows, and whether a host NNAPI can be built."""
    import host_nnapi
    from workflow.doctor import machine_checks

    checks = machine_checks(stage_settings.doctor(config))
    return plan.facts_from_doctor(checks, host_nnapi=host_nnapi.availability())


def app_variant(p: AllPlan, say: Callable[[str], None] = note) -> str:
    """The variant `all` makes the app of: the configured one (app.model), or, when convert refused it (a partly made
    convert, exit 10), the model's first variant that was made (quant_full, core, none), said once."""
    from toolchain.records import ConvertManifest
    from toolchain.variants import MODES

    if not ConvertManifest.exists(p.models):
        return p.variant
    manifest = ConvertManifest.load(p.models)
    why = manifest.not_made().get(p.variant)
    stem = p.variant.rsplit("-", 1)[0]
    made = [f"{stem}-quant_{m}" for m in reversed(MODES) if f"{stem}-quant_{m}" in manifest.variants()]
    if why is None or not made:
        return p.variant  # make-app says what is missing and why
    say(f"the app gets {made[0]}: convert refused {p.variant} ({why.split('; fix: ', 1)[0]})")
    return made[0]


def recorded_apk(app_dir: Path) -> Optional[Path]:
    """The APK `invoke build-app` recorded in the app's app-info, if that file exists."""
    from toolchain.records import AppInfo

    if not AppInfo.exists(app_dir):
        return None
    apk = AppInfo.load(app_dir).apk_file
    return apk if apk and apk.is_file() else None


def current_facts(p: AllPlan, facts: Facts, summary: AllSummary) -> Facts:
    """The facts as they are now: what earlier stages built changes what later ones can do."""
    return dataclasses.replace(
        facts,
        build_info=p.build_info if p.build_info.is_file() else None,
        binary=p.binary if p.binary is not None and p.binary.is_file() else None,
        apk=p.apk if p.apk is not None and p.apk.is_file() else recorded_apk(p.app_dir),
        failed=summary.failed,
        ran=tuple(o.stage for o in summary.outcomes if o.status == plan.RAN),
    )


def bench_is_current(p: AllPlan) -> Optional[str]:
    """host-bench.json measured exactly these CPU model files with the same protocol, warm-up, iterations, rounds
    and threads."""
    from converter.host_bench import PROTOCOL, HostBenchRecord  # torch-free; an older protocol's: measured again
    from toolchain.records import ConvertManifest

    if p.bench is None:
        return None
    path = Path(p.bench.out) / HostBenchRecord.NAME
    if not path.is_file() or not ConvertManifest.exists(p.bench.models):
        return None
    try:
        done = HostBenchRecord.load(path).data
        manifest = ConvertManifest.load(p.bench.models)
    except Exception:  # unreadable, foreign or stale records: measure again (bench then says what is wrong)
        return None
    wanted = {f.file: f.sha256 for f in manifest.files if f.backend == "cpu"}
    same = (done.get("models") == wanted and done.get("warmup") == p.bench.warmup
            and done.get("iters") == p.bench.iters and done.get("threads") == p.bench.threads
            and done.get("repeat") == p.bench.repeat and done.get("protocol") == PROTOCOL)
    return f"{path} measured these models with these settings" if same and wanted else None


def up_to_date(stage: str, p: AllPlan) -> Optional[str]:
    """Why ``stage`` has nothing to do (from the records alone, without torch), or None."""
    if stage == "bench":
        return bench_is_current(p)
    if stage == "verify" and p.verify is not None:
        from host_nnapi.verify import is_current

        current, why = is_current(p.verify)  # hashes and records only: no torch, nothing built
        return why if current else None
    # make-app decides by itself (cheaply, without torch): its app-info's request covers the models and
    # every setting, so an app made with another name, runtime or template is not called up to date here.
    return None


def run_chain(p: AllPlan, facts: Facts, runs: Dict[str, Callable[[Facts], None]], summary: AllSummary,
              say: Callable[[str], None] = print) -> AllSummary:
    """Each stage in order: skipped (with the reason), up to date, or run; failures are recorded, Ctrl-C stops.

    Only a stage that runs prints (``== stage``, then its own output): what was skipped or up to date, and why, is
    the summary table's (workflow/show.all_summary), said once at the end."""
    for stage in STAGES:
        now = current_facts(p, facts, summary)
        decision = plan.decide(stage, now, p.skip)
        if not decision.run:
            summary.outcomes.append(StageOutcome(stage, plan.SKIPPED, decision.reason))
            log.debug("%s: skipped: %s", stage, decision.reason)
            continue
        why = up_to_date(stage, p)
        if why:
            summary.outcomes.append(StageOutcome(stage, plan.UP_TO_DATE, why))
            log.debug("%s: up to date (%s)", stage, why)
            continue
        say(f"== {stage}")
        summary.outcomes.append(_run_one(stage, runs[stage], now, say))
        if summary.outcomes[-1].status == plan.INTERRUPTED:
            break
    return summary


def _run_one(stage: str, run: Callable[[Facts], None], facts: Facts, say: Callable[[str], None]) -> StageOutcome:
    t0 = time.monotonic()
    try:
        result = run(facts)
    except (Exit, UnexpectedExit) as e:
        message = e.message if isinstance(e, Exit) else str(e)
        say(str(message or e))
        return StageOutcome(stage, _status(e), str(message or e), time.monotonic() - t0)
    if getattr(result, "reused", False) or getattr(result, "up_to_date", False):
        return StageOutcome(stage, plan.UP_TO_DATE, "reused: its inputs are unchanged", time.monotonic() - t0)
    return StageOutcome(stage, plan.RAN, "", time.monotonic() - t0)


def _status(e: BaseException) -> str:
    """A stage's outcome from its exit: interrupted, partly made (convert's PartlyConverted, exit 10: the stages
    after it use what was made), or failed."""
    from toolchain.errors import PartlyConverted

    code = e.code if isinstance(e, Exit) else None
    if code in INTERRUPT_CODES:
        return plan.INTERRUPTED
    return plan.PARTLY if code == PartlyConverted.exit_code else plan.FAILED


def announce_weights(p: AllPlan) -> None:
    from toolchain.console import warning

    (warning if p.substituted else note)(("" if p.substituted else "weights: ") + p.weights_note)
