"""One function per stage: (invoke config, command-line values) -> that stage's settings object.

Each takes the task's parameters as keyword arguments (``None`` = not given on the command line),
reads every value through :class:`toolchain.resolve.Resolver` (typed, range-checked, with its
source kept for messages) and builds the stage's settings dataclass.  Defaults come only from
the schema in :mod:`toolchain.settings`.  The stage packages are imported inside the functions:
importing this module stays cheap (``invoke --list``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional

from toolchain.errors import UsageError
from toolchain.layout import Layout, app_dir_name
from toolchain.resolve import Resolver
from toolchain.settings import default

log = logging.getLogger(__name__)


def _text(path: Optional[Path]) -> Optional[str]:
    return str(path) if path is not None else None


def _resolver(config: Any, cli: dict, *tasks: str) -> Resolver:
    """A resolver for a stage function's command-line values, named as the parameters of ``tasks`` (tasks.py), which
    declare the config key each one sets: ``r.get("bench.iter")`` finds ``--iter``."""
    from workflow.task_options import declared

    return Resolver(config, cli, declared(*tasks))


def build_dir(config: Any) -> Path:
    return Resolver(config).path("build_dir")


def debug(config: Any, cli_debug: Optional[bool] = None) -> bool:
    return bool(cli_debug) or bool(Resolver(config).get("debug"))


def build_info_path(r: Resolver) -> Path:
    """<build_dir>/android/<abi>/build-info.json, the one place the path is joined."""
    from toolchain.records import build_info_path as joined

    return joined(r.path("build_dir"), r.get("android.abi"))


# --------------------------------------------------------------------------- convert, bench, verify


def weights(r: Resolver) -> str:
    """convert.weights with ``auto`` (the default of every task, as in `invoke all`) decided here: pretrained when they
    can be had, else random weights, said loudly as a warning; the manifest then records ``random``."""
    value = r.get("convert.weights")
    if value.strip() != "auto":
        return value
    from workflow.plan import resolve_weights
    from workflow.weights import pretrained_status

    build = r.path("build_dir")
    used, note, substituted = resolve_weights("auto", r.get("convert.model"),
                                              lambda model: pretrained_status(model, build))
    if substituted:
        log.warning("%s", note)
    return used


def convert(config: Any, **cli) -> "Any":
    from converter import ConvertSettings

    r = _resolver(config, cli, "convert")
    modes = cli.pop("modes", None)
    return ConvertSettings(
        model=r.get("convert.model"),
        modes=tuple(modes or r.get("convert.quant")),
        weights=weights(r),
        calibration=r.path("convert.calibration"),
        calibration_count=r.get("convert.calibration_count"),
        quantized_weights=r.get("convert.quantized_weights"),
        seed=r.get("convert.seed"),
        factory_timeout=float(r.get("convert.factory_timeout")),
        inputs=r.get("convert.inputs"),
        out=r.path("convert.out"),
        build_dir=r.path("build_dir"),
        force=r.get_flag("convert.force"),
    )


def formats(config: Any, stage: str = "convert", **cli) -> tuple:
    """convert.format or bench.format (--format torchscript,executorch): which formats the stage runs, in order."""
    return _formats(_resolver(config, cli, stage), stage)


def _formats(r: Resolver, stage: str) -> tuple:
    """``<stage>.format`` (--format), each format once, in the order given."""
    return tuple(dict.fromkeys(r.get(f"{stage}.format")))


def per_format(config: Any, stage: str, **cli) -> dict:
    """``{format: its settings}`` for ``stage`` (convert, bench) in ``<stage>.format`` order: every format's settings
    resolved, so checked, before any work (converter/formats.py runs them).  An option of a format the stage does not
    run is refused (:func:`for_formats_run`)."""
    names = formats(config, stage, format=cli.pop("format", None))
    for_formats_run(names, stage, _resolver(config, cli, stage))
    resolvers = {"convert": {"torchscript": convert, "executorch": executorch_convert},
                 "bench": {"torchscript": host_bench, "executorch": pte_bench}}[stage]
    return {name: resolvers[name](config, **cli) for name in names}


def for_formats_run(names: tuple, stage: str, r: Resolver) -> None:
    """An option declared for some formats only (``formats=`` in tasks.py: --delegates, --no-legacy...) given to a
    stage that runs none of them is a usage error, never silently ignored; its malformed value is named first."""
    from converter.formats import FORMATS
    from workflow.task_options import declared, format_options

    keys = declared(stage)  # the stage's task (convert, bench) declares its options
    for param, only in format_options(stage).items():
        if r.cli.get(param) in (None, False, [], ()) or set(only) & set(names):
            continue
        if param in keys:
            r.get(keys[param])
        option = "--" + param.replace("_", "-")
        wanted = ",".join(f for f in FORMATS if f in names or f in only)
        raise UsageError(f"{option} applies to the {' and '.join(FORMATS[f].title for f in only)} lane, which this "
                         f"{stage} does not run",
                         cause=f"the formats are {','.join(names)}: the value would be silently ignored",
                         remedy=f"add --format {wanted} (or --format {','.join(only)}), or drop {option}")


def executorch_convert(config: Any, **cli):
    """The ExecuTorch lane's settings: ``--quant`` chooses its precisions as well as the TorchScript modes (none ->
    fp32 programs, core/full -> int8); a --quant and --delegates that together ask for no program are a usage error
    here, before any lane converts."""
    from converter.executorch import ExecutorchSettings, asked_variants, parse_delegates

    r = _resolver(config, cli, "convert")
    settings = ExecutorchSettings(
        out=r.path("convert.out"), model=r.get("convert.model"),
        weights=weights(r), calibration=r.path("convert.calibration"),
        calibration_count=r.get("convert.calibration_count"), seed=r.get("convert.seed"),
        factory_timeout=float(r.get("convert.factory_timeout")), inputs=r.get("convert.inputs"),
        delegates=tuple(r.get("convert.executorch_delegates")), quant=tuple(r.get("convert.quant")),
        force=r.get_flag("convert.force"))
    asked_variants(settings.quant, parse_delegates(list(settings.delegates)))
    return settings


def pte_bench(config: Any, **cli):
    from converter.host_bench import PteBenchSettings

    r = _resolver(config, cli, "bench")
    return PteBenchSettings(
        **vars(host_bench(config, **cli)), float_atol=r.get("verify.float_atol"), float_rtol=r.get("verify.float_rtol"),
        per_operator=not cli.get("no_per_operator"), legacy=not cli.get("no_legacy"),
        reference_kernels=r.get("bench.reference_kernels"), again=r.get_flag("bench.again"))


def executorch_runtime(config: Any, **cli):
    """`build-android --lane executorch`: ExecuTorch's executor_runner at the pinned release.  ``not_taken``: the
    PyTorch lanes' command-line options, refused when given (the lane builds its pinned release only)."""
    from ndk_build.executorch_runtime import RuntimeBuildSettings

    given = sorted("--" + k.replace("_", "-") for k, v in (cli.pop("not_taken", None) or {}).items() if v)
    if given:
        raise UsageError(f"{', '.join(given)}: not taken by --lane executorch",
                         cause="that lane builds ExecuTorch's executor_runner at its pinned release, from its own "
                               "repository, with its own CMake options; these options belong to the PyTorch lanes",
                         remedy=f"drop {', '.join(given)}, or build PyTorch Mobile without --lane executorch")
    r = _resolver(config, cli, "build_android")
    return RuntimeBuildSettings(
        build_dir=r.path("build_dir"), ndk=cli.get("ndk"), ndk_config=_text(r.configured("ndk.path")),
        abi=r.get("android.abi"), api_level=r.get("android.api_level"),
        max_jobs=r.get("android.max_jobs"), git_jobs=r.get("pytorch.git_jobs"),
        event_tracer=r.get_flag("android.executorch_event_tracer"),
        python=r.get("pytorch.python"))


