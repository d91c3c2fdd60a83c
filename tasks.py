"""torchdroid's Invoke tasks: wiring only.

Each task resolves CLI > config (invoke.yaml, INVOKE_* variables) > default into
a small frozen settings object, calls one package function and prints the
outcome.  All logic lives in the packages; torch is imported only inside them,
so ``invoke --list`` is instant.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from invoke import Collection, Exit, task

from toolchain.config import DEFAULTS, pick
from toolchain.records import build_info_path
from workflow.plan import STAGES


def _build_dir(c) -> Path:
    return Path(pick(None, c.config, "build_dir", "build"))


def _split(values) -> list:
    """Accept repeated flags and comma lists alike: --quant none,core --quant full (a config string too)."""
    out = []
    for v in [values] if isinstance(values, str) else values or []:
        out.extend(p.strip() for p in str(v).split(",") if p.strip())
    return out


def _listed(value) -> list:
    """A config value that should be a list: a YAML scalar is one item, not a string to split into characters."""
    return [value] if isinstance(value, (str, int, float)) else list(value or [])


@contextlib.contextmanager
def _stage(c, name: str, debug: bool = False):
    """Log to build/logs, turn a TorchdroidError into a clean message and exit code."""
    from toolchain.errors import TorchdroidError
    from toolchain.logs import setup_logging

    debug = bool(debug or pick(None, c.config, "debug", False))
    log_path = setup_logging(_build_dir(c), name, debug)
    try:
        yield log_path
    except TorchdroidError as e:
        if debug:
            raise
        raise Exit(f"torchdroid {name}: {e.label}: {e}\n  (run log: {log_path}; --debug shows the traceback)", code=e.exit_code) from e
    except KeyboardInterrupt:
        raise Exit(f"torchdroid {name}: interrupted (nothing half-written was left under a final name)", code=130) from None


def _table(title: str, columns, rows) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for col in columns:
        t.add_column(col)
    for row in rows:
        t.add_row(*[str(x) for x in row])
    Console(width=140).print(t)


# --------------------------------------------------------------------------- convert


@task(
    help={
        "model": "torchvision model with a quantizable variant (mobilenet_v2, resnet18, ...) or path/to/file.py:factory",
        "quant": "quantization modes: none, core, full (repeat or comma-separate; default all three)",
        "weights": "pretrained | random | PATH to a state_dict (.pth/.pt)",
        "calibration": "directory of images to calibrate quantization with (default: built-in synthetic set)",
        "out": "output directory (default build/models, config convert.out)",
        "force": "rebuild even when the inputs are unchanged",
        "no_verify": "skip the host NNAPI check of the NNAPI models afterwards (config verify.after_convert: off)",
        "format": "torchscript (default), lite, executorch, or a comma list: torchscript,executorch (config convert.format)",
        "delegates": "ExecuTorch delegates: xnnpack, portable, vulkan (default all; config convert.executorch_delegates)",
        "debug": "show tracebacks",
    },
    iterable=["quant", "delegates"],
)
def convert(c, model=None, quant=None, weights=None, calibration=None, out=None, force=False, no_verify=False,
            format=None, delegates=None, debug=False):
    """MobileNetV2 (or another model) -> CPU and NNAPI TorchScript models per quantization mode, with a manifest."""
    with _stage(c, "convert", debug):
        from converter import ConvertSettings, convert as run_convert
        from converter.executorch_lane import LEGACY_FORMATS, ExecutorchSettings, convert_executorch, parse_formats

        formats = parse_formats(pick(format, c.config, "convert.format"))
        common = dict(
            model=pick(model, c.config, "convert.model"),
            weights=str(pick(weights, c.config, "convert.weights")),
            calibration=Path(pick(calibration, c.config, "convert.calibration")) if pick(calibration, c.config, "convert.calibration") else None,
            calibration_count=pick(None, c.config, "convert.calibration_count", 32),  # checked by the converter
            seed=int(pick(None, c.config, "convert.seed", 0)),
            out=Path(pick(out, c.config, "convert.out")),
            force=bool(force),
        )
        legacy = [f for f in formats if f in LEGACY_FORMATS]
        result = pte = None
        if legacy:
            result = run_convert(ConvertSettings(**common, fmt=legacy[0], build_dir=_build_dir(c),
                                                 modes=tuple(_split(quant) if quant else _split(_listed(pick(None, c.config, "convert.quant"))))))
        if "executorch" in formats:
            pte = convert_executorch(ExecutorchSettings(
                **common, delegates=tuple(_split(delegates) or _split(_listed(pick(None, c.config, "convert.executorch_delegates"))))))
    if result:
        _print_convert(result)
    if pte:
        _print_pte(pte)
    if result and not no_verify:
        verify_after_convert(c, result.manifest_path.parent, sorted({f.mode for f in result.files}), debug)


def _print_pte(result) -> None:
    _table(f"ExecuTorch programs in {result.manifest_path.parent} ({'built ' + ', '.join(result.built) if result.built else 'reused'})",
           ["file", "delegate", "precision", "size", "host check"],
           [(f.file, f.delegate, f.precision, f"{f.size / 1e6:.1f} MB", _pte_check(f)) for f in result.files])
    for name, reason in sorted(result.skipped.items()):
        print(f"skipped delegate {name}: {reason}")
    for line in result.notes:
        print(f"note: {line}")
    print(f"manifest: {result.manifest_path}")


def _pte_check(f) -> str:
    check = f.extra.get("host_check") or {}
    return f"max |diff| {check['max_abs_diff']:.2e}" if check.get("ran") else f"not run: {check.get('reason', '?')}"


def _print_convert(result) -> None:
    rows = []
    for f in result.files:
        q = f"{f.input.scale:.5f}/{f.input.zero_point}" if f.input.scale is not None else "-"
        rows.append((f.file, f.backend, f.mode, "x".join(map(str, f.input.shape)), f.input.dtype, q, f"{f.size / 1e6:.1f} MB"))
    _table(f"converted into {result.manifest_path.parent} ({'reused' if result.reused else 'built'})",
           ["file", "backend", "mode", "input", "dtype", "in scale/zp", "size"], rows)
    for line in result.notes:
        print(f"note: {line}")
    if result.host_check:
        for line in result.host_check_lines():
            print(line)
    print(f"manifest: {result.manifest_path}")


# --------------------------------------------------------------------------- bench


@task(
    help={
        "host": "run the CPU models on this machine (NNAPI models need a phone: see `invoke deploy`)",
        "models": "directory written by `invoke convert` (default: config convert.out)",
        "warmup": "warm-up iterations (default 5)",
        "iter": "timed iterations (default 50)",
        "threads": "intra-op threads (default 1, like --pthreadpool_size=1)",
        "debug": "show tracebacks",
    }
)
def bench(c, host=True, models=None, warmup=None, iter=None, threads=None, debug=False):
    """Benchmark converted models on the host with speed_benchmark_torch's protocol."""
    if not host:
        raise Exit("torchdroid bench: only --host is done here; on phones use `invoke deploy`", code=2)
    with _stage(c, "bench", debug):
        from converter.host_bench import HostBenchSettings, run_host_bench

        settings = HostBenchSettings(
            models=Path(pick(models, c.config, "convert.out")),
            warmup=int(pick(warmup, c.config, "bench.warmup")),
            iters=int(pick(iter, c.config, "bench.iter")),
            threads=int(pick(threads, c.config, "bench.threads")),
            out=Path(pick(None, c.config, "bench.out")),
        )
        result = run_host_bench(settings)
    _table("host benchmark (CPU models, bundled input)",
           ["model", "mode", "load ms", "first ms", "median ms", "p90 ms", "min ms", "max ms", "mean ms", "std ms",
            "spread %", "peak MB"],
           [(r.file, r.mode, f"{r.load_ms:.0f}", f"{r.first_ms:.2f}", f"{r.median_ms:.2f}", f"{r.p90_ms:.2f}",
             f"{r.min_ms:.2f}", f"{r.max_ms:.2f}", f"{r.mean_ms:.2f}", f"{r.std_ms:.2f}",
             f"{r.spread_pct:.1f}" + (" !" if r.unstable else ""), f"{r.peak_rss_kb / 1024:.0f}")
            for r in result.rows])
    for line in result.notes:
        print(f"note: {line}")
    print(f"results: {result.json_path}")


