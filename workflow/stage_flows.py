"""Policies that join two stages: verify after convert, convert before make-app, the app's runtime check.

Stage packages never import each other; when one task needs another stage's work, the policy lives here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from toolchain.console import note, warning

from . import show, stage_settings
from .run import stage


def verify_after_convert(config: Any, models: Path, variants: Sequence[str] = (), debug: bool = False):
    """After `invoke convert`: verify the fresh models when the host NNAPI can be built here.

    config verify.after_convert: "warn" (default: a failed check is printed, convert still succeeds),
    "fail" (a failed check fails convert with exit code 8) or "off".  ``variants``: the qualified names of the
    variants this convert wrote (``mobilenetv2-quant_full``: another model's files beside them never make the names
    ambiguous).  Returns the VerifyResult or None.
    """
    mode = stage_settings.after_convert(config)
    if mode == "off":
        return None
    import host_nnapi

    ok, why = host_nnapi.availability()
    if not ok:
        note(f"host NNAPI verification skipped: {why}")
        return None
    from host_nnapi.verify import is_current, verify as run_verify
    from toolchain.errors import VerificationError

    with stage(config, "verify", debug):
        settings = stage_settings.verify(config, models=str(models), variant=list(variants))
        current, why = is_current(settings)
        if current:
            print(f"verify: up to date: {why}")
            return None
        try:
            result = run_verify(settings)
        except VerificationError as e:
            if mode == "fail":
                raise
            warning(f"host NNAPI verification failed (convert still succeeded; verify.after_convert: fail "
                    f"makes this an error): {e}")
            return None
    show.verify(result)
    return result


def verify_converted(config: Any, result: Any, debug: bool = False):
    """verify_after_convert for the NNAPI models this convert wrote (``result``: the TorchScript format's)."""
    return verify_after_convert(config, result.manifest_path.parent,
                                sorted({f.qualified_variant for f in result.files if f.backend == "nnapi"}), debug)


# Each format's steps after its convert (`convert --no-verify`: none); a format with none has no entry.
AFTER_CONVERT = {"torchscript": (verify_converted,)}


def after_convert(config: Any, results: dict, debug: bool = False) -> None:
    """The steps :data:`AFTER_CONVERT` declares for each format converted (``results``: {format: its result})."""
    for fmt, result in results.items():
        for step in AFTER_CONVERT.get(fmt, ()):
            step(config, result, debug)


def make_app(config: Any, settings: Any):
    """Generate (or find up to date) the app, then check-compat the runtime it links.  Never converts."""
    from appgen import make_app as run_make_app

    result = run_make_app(settings)
    return result, app_compat(config, settings.models, result.runtime)


def app_compat(config: Any, models_dir: Path, runtime: Any):
    """check-compat for the runtime the app links: a locally built AAR (via its build-info) or a Maven version."""
    from ndk_build import check_compat as run_check

    if getattr(runtime, "library", "pytorch_android") != "pytorch_android":
        return None  # an ExecuTorch program: check-compat knows TorchScript runtimes only
    if runtime.source == "aar" and runtime.aar:
        info = built_aar_info(stage_settings.build_info_path(stage_settings.Resolver(config)), Path(runtime.aar))
        return run_check(models_dir, build_info=info) if info is not None else None
    return run_check(models_dir, pytorch_android=runtime.pytorch_android) if runtime.pytorch_android else None


def built_aar_info(build_info: Path, aar: Path) -> Optional[Any]:
    """The BuildInfo whose pytorch_android artefact is exactly ``aar`` (same sha256), else None (built elsewhere)."""
    from toolchain.fsutil import sha256_file
    from toolchain.records import BuildInfo

    if not build_info.is_file():
        return None
    info = BuildInfo.load(build_info)
    arts = [a for a in info.get("artefacts", []) if a.get("name") == "pytorch_android"]
    return info if arts and arts[0].get("sha256") == sha256_file(aar) else None


def deploy_compat(settings: Any) -> None:
    """check-compat of the models against the runtime deploy is about to push; refuse what cannot run."""
    if not (settings.bench and settings.binary is None and settings.build_info.is_file()
            and not settings.allow_mismatch and settings.models.is_dir()):
        return
    from ndk_build import check_compat as run_check

    report = run_check(settings.models, build_info=settings.build_info)
    if not report.ok:
        for line in report.lines():
            print(f"check-compat: {line}")
    report.raise_for_status()


def host_references(settings: Any) -> None:
    """Before deploy's numerics check: the host's reference outputs of the models it will push (the CPU models on
    this machine's torch, the NNAPI models on the host NNAPI in both roundings), computed only for changed files."""
    if not (settings.numerics and settings.bench) or not settings.models.is_dir():
        return
    from deploy.plan import plan_binary, plan_models
    from host_nnapi.references import ensure
    from toolchain.errors import RecordError, TorchdroidError

    try:
        if plan_binary(settings) is None:
            return  # only the binary's output check reads them; deploy's plan says what there is to deploy
    except TorchdroidError:  # deploy's own plan says what is wrong with the binary
        return
    try:
        models = plan_models(settings, needed=False)
    except RecordError:  # deploy's own plan says what is wrong with the models
        return
    if not models:
        return
    try:
        ensure(settings.models, models)
    except OSError as e:  # a read-only models directory: deploy goes on, the report says numerics were not checked
        warning(f"the host reference outputs could not be written into {settings.models} ({e.strerror or e}): the "
                "phones' outputs are not checked in this run; make the directory writable, or pass --no-numerics")


# Each format's steps before deploy pushes anything, in order (a format with none has no entry): TorchScript's models
# checked against the runtime about to run them, then the host's reference outputs the phones' outputs meet.
BEFORE_DEPLOY = {"torchscript": (deploy_compat, host_references)}


def before_deploy(settings: Any) -> None:
    """The steps :data:`BEFORE_DEPLOY` declares for each format deploy runs (settings.formats)."""
    for fmt in settings.formats:
        for step in BEFORE_DEPLOY.get(fmt, ()):
            step(settings)