def host_bench(config: Any, **cli):
    from converter.host_bench import HostBenchSettings

    r = _resolver(config, cli, "bench")
    return HostBenchSettings(
        models=r.path("convert.out"),
        warmup=r.get("bench.warmup"),
        iters=r.get("bench.iter"),
        threads=r.get("bench.threads"),
        out=r.path("bench.out"),
        repeat=r.get("bench.repeat"),
    )


def verify(config: Any, **cli):
    from host_nnapi.verify import VerifySettings

    r = _resolver(config, cli, "verify")
    return VerifySettings(
        models=r.path("convert.out"),
        out=r.path("verify.out"),
        variants=tuple(r.get("verify.variants")),
        rounding=r.get("verify.rounding"),
        float_atol=r.get("verify.float_atol"),
        float_rtol=r.get("verify.float_rtol"),
        max_lsb=r.get("verify.max_lsb"),
        min_top1_agreement=r.get("verify.min_top1_agreement"),
        min_top5_agreement=r.get("verify.min_top5_agreement"),
        random_inputs=r.get("verify.random_inputs"),
        seed=r.get("verify.seed"),
        api_level=r.get("android.api_level"),
        layerwise=r.get("verify.layerwise"),
        cache=r.path("verify.cache"),
    )


def after_convert(config: Any) -> str:
    """verify.after_convert: warn | fail | off."""
    return Resolver(config).get("verify.after_convert")