@task(
    help={
        "models": "directory written by `invoke convert --format ...,executorch` (default: config convert.out)",
        "warmup": "warm-up iterations (default: config bench.warmup)",
        "iter": "timed iterations (default: config bench.iter)",
        "threads": "intra-op threads for every runtime (default: config bench.threads)",
        "no_legacy": "time only the .pte programs, not the legacy TorchScript CPU and host NNAPI models",
        "no_per_operator": "skip the per-operator comparison (ETDump + ETRecord through ExecuTorch's Inspector)",
        "debug": "show tracebacks",
    }
)
def bench_executorch(c, models=None, warmup=None, iter=None, threads=None, no_legacy=False, no_per_operator=False,
                     debug=False):
    """Check each .pte against its reference in ExecuTorch's host runtime and time it beside the legacy models."""
    with _stage(c, "bench-executorch", debug):
        from converter.pte_host import PteBenchSettings, run_pte_bench

        result = run_pte_bench(PteBenchSettings(
            models=Path(pick(models, c.config, "convert.out")),
            warmup=int(pick(warmup, c.config, "bench.warmup")),
            iters=int(pick(iter, c.config, "bench.iter")),
            threads=int(pick(threads, c.config, "bench.threads")),
            repeat=int(pick(None, c.config, "bench.repeat", 3)),
            out=Path(pick(None, c.config, "bench.out")),
            float_atol=float(pick(None, c.config, "verify.float_atol")),
            float_rtol=float(pick(None, c.config, "verify.float_rtol")),
            per_operator=not no_per_operator,
            legacy=not no_legacy,
        ))
        _print_pte_bench(result)
        result.raise_for_failures()


def _print_pte_bench(result) -> None:
    from converter.pte_host import check_cells, speedups

    _table("ExecuTorch programs against their reference (host runtime)",
           ["program", "reference", "max |diff|", "limit / LSBs", "top-1/top-5", "per operator", "result"],
           [check_cells(c) for c in result.checks])
    ups = speedups(result.lines)
    _table("host latency, same protocol and threads (speed-up over legacy TorchScript CPU of the same precision)",
           ["runtime", "file", "median ms", "p90 ms", "min ms", "speed-up"],
           [(x.label, x.file, *(f"{v:.2f}" for v in (x.timing.median_ms, x.timing.p90_ms, x.timing.min_ms)),
             f"{ups[x.label]:.2f}x" if x.label in ups else "-") if x.timing else (x.label, x.file, "-", "-", "-", x.note)
            for x in result.lines])
    for c in result.checks:
        if c.operator_note:
            print(f"per operator, {c.variant}: {c.operator_note}")
    for line in result.notes:
        print(f"note: {line}")
    print(f"results: {result.json_path}")


# --------------------------------------------------------------------------- build-android, check-compat, doctor


