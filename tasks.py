"""torchdroid's Invoke tasks: a table of contents.

Each task declares its options (their types, ranges, defaults and help live once in
``toolchain/settings.py``), builds its settings with one call to ``workflow/stage_settings.py``,
calls one package function and prints the result (``workflow/show.py``).  Torch is imported only
inside the packages, so ``invoke --list`` is instant.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from invoke import Collection, Exit

# torchdroid is not installed (./run installs its dependencies only): its packages are the ones beside this file,
# also when the tasks.py Invoke found is a link to it (Invoke puts the link's directory on sys.path)
sys.path.insert(0, str(Path(__file__).resolve().parent))

from workflow import invoke_hooks  # noqa: E402 - after the path above
from toolchain.console import quiet_stdout
from toolchain.layout import Layout
from toolchain.settings import config_defaults, key
from workflow import show, stage_settings as resolve
from workflow.plan import STAGES
from workflow.run import stage, stopped, terminable
from workflow.task_options import DEBUG, JSON, declared, flag, opt, shorthand, task

invoke_hooks.start(Path(__file__).parent)  # the config files Invoke reads next, checked before it reads them
EXECUTORCH, TORCHSCRIPT = ("executorch",), ("torchscript",)  # options for one format only (workflow/task_options.py)


# --------------------------------------------------------------------------- convert, bench, verify


@task()
def convert(c, model=opt("convert.model"), quant=opt("convert.quant"), weights=opt("convert.weights"),
            calibration=opt("convert.calibration"),
            quantized_weights=opt("convert.quantized_weights", formats=TORCHSCRIPT),
            out=opt("convert.out"), force=opt("convert.force"), inputs=opt("convert.inputs"),
            no_verify=flag("skip the host NNAPI check of the NNAPI models afterwards (config verify.after_convert)"),
            format=opt("convert.format"), delegates=opt("convert.executorch_delegates", formats=EXECUTORCH), json=JSON,
            debug=DEBUG):
    """MobileNetV2 (or another model) -> CPU and NNAPI models per quantization mode.

    TorchScript models with a manifest (--format executorch: .pte programs too)."""
    with terminable("convert"):  # a signal between convert and its verify: the same clean end as within them
        with stage(c.config, "convert", debug, as_json=json) as log_path:
            from converter.formats import convert_each

            settings = resolve.per_format(c.config, "convert", format=format, delegates=delegates, quant=quant,
                                          quantized_weights=quantized_weights, model=model, weights=weights,
                                          calibration=calibration, out=out, force=force, inputs=inputs)
            results, partly = convert_each(settings)  # each format on its own; exit 10 after the tables
        show.by_format(results, "convert", json)  # --json with both formats: one document {"torchscript": ..., ...}
        if not no_verify:
            from workflow.stage_flows import after_convert

            with quiet_stdout(json):  # the JSON on stdout stays one document
                after_convert(c.config, results, debug)  # each format's own checks (workflow/stage_flows.py)
        if partly is not None:  # exit 10: some programs asked for were refused (docs/convert.md)
            with stage(c.config, "convert", debug, log=log_path):
                raise partly
    return results.get("torchscript")  # `invoke all` reads whether the TorchScript models were reused


@task()
def bench(c, host=flag("run the models on this machine (where `bench` always runs; phones: `invoke deploy`)"),
          models=opt("convert.out"), warmup=opt("bench.warmup"), iter=opt("bench.iter"), threads=opt("bench.threads"),
          repeat=opt("bench.repeat"), out=opt("bench.out"), format=opt("bench.format"),
          no_legacy=flag("time only the .pte programs, not the legacy TorchScript CPU and host NNAPI models",
                         EXECUTORCH),
          no_per_operator=flag("skip the per-operator comparison (ETDump + ETRecord through ExecuTorch's Inspector)",
                               EXECUTORCH),
          reference_kernels=opt("bench.reference_kernels", formats=EXECUTORCH),
          again=opt("bench.again", formats=EXECUTORCH), json=JSON, debug=DEBUG):
    """Benchmark the converted models on this machine (speed_benchmark_torch's protocol).

    --format executorch: each .pte program checked against its reference and timed beside the legacy models."""
    _bench(c, "bench", **{k: v for k, v in locals().items() if k not in ("c", "host")})


def _bench(c, name: str, debug: bool = False, json: bool = False, **cli) -> None:
    """bench's one loop over the formats asked for (bench.format): every format's settings before any work, then each
    format checks and times its files; its failures (exit 8) after every table."""
    with stage(c.config, name, debug, as_json=json):
        from converter.formats import FORMATS, bench_all

        settings = resolve.per_format(c.config, "bench", **cli)
        results = bench_all(settings)
        show.by_format(results, "bench", json)
        for fmt, result in results.items():
            FORMATS[fmt].raise_for_failures(result)


@task()
def verify(c, models=opt("convert.out"), variant=opt("verify.variants"), rounding=opt("verify.rounding"),
           random_inputs=opt("verify.random_inputs"), layerwise=opt("verify.layerwise"),
           api_level=opt("android.api_level"), out=opt("verify.out"), json=JSON, debug=DEBUG):
    """Run each NNAPI model on the host NNAPI and its CPU model on the same inputs; compare and check statically."""
    with stage(c.config, "verify", debug, as_json=json):
        from host_nnapi.verify import verify as run_verify

        result = run_verify(resolve.verify(c.config, models=models, variant=variant, rounding=rounding,
                                           random_inputs=random_inputs, layerwise=layerwise, api_level=api_level,
                                           out=out))
    show.verify(result, json)


def _build_executorch(c, debug=False, as_json=False, **cli):
    with stage(c.config, "build-android", debug, as_json=as_json) as log_path:
        from ndk_build.executorch_runtime import build_runtime

        result = build_runtime(resolve.executorch_runtime(c.config, **cli), log_path)
    show.executorch_runtime(result, log_path, as_json)
    return result


# --------------------------------------------------------------------------- build-android, check-compat, doctor


@task()
def build_android(c, lane=opt("pytorch.lane", "a pin set of toolchain/pins.py (config pytorch.lane), or executorch: "
                              "ExecuTorch's executor_runner at the pinned release (command line only)",
                              metavar="LANE|executorch"),
                  commit=opt("pytorch.commit"), repo_url=opt("pytorch.repo_url"), ndk=opt("ndk.path"),
                  abi=opt("android.abi"), api_level=opt("android.api_level"), python=opt("pytorch.python"),
                  max_jobs=opt("android.max_jobs"), clean=opt("build_android.clean"), aar=opt("build_android.aar"),
                  cmake_arg=opt("build_android.cmake_args"), vulkan=opt("build_android.vulkan"),
                  java_home=opt("android.java_home"), event_tracer=opt("android.executorch_event_tracer"),
                  no_event_tracer=flag("--lane executorch: only the untraced runner, not executor_runner_traced "
                                       "(no per-operator times)"), json=JSON, debug=DEBUG):
    """PyTorch Mobile (speed_benchmark_torch, static libraries, headers) from a lane's pinned commit, with the NDK."""
    if lane == "executorch":  # ExecuTorch's runtime and executor_runner (docs/executorch.md); command line only
        return _build_executorch(c, ndk=ndk, abi=abi, api_level=api_level, max_jobs=max_jobs, python=python, debug=debug,
                                 as_json=json,
                                 event_tracer=event_tracer, no_event_tracer=no_event_tracer,
                                 not_taken={"commit": commit, "repo_url": repo_url, "clean": clean, "aar": aar,
                                            "cmake_arg": cmake_arg, "vulkan": vulkan, "java_home": java_home})
    with stage(c.config, "build-android", debug, as_json=json):
        from ndk_build import build_android as run_build

        result = run_build(resolve.build_android(c.config, lane=lane, commit=commit, repo_url=repo_url, ndk=ndk,
                                                 abi=abi, api_level=api_level, python=python, max_jobs=max_jobs,
                                                 clean=clean, aar=aar, cmake_arg=cmake_arg, vulkan=vulkan,
                                                 java_home=java_home))
    show.build_android(result, json)
    return result


@task()
def check_compat(c, models=opt("convert.out"), build_info=opt("compat.build_info"),
                 pytorch_android=opt("compat.pytorch_android"), source=opt("compat.source"), abi=opt("android.abi"),
                 strict=opt("compat.strict"), json=JSON, debug=DEBUG):
    """Can the Android runtime run the converted models? (same commit, operators, NNAPI methods, file format)"""
    with stage(c.config, "check-compat", debug, as_json=json):
        from ndk_build import check_compat as run_check

        args = resolve.check_compat(c.config, models=models, build_info=build_info, pytorch_android=pytorch_android,
                                    source=source, abi=abi, strict=strict)
        strict_unknown = args.pop("strict")
        report = run_check(args.pop("models"), **args)
        show.compat(report, json)
        report.raise_for_status(strict_unknown=strict_unknown)


@task()
def doctor(c, strict=opt("doctor.strict"), lane=opt("pytorch.lane"), ndk=opt("ndk.path"),
           adb_server=opt("deploy.servers"), json=JSON, debug=DEBUG):
    """What this machine has for every stage, what is missing, and how to get it."""
    with stage(c.config, "doctor", debug, as_json=json):
        from workflow.doctor import problems, run_doctor

        checks = run_doctor(resolve.doctor(c.config, lane=lane, ndk=ndk, adb_server=adb_server))
    show.doctor(checks, json)
    bad = problems(checks)
    if bad and strict:
        raise Exit(f"torchdroid doctor: {len(bad)} problem(s): " + ", ".join(ch.name for ch in bad), code=1)


# --------------------------------------------------------------------------- make-app, build-app


@task()
def make_app(c, model=opt("app.model"), models=opt("app.models"), out=opt("app.out"), app_name=opt("app.name"),
             application_id=opt("app.application_id"), abi_filters=opt("app.abi_filters"), min_sdk=opt("app.min_sdk"),
             target_sdk=opt("app.target_sdk"), lane=opt("pytorch.lane"), pytorch_android=opt("app.pytorch_android"),
             aar=opt("app.aar"), executorch_android=opt("app.executorch_android"),
             executorch_aar=opt("app.executorch_aar"), force=opt("app.force"), debug=DEBUG):
    """A Gradle Android app (camera, NNAPI or CPU, in-app benchmark) around one converted model.

    The model is a converted variant, or an ExecuTorch program (on ExecuTorch's Java API)."""
    with stage(c.config, "make-app", debug):
        from workflow.stage_flows import make_app as run_make_app

        result, compat = run_make_app(c.config, resolve.make_app(
            c.config, model=model, models=models, out=out, app_name=app_name, application_id=application_id,
            abi_filters=abi_filters, min_sdk=min_sdk, target_sdk=target_sdk, lane=lane,
            pytorch_android=pytorch_android, aar=aar, executorch_android=executorch_android,
            executorch_aar=executorch_aar, force=force))
    show.make_app(result, compat)
    return result


@task()
def build_app(c, out=opt("app.out", f"the Gradle project `invoke make-app` wrote (config app.out, default "
                                   f"{key('app.out').default})"), debug=DEBUG):
    """./gradlew assembleDebug in the generated project (needs an Android SDK and the wrapper jar)."""
    with stage(c.config, "build-app", debug):
        from appgen import build_app as run_build_app

        result = run_build_app(resolve.build_app(c.config, out=out))
    show.build_app(result)


# --------------------------------------------------------------------------- deploy, report


@task()
def deploy(c, serial=opt("deploy.serials"), models=opt("convert.out"), variant=opt("deploy.variants"),
           binary=opt("deploy.binary"), build_info=opt("deploy.build_info"), apk=opt("deploy.apk"),
           app=opt("deploy.app_dir"), bench=opt("deploy.bench"), no_bench=flag("only push and install, run no benchmark"),
           app_bench=opt("deploy.app_bench"), no_app_bench=flag("do not run the in-app benchmark"),
           install=opt("deploy.install"), no_install=flag("skip the app entirely"),
           numerics=opt("deploy.numerics"), no_numerics=flag("do not check the phones' outputs"),
           hardware=opt("deploy.hardware"), no_hardware=flag("do not read NNAPI's placement log"),
           warmup=opt("deploy.warmup"), iter=opt("deploy.iter"), repeat=opt("deploy.repeat"),
           cooldown=opt("deploy.cooldown"), threads=opt("deploy.threads"),
           caching_allocator=opt("deploy.caching_allocator"),
           no_caching_allocator=flag("do not pass --use_caching_allocator"), bundled_input=opt("deploy.bundled_input"),
           allow_mismatch=opt("deploy.allow_mismatch"), no_allow_mismatch=flag("refuse a torch commit mismatch"),
           profile_with_gatord=opt("deploy.gatord"), device_dir=opt("deploy.device_dir"),
           project=opt("deploy.project"), results=opt("deploy.results"), adb_host=opt("deploy.adb_host"),
           adb_port=opt("deploy.adb_port"), adb_server=opt("deploy.servers"), format=opt("deploy.format"),
           runner_build_info=opt("deploy.runner_build_info"), fail_on_numerics=opt("deploy.fail_on_numerics"),
           stf=opt("deploy.stf.url"), stf_count=opt("deploy.stf.count"), json=JSON, debug=DEBUG):
    """Push, install and benchmark on every phone; record and report the results.

    The benchmark binary and models (and/or ExecuTorch's runner and programs: --format) and the app."""
    _deploy(c, "deploy", **{k: v for k, v in locals().items() if k != "c"})


def _deploy(c, name: str, debug: bool = False, json: bool = False, **cli) -> None:
    """deploy's one loop with the formats asked for (deploy.format); each format's tables and record."""
    with stage(c.config, name, debug, as_json=json):
        from deploy import deploy as run_deploy
        from deploy.orchestrate import outcome
        from deploy.plan import check_values
        from workflow.stage_flows import before_deploy

        settings = resolve.deploy(c.config, task=name, **cli)
        check_values(settings)  # every value before any record is read
        before_deploy(settings)  # each format's own steps before anything is pushed (workflow/stage_flows.py)
        result = run_deploy(settings)
    show.deployed(result, settings.formats, json)
    failed = outcome(result, settings.formats)
    if failed:
        raise Exit(f"torchdroid {name}: {failed[0]}", code=failed[1])


# `bench-executorch` and `deploy-executorch`: `bench --format executorch` and `deploy --format executorch`, with the
# options of theirs that mean something for the programs (deploy-executorch --build-info: the runner's build-info)
bench_executorch = shorthand(bench, _bench, "bench-executorch", "executorch", (
    "models", "warmup", "iter", "threads", "repeat", "out", "no_legacy", "no_per_operator", "reference_kernels",
    "again", "json", "debug"), doc="""`invoke bench --format executorch`: check and time each .pte program on this machine.

    Each .pte is checked against its reference in ExecuTorch's host runtime and timed beside the legacy models.""")
deploy_executorch = shorthand(deploy, _deploy, "deploy-executorch", "executorch", (
    "models", "build_info", "serial", "warmup", "iter", "repeat", "project", "adb_server", "stf", "stf_count", "json",
    "debug"), renamed={"build_info": "runner_build_info"},
    doc="`invoke deploy --format executorch`: executor_runner and the .pte programs on every phone.")


@task()
def report(c, run=opt("report.run"), results=opt("deploy.results"), out=opt("report.out"),
           source=opt("deploy.report_source"), json=JSON, debug=DEBUG):
    """Draw latency and CPU-vs-NNAPI speed-up per device and mode (PNG), and export the run as CSV/JSON."""
    with stage(c.config, "report", debug, as_json=json):
        from deploy.report import make_report

        result = make_report(resolve.report(c.config, run=run, results=results, out=out, source=source))
    show.report(result, json)


# --------------------------------------------------------------------------- all, clean


@task(name="all")
def all_(c, weights=opt("all.weights"), model=opt("app.model"),
         skip=opt("all.skip", "stages to leave out (repeat or comma-separate): " + ", ".join(STAGES), "STAGE[,STAGE...]"),
         replace_app=opt("all.replace_app"), json=JSON, debug=DEBUG):
    """Every stage this machine allows: convert, verify, make-app, bench; build-android, build-app, deploy when possible."""
    from workflow import chain
    from workflow.adb_session import adb_server_for_run
    from workflow.plan import INTERRUPTED, AllSummary

    with terminable("all") as term:  # SIGTERM/SIGHUP end the run like Ctrl-C: the adb server it started is stopped
        with stage(c.config, "all", debug) as all_log:
            plan = chain.prepare(c.config, weights=weights, model=model, skip=skip, replace_app=replace_app)
        summary = AllSummary(weights={"requested": weights or "auto", "used": plan.weights, "note": plan.weights_note})
        runs = {
            "convert": lambda f: convert(c, weights=plan.weights, no_verify=True, debug=debug),  # verify is a stage
            "verify": lambda f: verify(c, debug=debug),
            "make-app": lambda f: make_app(c, model=chain.app_variant(plan), out=str(plan.app_dir), application_id=plan.app_id,
                                           force=plan.replace_app, debug=debug),
            "build-app": lambda f: build_app(c, debug=debug),
            "bench": lambda f: bench(c, debug=debug),
            "build-android": lambda f: build_android(c, debug=debug),
            "check-compat": lambda f: check_compat(c, debug=debug),
            "deploy": lambda f: deploy(c, debug=debug),  # binary only, APK only or both: deploy decides
            "report": lambda f: report(c, debug=debug),
        }
        with quiet_stdout(json), adb_server_for_run(plan.adb_host, plan.adb_port, show.note,
                                                                 plan.adb_servers):
            chain.announce_weights(plan)
            with stage(c.config, "all", debug, log=all_log):  # the same run log, not a second one
                facts = chain.machine_facts(c.config)
            chain.run_chain(plan, facts, runs, summary)  # with --json the stages' own output goes to stderr
        machine = {k: list(getattr(facts, k)) for k in ("host_nnapi", "ndk", "sdk", "devices")}
        path = summary.write(Layout(plan.build_dir).all_summary, machine)
        show.all_summary(summary, path, plan.substituted, json)
        if summary.outcomes and summary.outcomes[-1].status == INTERRUPTED:
            raise stopped("all", term.signum or signal.SIGINT, "the summary above says what each stage kept")
    if summary.failed:
        raise Exit(f"torchdroid all: failed: {', '.join(summary.failed)}", code=1)
    if summary.partly:  # convert's exit 10: the later stages ran with what was made (README.md)
        raise Exit(f"torchdroid all: partly converted: {', '.join(summary.partly)} refused some of what was asked "
                   "(the summary says which and why)", code=10)


@task()
def clean(c, what=opt("clean.what"), older_than=opt("clean.log_days", "logs older than this are removed (config "
                                                    "clean.log_days)", "DAYS"),
          dry_run=opt("clean.dry_run"), debug=DEBUG):
    """Remove build outputs, PyTorch checkouts and old logs, only inside the build directory; -n lists only."""
    from toolchain.resolve import Resolver
    from workflow import clean as cleaning

    preview = bool(dry_run) or bool(c.config.get("run", {}).get("dry"))  # `invoke --dry clean` previews too
    with stage(c.config, "clean", debug, allow_dry=True, frees_space=True):
        r = Resolver(c.config, {"what": what, "older_than": older_than}, declared("clean"))
        plan = cleaning.plan_clean(r.path("build_dir"), r.get("clean.what"), r.get("clean.log_days"))
        for path, size in plan.targets:
            print(f"{'would remove' if preview else 'removing'} {path} ({size / 1e6:.1f} MB)")
        for line in plan.kept():
            print(f"{'would keep' if preview else 'keeping'} {line}")
        if not preview:
            cleaning.execute(plan)
    verb = "would free" if preview else "freed"
    print(f"{verb} {plan.bytes / 1e6:.1f} MB in {len(plan.targets)} item(s) under {plan.build_dir}"
          if plan.targets else f"nothing to clean under {plan.build_dir} ({', '.join(r.get('clean.what'))})")


ns = Collection(all_, convert, bench, bench_executorch, deploy_executorch, build_android, check_compat, doctor, make_app, build_app, deploy, report, verify,
                clean)
ns.configure(config_defaults())
