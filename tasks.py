"""torchdroid's Invoke tasks: a table of contents.

Each task declares its options (their types, ranges, defaults and help live once in
``toolchain/settings.py``), builds its settings with one call to ``workflow/stage_settings.py``,
calls one package function and prints the result (``workflow/show.py``).  Torch is imported only
inside the packages, so ``invoke --list`` is instant.
"""

from __future__ import annotations

import signal

from invoke import Collection, Exit

from workflow import invoke_hooks
from toolchain.layout import Layout
from toolchain.settings import config_defaults, key
from workflow import show, stage_settings as resolve
from workflow.plan import STAGES
from workflow.run import stage, terminable
from workflow.task_options import helps, task

invoke_hooks.install()  # config files and INVOKE_* values are checked by the schema, not by Invoke


# --------------------------------------------------------------------------- convert, bench, verify


@task(help=helps(model="convert.model", quant="convert.quant", weights="convert.weights",
                 calibration="convert.calibration", quantized_weights="convert.quantized_weights",
                 out="convert.out", force="convert.force",
                 format="convert.format", delegates="convert.executorch_delegates",
                 no_verify="skip the host NNAPI check of the NNAPI models afterwards (config verify.after_convert)"),
      iterable=["quant", "format", "delegates"])
def convert(c, model=None, quant=None, weights=None, calibration=None, quantized_weights=None, out=None, force=False,
            no_verify=False, format=None, delegates=None, json=False, debug=False):
    """MobileNetV2 (or another model) -> CPU and NNAPI TorchScript models per quantization mode, with a manifest."""
    common = dict(model=model, weights=weights, calibration=calibration, out=out, force=force)
    result = None
    with stage(c.config, "convert", debug):
        from converter import convert as run_convert
        from converter.executorch_lane import convert_executorch

        formats = resolve.formats(c.config, format=format)
        pte_settings = resolve.executorch_convert(c.config, delegates=delegates, formats=formats, **common)
        if "torchscript" in formats:
            result = run_convert(resolve.convert(c.config, quant=quant, quantized_weights=quantized_weights,
                                                 **common))
        pte = convert_executorch(pte_settings) if "executorch" in formats else None
    show.converted(result, pte, json)  # --json with both formats: one document {"torchscript": ..., "executorch": ...}
    if result is not None and not no_verify:
        from workflow.stage_flows import verify_after_convert

        with show.quiet_stdout(json):  # the JSON on stdout stays one document
            verify_after_convert(c.config, result.manifest_path.parent,
                                 sorted({f.qualified_variant for f in result.files if f.backend == "nnapi"}), debug)
    return result  # `invoke all` reads whether it was reused


@task(help=helps(host="run the models on this machine (the only place `bench` runs; phones: `invoke deploy`)",
                 models="convert.out", warmup="bench.warmup", iter="bench.iter", threads="bench.threads",
                 repeat="bench.repeat", out="bench.out", format="bench.format"),
      iterable=["format"])
def bench(c, host=True, models=None, warmup=None, iter=None, threads=None, repeat=None, out=None, format=None,
          json=False, debug=False):
    """Benchmark converted models on the host with speed_benchmark_torch's protocol (--format executorch: the .pte
    programs too, as `invoke bench-executorch`)."""
    if not host:
        raise Exit("torchdroid bench: only --host is done here; on phones use `invoke deploy`", code=2)
    options = dict(models=models, warmup=warmup, iter=iter, threads=threads, repeat=repeat, out=out)
    result = pte = None
    with stage(c.config, "bench", debug):
        formats = resolve.formats(c.config, "bench", format=format)  # every format's settings before any work:
        host_settings = resolve.host_bench(c.config, **options) if "torchscript" in formats else None
        pte_settings = resolve.pte_bench(c.config, **options) if "executorch" in formats else None
        if host_settings is not None:
            from converter.host_bench import run_host_bench

            result = run_host_bench(host_settings)
        if pte_settings is not None:
            from converter.pte_host import run_pte_bench

            pte = run_pte_bench(pte_settings)
        show.benched(result, pte, json)
        if pte is not None:
            pte.raise_for_failures()  # after the tables: exit 8 naming the programs that differ