@task(
    help={
        "lane": "pin set: current (v2.8.0, default), seed-2020, or executorch (ExecuTorch 1.5.1 executor_runner) (config pytorch.lane)",
        "commit": "build another PyTorch commit: full SHA or tag (config pytorch.commit; lane facts from the nearest preset, with a warning)",
        "repo_url": "PyTorch repository to fetch from (config pytorch.repo_url)",
        "ndk": "Android NDK directory (else config ndk.path, ANDROID_NDK, ANDROID_NDK_HOME, ANDROID_HOME/ndk/*)",
        "abi": "arm64-v8a (default), armeabi-v7a, x86_64 or x86",
        "api_level": "Android API level the binary is built for (default 29, config android.api_level)",
        "python": "host Python for PyTorch's build scripts (config pytorch.python)",
        "max_jobs": "parallel compile jobs (default: all cores, config android.max_jobs)",
        "clean": "start the build over (removes the ABI's CMake tree, build-info and AAR under build/android/<abi>)",
        "aar": "also build the pytorch_android AAR from the same checkout (needs an Android SDK)",
        "cmake_arg": "extra CMake argument for build_android.sh (repeatable)",
        "vulkan": "keep PyTorch's Vulkan backend (default off: -DUSE_VULKAN=OFF; needs an NDK <= r22 with vulkan_wrapper)",
        "java_home": "JDK for --aar's Gradle (default: one it accepts, found in JAVA_HOME/PATH/usr/lib/jvm; config android.java_home)",
        "debug": "show tracebacks",
    },
    iterable=["cmake_arg"],
)
def build_android(c, lane=None, commit=None, repo_url=None, ndk=None, abi=None, api_level=None, python=None,
                  max_jobs=None, clean=False, aar=False, cmake_arg=None, vulkan=False, java_home=None, debug=False):
    """PyTorch Mobile (speed_benchmark_torch, static libraries, headers) from a lane's pinned commit, with the NDK."""
    if pick(lane, c.config, "pytorch.lane") == "executorch":
        return _build_executorch_runtime(c, ndk, abi, api_level, max_jobs, debug)
    with _stage(c, "build-android", debug):
        from ndk_build import BuildSettings, build_android as run_build

        source_dir = pick(None, c.config, "pytorch.source_dir")
        jobs = pick(max_jobs, c.config, "android.max_jobs")
        settings = BuildSettings(
            build_dir=_build_dir(c),
            lane=pick(lane, c.config, "pytorch.lane"),
            lane_explicit=lane is not None,
            commit=pick(commit, c.config, "pytorch.commit"),
            repo_url=pick(repo_url, c.config, "pytorch.repo_url"),
            source_dir=Path(source_dir) if source_dir else None,
            ndk=ndk,
            ndk_config=pick(None, c.config, "ndk.path"),
            sdk=pick(None, c.config, "android.sdk"),
            python=pick(python, c.config, "pytorch.python"),
            abi=pick(abi, c.config, "android.abi"),
            api_level=pick(api_level, c.config, "android.api_level"),  # validated by build-android
            max_jobs=jobs or None,
            clean=bool(clean),
            aar=bool(aar),
            vulkan=bool(vulkan),
            java_home=pick(java_home, c.config, "android.java_home"),
            cmake_args=tuple(cmake_arg or ()),
            git_jobs=int(pick(None, c.config, "pytorch.git_jobs", 4)),
        )
        result = run_build(settings)
    info = result.info
    rows = [(a["name"], a["kind"], a["sha256"][:12], a["path"]) for a in info["artefacts"]]
    _table(f"{'up to date' if result.reused else 'built'}: PyTorch {info['commit'][:12]} ({info['lane']}) "
           f"{info['abi']} API {info['api_level']}, NDK {info['ndk']['revision']}",
           ["artefact", "kind", "sha256", "path"], rows)
    ver = info.get("verification", {})
    print(f"verified: machine {ver.get('machine')}, API level {ver.get('api_level')}, "
          f"LOAD alignment {ver.get('load_alignment')} bytes (16 KB pages: {ver.get('page_16k_ok')})")
    for w in result.warnings:
        print(f"warning: {w}")
    print(f"build-info: {result.build_info_path} ({result.seconds:.1f}s; log {result.log_path})")


def _build_executorch_runtime(c, ndk, abi, api_level, max_jobs, debug):
    """`build-android --lane executorch`: ExecuTorch's executor_runner at the pinned release (docs/executorch.md)."""
    with _stage(c, "build-android", debug) as log_path:
        from ndk_build.executorch_runtime import RuntimeBuildSettings, build_runtime

        result = build_runtime(RuntimeBuildSettings(
            build_dir=_build_dir(c), ndk=ndk, ndk_config=pick(None, c.config, "ndk.path"),
            abi=pick(abi, c.config, "android.abi"), api_level=int(pick(api_level, c.config, "android.api_level")),
            max_jobs=pick(max_jobs, c.config, "android.max_jobs") or None,
            git_jobs=int(pick(None, c.config, "pytorch.git_jobs", 4))), log_path)
    info = result.build_info
    print(f"built ExecuTorch {info.get('tag')} ({info.commit[:12]}) executor_runner for {info.abi} API {info.get('api_level')}, "
          f"LOAD alignment {info.get('page_alignment')}: {result.runner}")
    print(f"build-info: {info.path} ({result.seconds:.1f}s; log {log_path})")


@task(
    help={
        "models": "directory with manifest.json from `invoke convert` (default: config convert.out)",
        "build_info": "build-info.json of the runtime (default: build/android/<abi>/build-info.json)",
        "pytorch_android": "check against a published pytorch_android version instead of a build",
        "source": "PyTorch checkout of that runtime (to compare operators when versions differ)",
        "abi": "which build to read when --build-info is not given (default: config android.abi)",
        "strict": "also fail when compatibility cannot be decided",
        "debug": "show tracebacks",
    }
)
def check_compat(c, models=None, build_info=None, pytorch_android=None, source=None, abi=None, strict=False,
                 debug=False):
    """Can the Android runtime run the converted models? (same commit, operators, NNAPI methods, file format)"""
    with _stage(c, "check-compat", debug):
        from ndk_build import check_compat as run_check

        if build_info is None and pytorch_android is None:
            build_info = build_info_path(_build_dir(c), pick(abi, c.config, "android.abi"))
        report = run_check(
            Path(pick(models, c.config, "convert.out")),
            build_info=Path(build_info) if build_info else None,
            pytorch_android=pytorch_android,
            source_dir=Path(source) if source else None,
        )
        for line in report.lines():
            print(line)
        report.raise_for_status(strict_unknown=bool(strict))