# --------------------------------------------------------------------------- build-android, check-compat, doctor


def build_android(config: Any, **cli):
    from ndk_build import BuildSettings

    r = _resolver(config, cli, "build_android")
    ndk_config = r.configured("ndk.path")
    sdk = r.get("android.sdk")
    return BuildSettings(
        build_dir=r.path("build_dir"),
        lane=r.get("pytorch.lane"),
        lane_explicit=r.given("pytorch.lane"),
        commit=r.get("pytorch.commit"),
        repo_url=r.get("pytorch.repo_url"),
        source_dir=r.path("pytorch.source_dir"),
        ndk=str(r.path("ndk.path")) if r.given("ndk.path") else None,
        ndk_config=str(ndk_config) if ndk_config else None,
        sdk=str(sdk) if sdk else None,
        python=r.get("pytorch.python"),
        abi=r.get("android.abi"),
        api_level=r.get("android.api_level"),
        max_jobs=r.get("android.max_jobs"),
        clean=r.get_flag("build_android.clean"),
        aar=r.get_flag("build_android.aar"),
        vulkan=r.get_flag("build_android.vulkan"),
        java_home=_text(r.path("android.java_home")),
        cmake_args=tuple(cli.get("cmake_arg") or ()),
        git_jobs=r.get("pytorch.git_jobs"),
    )


def check_compat(config: Any, **cli) -> dict:
    """Keyword arguments of ``ndk_build.check_compat`` plus ``strict``."""
    r = _resolver(config, cli, "check_compat")
    build_info = r.path("compat.build_info")
    pytorch_android = r.get("compat.pytorch_android")
    if build_info is None and pytorch_android is None:
        build_info = build_info_path(r)
    return {
        "models": r.path("convert.out"),
        "build_info": build_info,
        "pytorch_android": pytorch_android,
        "source_dir": r.path("compat.source"),
        "strict": r.get_flag("compat.strict"),
    }


def doctor(config: Any, **cli):
    from .doctor import DoctorSettings

    r = _resolver(config, cli, "doctor")
    ndk_config = r.configured("ndk.path")
    sdk = r.get("android.sdk")
    return DoctorSettings(
        lane=r.get("pytorch.lane"),
        ndk=str(r.path("ndk.path")) if r.given("ndk.path") else None,
        ndk_config=str(ndk_config) if ndk_config else None,
        sdk=str(sdk) if sdk else None,
        python=r.get("pytorch.python"),
        adb_host=r.get("deploy.adb_host"),
        adb_port=r.get("deploy.adb_port"),
        servers=tuple(r.get("deploy.servers")),
    )


# --------------------------------------------------------------------------- make-app, build-app


def model_app_out(r: Resolver, model: str) -> Path:
    """Where make-app writes: ``app.out`` as given; left at its default, ``<build_dir>/app`` for the default model
    and ``<build_dir>/app-<model>`` for any other (:mod:`toolchain.layout`), so the apps of several models live side by side (the app `invoke all`
    made is never in the way of `make-app --model fp32-xnnpack`)."""
    given = r.value("app.out")
    r.origins["app.out"] = given.source
    out = Path(given.value)
    if given.source.kind == "default" and model != default("app.model"):
        out = out.with_name(app_dir_name(model))
    return out


def model_app_id(r: Resolver, model: str) -> str:
    """The application id: ``app.application_id`` as given; left at its default, that for the default model and
    ``<default>.<model>`` for any other, so the apps of several models install side by side on one phone (one id
    would make installing one replace the other)."""
    import re

    given = r.value("app.application_id")
    r.origins["app.application_id"] = given.source
    app_id = str(given.value)
    if given.source.kind == "default" and model != default("app.model"):
        from appgen.validate import JAVA_KEYWORDS

        segment = re.sub(r"[^A-Za-z0-9_]", "_", model.strip())
        if not segment[:1].isalpha() or segment in JAVA_KEYWORDS:
            segment = "m_" + segment
        app_id = f"{app_id}.{segment}"
    return app_id