@task(help=helps(models="convert.out", variant="verify.variants", rounding="verify.rounding",
                 random_inputs="verify.random_inputs", layerwise="verify.layerwise", api_level="android.api_level",
                 out="verify.out"),
      iterable=["variant"])
def verify(c, models=None, variant=None, rounding=None, random_inputs=None, layerwise=None, api_level=None, out=None,
           json=False, debug=False):
    """Run each NNAPI model on the host NNAPI and its CPU model on the same inputs; compare and check statically."""
    with stage(c.config, "verify", debug):
        from host_nnapi.verify import verify as run_verify

        result = run_verify(resolve.verify(c.config, models=models, variant=variant, rounding=rounding,
                                           random_inputs=random_inputs, layerwise=layerwise, api_level=api_level,
                                           out=out))
    show.verify(result, json)


@task(help=helps(models="convert.out", warmup="bench.warmup", iter="bench.iter", threads="bench.threads",
                 out="bench.out", no_legacy="time only the .pte programs, not the legacy TorchScript CPU and host NNAPI models",
                 no_per_operator="skip the per-operator comparison (ETDump + ETRecord through ExecuTorch's Inspector)",
                 reference_kernels="bench.reference_kernels", again="bench.again"))
def bench_executorch(c, models=None, warmup=None, iter=None, threads=None, out=None, no_legacy=False,
                     no_per_operator=False, reference_kernels=None, again=False, json=False, debug=False):
    """`invoke bench --format executorch`: check each .pte against its reference in ExecuTorch's host runtime and
    time it beside the legacy models."""
    with stage(c.config, "bench-executorch", debug):
        from converter.pte_host import run_pte_bench

        result = run_pte_bench(resolve.pte_bench(c.config, models=models, warmup=warmup, iter=iter, threads=threads,
                                                 out=out, no_legacy=no_legacy, no_per_operator=no_per_operator,
                                                 reference_kernels=reference_kernels, again=again))
        show.pte_bench(result, json)
        result.raise_for_failures()


def _build_executorch(c, debug=False, as_json=False, **cli):
    with stage(c.config, "build-android", debug) as log_path:
        from ndk_build.executorch_runtime import build_runtime

        result = build_runtime(resolve.executorch_runtime(c.config, **cli), log_path)
    show.executorch_runtime(result, log_path, as_json)
    return result


@task(help=helps(models="convert.out", build_info="deploy.runner_build_info",
                 serial="deploy.serials", warmup="deploy.warmup", iter="deploy.iter", repeat="deploy.repeat",
                 project="deploy.project", adb_server="deploy.servers"),
      iterable=["serial", "adb_server"])
def deploy_executorch(c, models=None, build_info=None, serial=None, warmup=None, iter=None, repeat=None, project=None,
                      adb_server=None, json=False, debug=False):
    """`invoke deploy --format executorch`: executor_runner and the .pte programs on every phone, beside TorchScript."""
    cli = {k: v for k, v in locals().items() if k not in ("c", "debug", "build_info", "json")}
    _deploy(c, "deploy-executorch", debug, json, format=["executorch"], runner_build_info=build_info, **cli)


# --------------------------------------------------------------------------- build-android, check-compat, doctor


@task(help=helps(lane="a pin set of toolchain/pins.py (config pytorch.lane), or executorch: ExecuTorch's "
                 "executor_runner at the pinned release (command line only)", commit="pytorch.commit", repo_url="pytorch.repo_url", ndk="ndk.path",
                 abi="android.abi", api_level="android.api_level", python="pytorch.python",
                 max_jobs="android.max_jobs", clean="build_android.clean", aar="build_android.aar",
                 cmake_arg="build_android.cmake_args", vulkan="build_android.vulkan", java_home="android.java_home",
                 event_tracer="android.executorch_event_tracer",
                 no_event_tracer="--lane executorch: a runner without ExecuTorch's event tracer (no per-operator times)"),
      iterable=["cmake_arg"])