@task(
    help={
        "strict": "exit non-zero when anything is missing or does not fit the lane",
        "lane": "lane to check the NDK and host Python against (default: config pytorch.lane)",
        "ndk": "Android NDK directory to check",
        "adb_server": "HOST:PORT of an adb server to list devices on (repeatable; default: config deploy.servers, "
                      "else the one adb itself would use)",
        "debug": "show tracebacks",
    },
    iterable=["adb_server"],
)
def doctor(c, strict=False, lane=None, ndk=None, adb_server=None, debug=False):
    """What this machine has for every stage, what is missing, and how to get it."""
    with _stage(c, "doctor", debug):
        from ndk_build import DoctorSettings, problems, run_doctor

        checks = run_doctor(DoctorSettings(
            lane=pick(lane, c.config, "pytorch.lane"),
            ndk=ndk,
            ndk_config=pick(None, c.config, "ndk.path"),
            sdk=pick(None, c.config, "android.sdk"),
            python=pick(None, c.config, "pytorch.python"),
            adb_host=pick(None, c.config, "deploy.adb_host"),
            adb_port=pick(None, c.config, "deploy.adb_port"),
            servers=tuple(_split(adb_server) or _split(pick(None, c.config, "deploy.servers", []))),
        ))
    _table("torchdroid doctor", ["stage", "tool", "status", "found", "fix"],
           [(ch.stage, ch.name, ch.status, ch.found, ch.fix) for ch in checks])
    bad = problems(checks)
    if bad and strict:
        raise Exit(f"torchdroid doctor: {len(bad)} problem(s): " + ", ".join(ch.name for ch in bad), code=1)


# --------------------------------------------------------------------------- make-app / build-app


def _app_out(c, out) -> Path:
    return Path(pick(out, c.config, "app.out"))


@task(
    help={
        "model": "converted variant: quant_none, quant_core, quant_full (or <model>-quant_full); default quant_full",
        "models": "directory `invoke convert` wrote (default: config app.models, else convert.out)",
        "out": "where the Gradle project goes (default build/app, config app.out); must be new or empty unless --force",
        "app_name": "name on the launcher (default 'torchdroid demo')",
        "application_id": "Android application id = Java package (default org.torchdroid.demo)",
        "abi_filters": "ABIs to package (repeat or comma-separate; default arm64-v8a)",
        "min_sdk": "minSdkVersion (default 21; NNAPI needs 29, below it the app uses the CPU model)",
        "target_sdk": "targetSdkVersion (default: the lane's compileSdk, 34 on the current lane)",
        "lane": "pin lane for Gradle / AGP / compileSdk / pytorch_android (default: config pytorch.lane)",
        "pytorch_android": "Maven version of org.pytorch:pytorch_android (default: the lane's, else the pinned fallback)",
        "aar": "link a locally built pytorch_android AAR instead of Maven (from `invoke build-android --aar`)",
        "force": "replace a non-empty --out directory (never the inputs of this command; local.properties is kept)",
        "debug": "show tracebacks",
    },
    iterable=["abi_filters"],
)
def make_app(c, model=None, models=None, out=None, app_name=None, application_id=None, abi_filters=None,
             min_sdk=None, target_sdk=None, lane=None, pytorch_android=None, aar=None, force=False, debug=False):
    """A Gradle Android app (CameraX + NNAPI with CPU fallback + in-app benchmark) around one converted variant."""
    with _stage(c, "make-app", debug):
        from appgen import AppSettings, make_app as run_make_app

        models_dir = Path(pick(models, c.config, "app.models", None) or pick(None, c.config, "convert.out"))
        aar_path = pick(aar, c.config, "app.aar")
        settings = AppSettings(
            model=pick(model, c.config, "app.model"),
            models=models_dir,
            out=_app_out(c, out),
            app_name=pick(app_name, c.config, "app.name"),
            application_id=pick(application_id, c.config, "app.application_id"),
            abi_filters=tuple(_split(abi_filters) or _split(pick(None, c.config, "app.abi_filters"))),
            min_sdk=pick(min_sdk, c.config, "app.min_sdk"),
            target_sdk=pick(target_sdk, c.config, "app.target_sdk"),
            lane=pick(lane, c.config, "pytorch.lane"),
            pytorch_android=pick(pytorch_android, c.config, "app.pytorch_android"),
            aar=Path(aar_path) if aar_path else None,
            force=bool(force),
            build_dir=_build_dir(c),
        )
        result = run_make_app(settings)
        compat = _app_compat(c, models_dir, result.runtime)
    _print_make_app(result, compat)


def _print_make_app(result, compat) -> None:
    if result.up_to_date:
        print(f"make-app: {result.out} is up to date ({result.notes[0].split(': ', 1)[-1]}); nothing written")
    else:
        _table(f"app assets ({result.variant})", ["asset", "size"],
               [(name, f"{size / 1e6:.2f} MB" if size > 1e5 else f"{size} B") for name, size in result.assets.items()])
        for line in result.notes:
            print(f"note: {line}")
    for line in result.warnings:
        print(f"WARNING: {line}")
    print(f"project: {result.out} (application id {result.application_id}; runtime "
          f"{result.runtime.source} {result.runtime.pytorch_android or result.runtime.aar_name})")
    print(f"app-info: {result.app_info}")
    if compat is not None:
        for line in compat.lines():
            print(f"check-compat: {line}")
        if not compat.ok:
            print(f"WARNING: the app's runtime may not run these models ({compat.status}); see `invoke check-compat`")
    print(f"next: invoke build-app --out {result.out}  (or open {result.out} in Android Studio)")


def _app_compat(c, models_dir: Path, runtime):
    """check-compat for the runtime the app links: a locally built AAR (via its build-info) or a Maven version."""
    from ndk_build import check_compat as run_check
    from toolchain.fsutil import sha256_file
    from toolchain.records import BuildInfo

    if runtime.source == "aar" and runtime.aar:
        info = build_info_path(_build_dir(c), pick(None, c.config, "android.abi"))
        if info.is_file():
            bi = BuildInfo.load(info)
            arts = [a for a in bi.get("artefacts", []) if a.get("name") == "pytorch_android"]
            if arts and arts[0].get("sha256") == sha256_file(runtime.aar):
                return run_check(models_dir, build_info=bi)
        return None  # an AAR built elsewhere: nothing recorded to compare with
    return run_check(models_dir, pytorch_android=runtime.pytorch_android) if runtime.pytorch_android else None