def make_app(config: Any, **cli):
    from appgen import AppSettings

    r = _resolver(config, cli, "make_app")
    model = r.get("app.model")
    return AppSettings(
        model=model,
        models=r.path("app.models") or r.path("convert.out"),
        out=model_app_out(r, model),
        app_name=r.get("app.name"),
        application_id=model_app_id(r, model),
        abi_filters=tuple(r.get("app.abi_filters")),
        min_sdk=r.get("app.min_sdk"),
        target_sdk=r.get("app.target_sdk"),
        lane=r.get("pytorch.lane"),
        pytorch_android=r.get("app.pytorch_android"),
        aar=r.path("app.aar"),
        executorch_android=r.get("app.executorch_android"),
        executorch_aar=r.path("app.executorch_aar"),
        force=r.get_flag("app.force"),
        build_dir=r.path("build_dir"),
    )


def build_app(config: Any, **cli):
    from appgen import BuildAppSettings

    r = _resolver(config, cli, "build_app")
    sdk = r.path("android.sdk")
    return BuildAppSettings(project=r.path("app.out"), build_dir=r.path("build_dir"),
                            timeout=float(r.get("app.gradle_timeout")), sdk=str(sdk) if sdk else None)


# --------------------------------------------------------------------------- deploy, report


def bench_options(r: Resolver):
    from deploy import BenchOptions

    threads = r.get("deploy.threads")
    return BenchOptions(
        warmup=r.get("deploy.warmup"),
        iters=r.get("deploy.iter"),
        repeat=r.get("deploy.repeat"),
        threads=threads if threads > 0 else None,
        caching_allocator=r.get_flag("deploy.caching_allocator"),
        timeout=float(r.get("deploy.bench_timeout")),
        gatord=r.path("deploy.gatord") is not None,
        bundled_input=r.get("deploy.bundled_input"),
        cooldown=float(r.get("deploy.cooldown")),
    )


def deploy(config: Any, **cli):
    """``cli["task"]``: deploy or deploy-executorch, for the command the remedies name."""
    from deploy import DeploySettings

    r = _resolver(config, cli, "deploy")
    formats = _formats(r, "deploy")
    task = cli.get("task") or "deploy"
    return DeploySettings(
        models=r.path("convert.out"),
        results=r.path("deploy.results"),
        build_info=r.path("deploy.build_info") or build_info_path(r),
        binary=r.path("deploy.binary"),
        app_dir=r.path("deploy.app_dir") or r.path("app.out"),
        apk=r.path("deploy.apk"),
        variants=tuple(r.get("deploy.variants")),
        serials=tuple(r.get("deploy.serials")),
        adb_host=r.get("deploy.adb_host"),
        adb_port=r.get("deploy.adb_port"),
        servers=tuple(r.get("deploy.servers")),
        servers_from="--adb-server" if r.given("deploy.servers") else "deploy.servers",
        device_dir=r.get("deploy.device_dir"),
        project=r.get("deploy.project") or Path.cwd().name,
        bench=r.get_flag("deploy.bench"),
        app_bench=r.get_flag("deploy.app_bench"),
        install=r.get_flag("deploy.install"),
        numerics=r.get_flag("deploy.numerics"),
        hardware=r.get_flag("deploy.hardware"),
        options=bench_options(r),
        allow_mismatch=r.get_flag("deploy.allow_mismatch"),
        fail_on_numerics=r.get_flag("deploy.fail_on_numerics"),
        gatord=r.path("deploy.gatord"),
        timeout=float(r.get("deploy.timeout")),
        app_wait=float(r.get("deploy.app_wait")),
        formats=formats,
        rerun=("invoke", task) + (("--format", ",".join(formats))
                                  if task == "deploy" and formats != tuple(default("deploy.format")) else ()),
        runner_build_info=(r.path("deploy.runner_build_info")
                           or Layout(r.path("build_dir")).executorch_build_info(r.get("android.abi"))),
        stf=_farm(r),
    )


def _farm(r: Resolver):
    """The farm of ``--stf`` / deploy.stf.url (None: the adb servers' devices); its other values are checked
    without one too (a bad value is said wherever it is)."""
    from deploy.stf import FarmSettings

    url = r.get("deploy.stf.url")
    count, lend = r.get("deploy.stf.count"), float(r.get("deploy.stf.lend"))
    if r.given("deploy.stf.count") and not url:
        raise UsageError("--stf-count takes phones from a device farm, and no farm is given",
                         remedy="add --stf URL (or deploy.stf.url), or leave --stf-count out")
    return FarmSettings(str(url), count, lend) if url else None


def report(config: Any, **cli):
    from deploy.report import ReportSettings

    r = _resolver(config, cli, "report")
    return ReportSettings(
        results=r.path("deploy.results"),
        run_id=r.get("report.run"),
        out=r.path("report.out"),
        source=r.get("deploy.report_source"),
    )