def build_android(c, lane=None, commit=None, repo_url=None, ndk=None, abi=None, api_level=None, python=None,
                  max_jobs=None, clean=False, aar=False, cmake_arg=None, vulkan=False, java_home=None,
                  event_tracer=False, no_event_tracer=False, json=False, debug=False):
    """PyTorch Mobile (speed_benchmark_torch, static libraries, headers) from a lane's pinned commit, with the NDK."""
    if lane == "executorch":  # ExecuTorch's runtime and executor_runner (docs/executorch.md); command line only
        return _build_executorch(c, ndk=ndk, abi=abi, api_level=api_level, max_jobs=max_jobs, python=python, debug=debug,
                                 as_json=json,
                                 event_tracer=event_tracer, no_event_tracer=no_event_tracer,
                                 not_taken={"commit": commit, "repo_url": repo_url, "clean": clean, "aar": aar,
                                            "cmake_arg": cmake_arg, "vulkan": vulkan, "java_home": java_home})
    with stage(c.config, "build-android", debug):
        from ndk_build import build_android as run_build

        result = run_build(resolve.build_android(c.config, lane=lane, commit=commit, repo_url=repo_url, ndk=ndk,
                                                 abi=abi, api_level=api_level, python=python, max_jobs=max_jobs,
                                                 clean=clean, aar=aar, cmake_arg=cmake_arg, vulkan=vulkan,
                                                 java_home=java_home))
    show.build_android(result, json)
    return result


@task(help=helps(models="convert.out", build_info="compat.build_info", pytorch_android="compat.pytorch_android",
                 source="compat.source", abi="android.abi", strict="compat.strict"))
def check_compat(c, models=None, build_info=None, pytorch_android=None, source=None, abi=None, strict=False,
                 json=False, debug=False):
    """Can the Android runtime run the converted models? (same commit, operators, NNAPI methods, file format)"""
    with stage(c.config, "check-compat", debug):
        from ndk_build import check_compat as run_check

        args = resolve.check_compat(c.config, models=models, build_info=build_info, pytorch_android=pytorch_android,
                                    source=source, abi=abi, strict=strict)
        strict_unknown = args.pop("strict")
        report = run_check(args.pop("models"), **args)
        show.compat(report, json)
        report.raise_for_status(strict_unknown=strict_unknown)


@task(help=helps(strict="doctor.strict", lane="pytorch.lane", ndk="ndk.path", adb_server="deploy.servers"),
      iterable=["adb_server"])
def doctor(c, strict=False, lane=None, ndk=None, adb_server=None, json=False, debug=False):
    """What this machine has for every stage, what is missing, and how to get it."""
    with stage(c.config, "doctor", debug):
        from workflow.doctor import problems, run_doctor

        checks = run_doctor(resolve.doctor(c.config, lane=lane, ndk=ndk, adb_server=adb_server))
    show.doctor(checks, json)
    bad = problems(checks)
    if bad and strict:
        raise Exit(f"torchdroid doctor: {len(bad)} problem(s): " + ", ".join(ch.name for ch in bad), code=1)


# --------------------------------------------------------------------------- make-app, build-app


@task(help=helps(model="app.model", models="app.models", out="app.out", app_name="app.name",
                 application_id="app.application_id", abi_filters="app.abi_filters", min_sdk="app.min_sdk",
                 target_sdk="app.target_sdk", lane="pytorch.lane", pytorch_android="app.pytorch_android",
                 aar="app.aar", executorch_android="app.executorch_android", executorch_aar="app.executorch_aar",
                 force="app.force"),
      iterable=["abi_filters"])
def make_app(c, model=None, models=None, out=None, app_name=None, application_id=None, abi_filters=None,
             min_sdk=None, target_sdk=None, lane=None, pytorch_android=None, aar=None, executorch_android=None,
             executorch_aar=None, force=False, debug=False):
    """A Gradle Android app (CameraX + NNAPI with CPU fallback + in-app benchmark) around one converted variant
    (or an ExecuTorch program, on ExecuTorch's Java API)."""
    with stage(c.config, "make-app", debug):
        from workflow.stage_flows import make_app as run_make_app

        result, compat = run_make_app(c.config, resolve.make_app(
            c.config, model=model, models=models, out=out, app_name=app_name, application_id=application_id,
            abi_filters=abi_filters, min_sdk=min_sdk, target_sdk=target_sdk, lane=lane,
            pytorch_android=pytorch_android, aar=aar, executorch_android=executorch_android,
            executorch_aar=executorch_aar, force=force))
    show.make_app(result, compat)
    return result