@task(
    help={
        "out": "the Gradle project `invoke make-app` wrote (default build/app, config app.out)",
        "debug": "show tracebacks",
    }
)
def build_app(c, out=None, debug=False):
    """./gradlew assembleDebug in the generated project (needs an Android SDK and the wrapper jar)."""
    with _stage(c, "build-app", debug):
        from appgen import BuildAppSettings, build_app as run_build_app

        result = run_build_app(BuildAppSettings(project=_app_out(c, out), build_dir=_build_dir(c),
                                                timeout=float(pick(None, c.config, "app.gradle_timeout", 3600)),
                                                sdk=pick(None, c.config, "android.sdk")))
    print(f"APK: {result.apk} ({result.size / 1e6:.1f} MB, sha256 {result.sha256[:16]}…, {result.seconds:.0f} s)")
    print(f"gradle log: {result.log_path}")


# --------------------------------------------------------------------------- deploy / report


def _opt_path(value):
    return Path(value) if value else None


@task(
    help={
        "serial": "device serial to use (repeatable; default: ANDROID_SERIAL, else every connected device)",
        "models": "directory written by `invoke convert` (default: config convert.out)",
        "variant": "variants to deploy, e.g. quant_full (repeat or comma-separate; default all)",
        "binary": "speed_benchmark_torch to push instead of the one in the build-info (a binary alone is enough)",
        "build_info": "build-info.json of `invoke build-android` (default build/android/<abi>/build-info.json)",
        "apk": "APK to install instead of the one `invoke build-app` recorded (an APK alone is enough); its "
               "package and launchable activity are read from the APK itself",
        "app": "directory of the generated app (with torchdroid-app.json; default config app.out)",
        "bench": "run the benchmarks (default on; --no-bench only pushes and installs)",
        "app_bench": "also run the in-app benchmark via its intent and logcat (default on)",
        "install": "install the APK (default on; --no-install skips the app entirely)",
        "warmup": "warm-up iterations per run (default 5)",
        "iter": "timed iterations per run (default 200)",
        "repeat": "timed runs per model after one cold start; the statistics are over all of them (default 3)",
        "cooldown": "seconds to wait between models so a hot phone cools down (default 0)",
        "threads": "--pthreadpool_size (default 1; 0 leaves the flag out)",
        "caching_allocator": "pass --use_caching_allocator=true to CPU models",
        "bundled_input": "--use_bundled_input index (default 0); -1 passes --input_dims/--input_type from the manifest",
        "allow_mismatch": "benchmark even when the models' torch commit differs from the binary's",
        "profile_with_gatord": "PATH to Arm's gatord: push it and run each benchmark under `gatord --app`",
        "device_dir": "parent directory on the device (default /data/local/tmp/torchdroid)",
        "project": "sub-directory name on the device (default: this directory's name)",
        "results": "results directory: SQLite history + CSV/JSON (default build/results)",
        "adb_host": "adb server host (default ANDROID_ADB_SERVER_ADDRESS or 127.0.0.1)",
        "adb_port": "adb server port (default ANDROID_ADB_SERVER_PORT or 5037)",
        "adb_server": "HOST:PORT of an adb server (repeatable: deploy to the devices of all of them in parallel; "
                      "default: config deploy.servers, else --adb-host/--adb-port)",
        "debug": "show tracebacks",
    },
    iterable=["serial", "variant", "adb_server"],
    auto_shortflags=False,
)
def deploy(c, serial=None, models=None, variant=None, binary=None, build_info=None, apk=None, app=None,
           bench=True, app_bench=True, install=True, warmup=None, iter=None, repeat=None, cooldown=None, threads=None,
           caching_allocator=False, bundled_input=None, allow_mismatch=False, profile_with_gatord=None,
           device_dir=None, project=None, results=None, adb_host=None, adb_port=None, adb_server=None,
           debug=False):
    """Push the benchmark binary and models, install the app, benchmark on every device, record and report."""
    with _stage(c, "deploy", debug):
        from deploy import BenchOptions, DeploySettings
        from deploy import deploy as run_deploy

        abi = pick(None, c.config, "android.abi", "arm64-v8a")
        threads_v = int(pick(threads, c.config, "deploy.threads", 1))
        options = BenchOptions(
            warmup=int(pick(warmup, c.config, "deploy.warmup")),
            iters=int(pick(iter, c.config, "deploy.iter")),
            repeat=int(pick(repeat, c.config, "deploy.repeat")),
            threads=threads_v if threads_v > 0 else None,
            caching_allocator=bool(caching_allocator or pick(None, c.config, "deploy.caching_allocator", False)),
            timeout=float(pick(None, c.config, "deploy.bench_timeout", 600)),
            gatord=bool(pick(profile_with_gatord, c.config, "deploy.gatord")),
            bundled_input=int(pick(bundled_input, c.config, "deploy.bundled_input", 0)),
            cooldown=float(pick(cooldown, c.config, "deploy.cooldown", 0)),
        )
        settings = DeploySettings(
            models=Path(pick(models, c.config, "convert.out")),
            results=Path(pick(results, c.config, "deploy.results")),
            build_info=Path(pick(build_info, c.config, "deploy.build_info",
                                 str(build_info_path(_build_dir(c), abi)))),
            binary=_opt_path(pick(binary, c.config, "deploy.binary")),
            app_dir=Path(pick(app, c.config, "deploy.app_dir", pick(None, c.config, "app.out", "build/app"))),
            apk=_opt_path(pick(apk, c.config, "deploy.apk")),
            application_id=pick(None, c.config, "app.application_id"),
            variants=tuple(_split(variant) or pick(None, c.config, "deploy.variants", [])),
            serials=tuple(_split(serial) or pick(None, c.config, "deploy.serials", [])),
            adb_host=pick(adb_host, c.config, "deploy.adb_host"),
            adb_port=pick(adb_port, c.config, "deploy.adb_port"),
            servers=tuple(_split(adb_server) or _split(pick(None, c.config, "deploy.servers", []))),
            servers_from="--adb-server" if adb_server else "deploy.servers",
            device_dir=str(pick(device_dir, c.config, "deploy.device_dir")),
            project=str(pick(project, c.config, "deploy.project", Path.cwd().name)),
            # on/off flags: the CLI can switch off what the config has on, and on what it has off
            bench=bool(bench and pick(None, c.config, "deploy.bench", True)),
            app_bench=bool(app_bench and pick(None, c.config, "deploy.app_bench", True)),
            install=bool(install and pick(None, c.config, "deploy.install", True)),
            options=options,
            allow_mismatch=bool(allow_mismatch or pick(None, c.config, "deploy.allow_mismatch", False)),
            gatord=_opt_path(pick(profile_with_gatord, c.config, "deploy.gatord")),
            timeout=float(pick(None, c.config, "deploy.timeout", 120)),
            app_wait=float(pick(None, c.config, "deploy.app_wait", 60)),
        )
        if settings.bench and settings.binary is None and settings.build_info.is_file() and not settings.allow_mismatch \
                and settings.models.is_dir():
            _deploy_compat(settings)  # before anything is pushed
        result = run_deploy(settings)
    _print_deploy(result)
    if result.failed:
        raise Exit(f"torchdroid deploy: {len(result.failed)} of {len(result.devices)} device(s) had problems "
                   "(see above; the others were deployed)", code=7)
    failed_rows = [r for r in result.rows if r.status == "failed"]
    if failed_rows:
        raise Exit(f"torchdroid deploy: {len(failed_rows)} benchmark(s) failed (reasons in the table above; the "
                   "results are recorded)", code=7)


@task(
    help={
        "models": "directory with the .pte programs (default: config convert.out)",
        "build_info": "the runner's build-info (default: <build_dir>/android/<android.abi>/executorch/build-info.json)",
        "serial": "device serial (repeatable; default: every connected device)",
        "iter": "timed executions per run (default: config deploy.iter)",
        "warmup": "untimed executions per run (default: config deploy.warmup)",
        "repeat": "runs per program (default: config deploy.repeat)",
        "debug": "show tracebacks",
    },
    iterable=["serial"],
)
def deploy_executorch(c, models=None, build_info=None, serial=None, iter=None, warmup=None, repeat=None, debug=False):
    """Push the .pte programs and ExecuTorch's executor_runner, benchmark them, report beside TorchScript CPU and NNAPI."""
    with _stage(c, "deploy-executorch", debug):
        from deploy.executorch_bench import PteDeploySettings, deploy_pte

        abi = pick(None, c.config, "android.abi")
        result = deploy_pte(PteDeploySettings(
            models=Path(pick(models, c.config, "convert.out")),
            build_info=Path(build_info) if build_info else _build_dir(c) / "android" / abi / "executorch" / "build-info.json",
            results=Path(pick(None, c.config, "deploy.results")), serials=tuple(serial or pick(None, c.config, "deploy.serials") or ()),
            adb_host=pick(None, c.config, "deploy.adb_host"), adb_port=pick(None, c.config, "deploy.adb_port"),
            device_dir=pick(None, c.config, "deploy.device_dir"), warmup=int(pick(warmup, c.config, "deploy.warmup")),
            iters=int(pick(iter, c.config, "deploy.iter")), repeat=int(pick(repeat, c.config, "deploy.repeat")),
            threads=int(pick(None, c.config, "deploy.threads")), timeout=float(pick(None, c.config, "deploy.bench_timeout"))))
    _table("per device: legacy and ExecuTorch, speed-up over the legacy TorchScript CPU model of the same precision",
           ["device", "runtime", "median ms", "p90 ms", "samples", "speed-up", "note"],
           [(r.serial, r.runtime, f"{r.median_ms:.2f}" if r.median_ms else "-", f"{r.p90_ms:.2f}" if r.p90_ms else "-",
             r.samples, f"{r.speedup_vs_cpu:.2f}x" if r.speedup_vs_cpu else "-", r.note[:60]) for r in result.rows])
    for p in result.problems:
        print(f"problem: {p}")
    print(f"results: {result.json_path}, {result.csv_path}")
    if result.problems:
        raise Exit(f"torchdroid deploy-executorch: {len(result.problems)} problem(s), see above", code=7)


def _deploy_compat(settings) -> None:
    """check-compat of the models against the runtime deploy is about to push; refuse what cannot run."""
    from ndk_build import check_compat as run_check

    report = run_check(settings.models, build_info=settings.build_info)
    if not report.ok:
        for line in report.lines():
            print(f"check-compat: {line}")
    report.raise_for_status()


def _print_tables(rows) -> None:
    from deploy.summary import device_tables, slower_callouts

    for title, columns, table_rows in device_tables(rows):
        _table(title, columns, table_rows)
    for line in slower_callouts(rows):
        print(f"note: {line}")


def _print_deploy(result) -> None:
    for w in result.warnings:
        print(f"warning: {w}")
    _print_tables(result.rows)
    for d in result.devices:
        facts = f" ({d.facts.model}, SDK {d.facts.sdk})" if d.facts else ""
        print(f"{d.serial}{facts}: {d.pushed_files} file(s) pushed ({d.pushed_bytes} bytes), "
              f"{d.skipped_files} unchanged" + ("" if d.installed is None else
                                                f", app {'installed' if d.installed else 'already installed'}"))
        for n in d.notes:
            print(f"  note: {n}")
        for r in d.rows:
            if r.status == "failed" and r.source != "deploy":
                print(f"  failed: {r.model_file} ({r.backend}, {r.source}): {r.reason}")
        for e in d.errors:
            print("  problem: " + e.replace("\n", "\n    "))
    print(f"device directory: {result.directory}")
    if result.run_id is not None:
        print(f"results: run {result.run_id} in {result.db_path}; "
              + ", ".join(str(p) for p in result.exports.values() if "run-" in p.name))
        print("next: invoke report  (the chart and an HTML page of this run)")