@task(help=helps(out=f"the Gradle project `invoke make-app` wrote (config app.out, default {key('app.out').default})"))
def build_app(c, out=None, debug=False):
    """./gradlew assembleDebug in the generated project (needs an Android SDK and the wrapper jar)."""
    with stage(c.config, "build-app", debug):
        from appgen import build_app as run_build_app

        result = run_build_app(resolve.build_app(c.config, out=out))
    show.build_app(result)


# --------------------------------------------------------------------------- deploy, report


@task(help=helps(serial="deploy.serials", models="convert.out", variant="deploy.variants", binary="deploy.binary",
                 build_info="deploy.build_info", apk="deploy.apk", app="deploy.app_dir",
                 bench="run the benchmarks (config deploy.bench, default on)",
                 no_bench="only push and install, run no benchmark",
                 app_bench="run the in-app benchmark via its intent and logcat (config deploy.app_bench, default on)",
                 no_app_bench="do not run the in-app benchmark",
                 install="install the APK (config deploy.install, default on)",
                 no_install="skip the app entirely",
                 numerics="check each model's output on the phone against the host's (config deploy.numerics, "
                          "default on)", no_numerics="do not check the phones' outputs",
                 hardware="find which hardware NNAPI chose per operation, from its log (config deploy.hardware, "
                          "default on)", no_hardware="do not read NNAPI's placement log", warmup="deploy.warmup", iter="deploy.iter",
                 repeat="deploy.repeat", cooldown="deploy.cooldown", threads="deploy.threads", caching_allocator="deploy.caching_allocator",
                 no_caching_allocator="do not pass --use_caching_allocator", bundled_input="deploy.bundled_input",
                 allow_mismatch="deploy.allow_mismatch", no_allow_mismatch="refuse a torch commit mismatch",
                 profile_with_gatord="deploy.gatord", device_dir="deploy.device_dir", project="deploy.project",
                 results="deploy.results", adb_host="deploy.adb_host", adb_port="deploy.adb_port",
                 adb_server="deploy.servers", format="deploy.format", runner_build_info="deploy.runner_build_info"),
      iterable=["serial", "variant", "adb_server", "format"])
def deploy(c, serial=None, models=None, variant=None, binary=None, build_info=None, apk=None, app=None,
           bench=False, no_bench=False, app_bench=False, no_app_bench=False, install=False, no_install=False,
           numerics=False, no_numerics=False, hardware=False, no_hardware=False, warmup=None, iter=None, repeat=None, cooldown=None, threads=None, caching_allocator=False,
           no_caching_allocator=False,
           bundled_input=None, allow_mismatch=False, no_allow_mismatch=False, profile_with_gatord=None,
           device_dir=None, project=None, results=None, adb_host=None, adb_port=None, adb_server=None, format=None,
           runner_build_info=None, json=False, debug=False):
    """Push the benchmark binary and models (and/or ExecuTorch's runner and programs: --format), install the app,
    benchmark on every device, record and report."""
    cli = {k: v for k, v in locals().items() if k not in ("c", "debug", "json")}
    _deploy(c, "deploy", debug, json, **cli)


def _deploy(c, name: str, debug: bool, as_json: bool = False, **cli) -> None:
    """deploy's one loop with the formats asked for (deploy.format); each format's tables and record."""
    with stage(c.config, name, debug):
        from deploy import deploy as run_deploy
        from deploy.plan import check_values
        from workflow.stage_flows import deploy_compat, host_references

        settings = resolve.deploy(c.config, task=name, **cli)
        check_values(settings)  # every value before any record is read
        if "torchscript" in settings.formats:
            deploy_compat(settings)  # before anything is pushed
            host_references(settings)  # what the phones' outputs are compared with
        result = run_deploy(settings)
    show.deployed(result, "torchscript" in settings.formats, as_json)
    problem = None
    if "torchscript" in settings.formats:
        failed_rows = [r for r in result.rows if r.status == "failed"]
        if result.failed:
            problem = (f"{len(result.failed)} of {len(result.devices)} device(s) had problems (see above; the others "
                       "were deployed)")
        elif failed_rows:
            problem = f"{len(failed_rows)} benchmark(s) failed (reasons in the table above; the results are recorded)"
    if result.executorch is not None:
        if result.executorch.problems and problem is None:
            problem = f"{len(result.executorch.problems)} problem(s), see above"
    if problem:
        raise Exit(f"torchdroid {name}: {problem}", code=7)


@task(help=helps(run="report.run", results="deploy.results", out="report.out", source="deploy.report_source"))
def report(c, run=None, results=None, out=None, source=None, json=False, debug=False):
    """Draw latency and CPU-vs-NNAPI speed-up per device and mode (PNG), and export the run as CSV/JSON."""
    with stage(c.config, "report", debug):
        from deploy.report import make_report

        result = make_report(resolve.report(c.config, run=run, results=results, out=out, source=source))
    show.report(result, json)


# --------------------------------------------------------------------------- all, clean


@task(name="all", help=helps(weights="all.weights", model="app.model",
                             skip="stages to leave out (repeat or comma-separate): " + ", ".join(STAGES),
                             replace_app="all.replace_app"),
      iterable=["skip"])
def all_(c, weights=None, model=None, skip=None, replace_app=False, json=False, debug=False):
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
            "make-app": lambda f: make_app(c, model=plan.variant, out=str(plan.app_dir), application_id=plan.app_id,
                                           force=plan.replace_app, debug=debug),
            "build-app": lambda f: build_app(c, debug=debug),
            "bench": lambda f: bench(c, debug=debug),
            "build-android": lambda f: build_android(c, debug=debug),
            "check-compat": lambda f: check_compat(c, debug=debug),
            "deploy": lambda f: deploy(c, debug=debug),  # binary only, APK only or both: deploy decides
            "report": lambda f: report(c, debug=debug),
        }
        with show.quiet_stdout(json), adb_server_for_run(plan.adb_host, plan.adb_port, show.note,
                                                                 plan.adb_servers):
            chain.announce_weights(plan)
            with stage(c.config, "all", debug, log=all_log):  # the same run log, not a second one
                facts = chain.machine_facts(c.config)
            chain.run_chain(plan, facts, runs, summary)  # with --json the stages' own output goes to stderr
        machine = {k: list(getattr(facts, k)) for k in ("host_nnapi", "ndk", "sdk", "devices")}
        path = summary.write(Layout(plan.build_dir).all_summary, machine)
        show.all_summary(summary, path, plan.substituted, json)
        if summary.outcomes and summary.outcomes[-1].status == INTERRUPTED:
            raise Exit(f"torchdroid all: terminated by {signal.Signals(term.signum).name}" if term.signum
                       else "torchdroid all: interrupted", code=128 + term.signum if term.signum else 130)
    if summary.failed:
        raise Exit(f"torchdroid all: failed: {', '.join(summary.failed)}", code=1)


@task(help=helps(what="clean.what", older_than="days: logs older than this are removed (config clean.log_days)",
                 dry_run="clean.dry_run"),
      iterable=["what"])
def clean(c, what=None, older_than=None, dry_run=False, debug=False):
    """Remove build outputs, PyTorch checkouts and old logs, only inside the build directory; -n lists only."""
    from toolchain.resolve import Resolver
    from workflow import clean as cleaning

    preview = bool(dry_run) or bool(c.config.get("run", {}).get("dry"))  # `invoke --dry clean` previews too
    with stage(c.config, "clean", debug, allow_dry=True, frees_space=True):
        r = Resolver(c.config, {"what": what, "older_than": older_than})
        plan = cleaning.plan_clean(r.path("build_dir"), r.get("clean.what", "what"), r.get("clean.log_days",
                                                                                          "older_than"))
        for path, size in plan.targets:
            print(f"{'would remove' if preview else 'removing'} {path} ({size / 1e6:.1f} MB)")
        if not preview:
            cleaning.execute(plan)
    verb = "would free" if preview else "freed"
    print(f"{verb} {plan.bytes / 1e6:.1f} MB in {len(plan.targets)} item(s) under {plan.build_dir}"
          if plan.targets else f"nothing to clean under {plan.build_dir} ({', '.join(r.get('clean.what', 'what'))})")


ns = Collection(all_, convert, bench, bench_executorch, deploy_executorch, build_android, check_compat, doctor, make_app, build_app, deploy, report, verify,
                clean)
ns.configure(config_defaults())