@task(
    help={
        "run": "run id in the results database (default: the latest)",
        "results": "results directory (default build/results)",
        "out": "PNG to write (default <results>/report-run-NNNN.png)",
        "source": "binary (speed_benchmark_torch) or app (in-app benchmark)",
        "debug": "show tracebacks",
    },
    auto_shortflags=False,
)
def report(c, run=None, results=None, out=None, source=None, debug=False):
    """Draw latency and CPU-vs-NNAPI speed-up per device and mode (PNG), and export the run as CSV/JSON."""
    with _stage(c, "report", debug):
        from deploy.report import ReportSettings, make_report

        result = make_report(ReportSettings(
            results=Path(pick(results, c.config, "deploy.results")),
            run_id=int(run) if run else None,
            out=_opt_path(out),
            source=str(pick(source, c.config, "deploy.report_source", "binary")),
        ))
    _print_tables(result.rows)
    print(f"picture: {result.png}")
    print(f"page: {result.html} (chart and tables; open it in a browser)")
    print("exports: " + ", ".join(str(p) for p in result.exports.values()))


# --------------------------------------------------------------------------- verify (host NNAPI)


@task(
    help={
        "models": "directory written by `invoke convert` (default: config convert.out)",
        "variant": "variants to check, e.g. quant_full or mobilenetv2-quant_core (repeat or comma-separate; default all)",
        "rounding": "quantized kernels: qnnpack (match the CPU model, default) | nnapi (a conformant device's arithmetic)",
        "random_inputs": "random inputs besides the bundled ones (default 3)",
        "layerwise": "layer-by-layer comparison: auto (quantized variants and failures) | always | never",
        "api_level": "target Android API level for the feature-level check (default: config android.api_level)",
        "out": "results JSON (default: <models>/verify.json)",
        "debug": "show tracebacks",
    },
    iterable=["variant"],
)
def verify(c, models=None, variant=None, rounding=None, random_inputs=None, layerwise=None, api_level=None, out=None,
           debug=False):
    """Run each NNAPI model on the host NNAPI and its CPU model on the same inputs; compare and check statically."""
    with _stage(c, "verify", debug):
        from host_nnapi.verify import verify as run_verify

        result = run_verify(_verify_settings(c, models, variant, rounding, random_inputs, layerwise, api_level, out))
    _print_verify(result)


def _verify_settings(c, models=None, variant=None, rounding=None, random_inputs=None, layerwise=None, api_level=None,
                     out=None):
    from host_nnapi.verify import VerifySettings

    cache = pick(None, c.config, "verify.cache")
    out = pick(out, c.config, "verify.out")
    return VerifySettings(
        models=Path(pick(models, c.config, "convert.out")),
        out=Path(out) if out else None,
        variants=tuple(_split(variant)),
        rounding=str(pick(rounding, c.config, "verify.rounding")),
        float_atol=float(pick(None, c.config, "verify.float_atol")),
        float_rtol=float(pick(None, c.config, "verify.float_rtol")),
        max_lsb=int(pick(None, c.config, "verify.max_lsb")),
        min_top1_agreement=float(pick(None, c.config, "verify.min_top1_agreement")),
        min_top5_agreement=float(pick(None, c.config, "verify.min_top5_agreement")),
        random_inputs=int(pick(random_inputs, c.config, "verify.random_inputs")),
        seed=int(pick(None, c.config, "verify.seed")),
        api_level=int(pick(api_level, c.config, "android.api_level")),
        layerwise=str(pick(layerwise, c.config, "verify.layerwise")),
        cache=Path(cache) if cache else None,
    )


def _print_verify(result) -> None:
    rows = []
    for r in result.rows:
        diff = f"{r.max_lsb_diff} LSB" if r.quantized and r.max_lsb_diff is not None else f"{r.max_abs_diff:.3g}"
        top = "-" if r.top1_agreement is None else f"{r.top1_agreement:.2f}/{r.top5_agreement:.2f}"
        worst = max((x["max_lsb"] or 0 for x in r.layers), default=None) if r.quantized and r.layers else None
        rows.append((r.variant, "ok" if r.ok else "FAIL", r.inputs, diff, top, "-" if worst is None else f"{worst} LSB",
                     sum(1 for f in r.findings if f["severity"] != "info")))
    _table(f"host NNAPI vs CPU ({result.library})", ["variant", "result", "inputs", "end-to-end diff", "top-1/top-5",
                                                     "worst op (isolated)", "findings"], rows)
    for r in result.rows:
        for f in r.findings:
            if f["severity"] != "info":
                print(f"{r.variant}: {f['severity']}: {f['message']}")
    print(f"results: {result.json_path}")


def verify_after_convert(c, models: Path, modes=(), debug=False):
    """For `invoke convert`: verify the fresh models when the host NNAPI can be built here.

    config verify.after_convert: "warn" (default: a failed check is printed, convert still succeeds),
    "fail" (a failed check fails convert with exit code 8) or "off".  Returns the VerifyResult or None.
    """
    mode = str(pick(None, c.config, "verify.after_convert", "warn")).lower()
    if mode in ("off", "false", "no", "0"):
        return None
    if mode not in ("warn", "fail"):
        raise Exit(f"torchdroid convert: verify.after_convert is {mode!r}: use warn, fail or off", code=2)
    import host_nnapi

    ok, why = host_nnapi.availability()
    if not ok:
        print(f"note: host NNAPI verification skipped: {why}")
        return None
    from host_nnapi.verify import verify as run_verify
    from toolchain.errors import VerificationError

    with _stage(c, "verify", debug):
        settings = _verify_settings(c, models=str(models), variant=[f"quant_{m}" for m in modes])
        try:
            result = run_verify(settings)
        except VerificationError as e:
            if mode == "fail":
                raise
            print(f"warning: host NNAPI verification failed (convert still succeeded; verify.after_convert: fail "
                  f"makes this an error): {e}")
            return None
    _print_verify(result)
    return result


# --------------------------------------------------------------------------- all


@task(
    name="all",
    help={
        "weights": "auto (default: pretrained when they can be had, else random, announced and recorded), "
                   "pretrained, random or PATH",
        "model": "variant the app is made for (default config app.model, quant_full)",
        "skip": "stages to leave out (repeat or comma-separate): " + ", ".join(STAGES),
        "replace_app": "regenerate the app directory when it was made from other models (replaces your edits)",
        "debug": "show tracebacks",
    },
    iterable=["skip"],
)
def all_(c, weights=None, model=None, skip=None, replace_app=False, debug=False):
    """Every stage this machine allows: convert, verify, make-app, bench; build-android, build-app, deploy when possible."""
    import dataclasses
    import time

    from invoke.exceptions import UnexpectedExit

    with _stage(c, "all", debug):
        import workflow
        from converter.models import pretrained_status
        from toolchain.records import ConvertManifest

        skipped = workflow.check_stage_names(_split(skip))
        used, note, substituted = workflow.resolve_weights(weights or pick(None, c.config, "all.weights", "auto"),
                                                           pick(None, c.config, "convert.model"), pretrained_status)
        facts = _all_facts(c)
    print(("WARNING: " if substituted else "weights: ") + note)
    summary = workflow.AllSummary(weights={"requested": weights or "auto", "used": used, "note": note})
    variant = pick(model, c.config, "app.model")
    models_dir = Path(pick(None, c.config, "convert.out"))
    info_path = build_info_path(_build_dir(c), pick(None, c.config, "android.abi"))
    runs = {
        "convert": lambda: convert(c, weights=used, no_verify=True, debug=debug),  # verify is its own stage
        "verify": lambda: verify(c, debug=debug),
        "make-app": lambda: make_app(c, model=variant, force=bool(replace_app), debug=debug),
        "build-app": lambda: build_app(c, debug=debug),
        "bench": lambda: bench(c, debug=debug),
        "build-android": lambda: build_android(c, debug=debug),
        "check-compat": lambda: check_compat(c, debug=debug),
        "deploy": lambda: deploy(c, debug=debug),
        "report": lambda: report(c, debug=debug),
    }
    for stage in workflow.STAGES:
        binary = pick(None, c.config, "deploy.binary")
        facts = dataclasses.replace(facts, build_info=info_path if info_path.is_file() else
                                    Path(binary) if binary and Path(binary).is_file() else None,
                                    apk=_recorded_apk(c), failed=summary.failed,
                                    ran=tuple(o.stage for o in summary.outcomes if o.status == "ran"))
        decision = workflow.decide(stage, facts, skipped)
        if decision.run and stage == "make-app" and ConvertManifest.exists(models_dir):
            current, why = workflow.app_is_current(_app_out(c, None), ConvertManifest.load(models_dir), variant)
            if current:
                summary.outcomes.append(workflow.StageOutcome(stage, "up to date", why))
                print(f"\n== make-app: up to date ({why})")
                continue
        if not decision.run:
            summary.outcomes.append(workflow.StageOutcome(stage, "skipped", decision.reason))
            print(f"\n== {stage}: skipped: {decision.reason}")
            continue
        print(f"\n== {stage}")
        t0 = time.monotonic()
        try:
            runs[stage]()
        except (Exit, UnexpectedExit) as e:
            summary.outcomes.append(workflow.StageOutcome(stage, "failed", str(getattr(e, "message", e) or e),
                                                          time.monotonic() - t0))
            print(e.message if isinstance(e, Exit) else str(e))
            if isinstance(e, Exit) and e.code == 130:  # Ctrl-C stops the whole chain
                summary.write(_build_dir(c) / "all.json")
                raise
        else:
            summary.outcomes.append(workflow.StageOutcome(stage, "ran", "", time.monotonic() - t0))
    path = summary.write(_build_dir(c) / "all.json", {k: list(v) for k, v in facts.__dict__.items()
                                                       if k in ("host_nnapi", "ndk", "sdk", "devices")})
    _table("torchdroid all", ["stage", "result", "seconds", "detail"],
           [(o.stage, o.status, f"{o.seconds:.0f}" if o.seconds else "", o.detail.splitlines()[0][:90] if o.detail else "")
            for o in summary.outcomes])
    if substituted:
        print("WARNING: random weights (see above): latencies are real, predictions are meaningless")
    print(f"summary: {path}")
    if summary.failed:
        raise Exit(f"torchdroid all: failed: {', '.join(summary.failed)}", code=1)


def _all_facts(c):
    """What `all` can do here: the doctor's checks (with the adb server started if adb is installed)."""
    import shutil

    import host_nnapi
    import workflow
    from ndk_build import DoctorSettings, run_doctor
    from toolchain.runner import run

    port = pick(None, c.config, "deploy.adb_port")
    if shutil.which("adb") and pick(None, c.config, "deploy.adb_host", "127.0.0.1") in ("127.0.0.1", "localhost") \
            and not pick(None, c.config, "deploy.servers", []):
        env = {"ANDROID_ADB_SERVER_PORT": str(port)} if port else None
        run(["adb", "start-server"], env=env, check=False, timeout=60, what="`adb start-server`")
    checks = run_doctor(DoctorSettings(
        lane=pick(None, c.config, "pytorch.lane"),
        ndk_config=pick(None, c.config, "ndk.path"),
        sdk=pick(None, c.config, "android.sdk"),
        python=pick(None, c.config, "pytorch.python"),
        adb_host=pick(None, c.config, "deploy.adb_host"),
        adb_port=pick(None, c.config, "deploy.adb_port"),
        servers=tuple(_split(pick(None, c.config, "deploy.servers", []))),
    ))
    return workflow.facts_from_doctor(checks, host_nnapi=host_nnapi.availability())


def _recorded_apk(c):
    """The APK `invoke build-app` recorded in the app-info, if it exists."""
    from toolchain.records import AppInfo

    if not AppInfo.exists(_app_out(c, None)):
        return None
    apk = AppInfo.load(_app_out(c, None)).apk_file
    return apk if apk and apk.is_file() else None


ns = Collection(all_, convert, bench, bench_executorch, deploy_executorch, build_android, check_compat, doctor, make_app, build_app, deploy, report, verify)
ns.configure(DEFAULTS)
