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


def _build_dir(c) -> Path:
    return Path(pick(None, c.config, "build_dir", "build"))


def _split(values) -> list:
    """Accept repeated flags and comma lists alike: --quant none,core --quant full."""
    out = []
    for v in values or []:
        out.extend(p.strip() for p in str(v).split(",") if p.strip())
    return out


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
        "debug": "show tracebacks",
    },
    iterable=["quant"],
)
def convert(c, model=None, quant=None, weights=None, calibration=None, out=None, force=False, debug=False):
    """MobileNetV2 (or another model) -> CPU and NNAPI TorchScript models per quantization mode, with a manifest."""
    with _stage(c, "convert", debug):
        from converter import ConvertSettings, convert as run_convert

        settings = ConvertSettings(
            model=pick(model, c.config, "convert.model"),
            modes=tuple(_split(quant) or pick(None, c.config, "convert.quant")),
            weights=str(pick(weights, c.config, "convert.weights")),
            calibration=Path(pick(calibration, c.config, "convert.calibration")) if pick(calibration, c.config, "convert.calibration") else None,
            calibration_count=int(pick(None, c.config, "convert.calibration_count", 32)),
            seed=int(pick(None, c.config, "convert.seed", 0)),
            out=Path(pick(out, c.config, "convert.out")),
            build_dir=_build_dir(c),
            force=bool(force),
        )
        result = run_convert(settings)
    _print_convert(result)


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
    _table("host benchmark (CPU models, bundled input)", ["model", "mode", "median ms", "p90 ms", "min ms", "iters"],
           [(r.file, r.mode, f"{r.median_ms:.2f}", f"{r.p90_ms:.2f}", f"{r.min_ms:.2f}", r.iters) for r in result.rows])
    for line in result.notes:
        print(f"note: {line}")
    print(f"results: {result.json_path}")


# --------------------------------------------------------------------------- make-app / build-app


def _app_out(c, out) -> Path:
    return Path(pick(out, c.config, "app.out"))


@task(
    help={
        "model": "converted variant: quant_none, quant_core, quant_full (or <model>-quant_full); default quant_full",
        "models": "directory `invoke convert` wrote (default: config app.models, else convert.out); converted first when missing",
        "out": "where the Gradle project goes (default build/app, config app.out); must be new or empty unless --force",
        "app_name": "name on the launcher (default 'torchdroid demo')",
        "application_id": "Android application id = Java package (default org.torchdroid.demo)",
        "abi_filters": "ABIs to package (repeat or comma-separate; default arm64-v8a)",
        "min_sdk": "minSdkVersion (default 21; NNAPI needs 29, below it the app uses the CPU model)",
        "target_sdk": "targetSdkVersion (default: the lane's compileSdk, 34 on the current lane)",
        "lane": "pin lane for Gradle / AGP / compileSdk / pytorch_android (default: config pytorch.lane)",
        "pytorch_android": "Maven version of org.pytorch:pytorch_android (default: the lane's, else the pinned fallback)",
        "aar": "link a locally built pytorch_android AAR instead of Maven (from `invoke build-android --aar`)",
        "force": "replace a non-empty --out directory",
        "debug": "show tracebacks",
    },
    iterable=["abi_filters"],
)
def make_app(c, model=None, models=None, out=None, app_name=None, application_id=None, abi_filters=None,
             min_sdk=None, target_sdk=None, lane=None, pytorch_android=None, aar=None, force=False, debug=False):
    """A Gradle Android app (CameraX + NNAPI with CPU fallback + in-app benchmark) around one converted variant."""
    with _stage(c, "make-app", debug):
        from appgen import AppSettings, make_app as run_make_app
        from appgen.make import check, needs_convert

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
        check(settings)  # bad input fails before any conversion
        reason = needs_convert(models_dir, settings.model)
        if reason:
            print(f"make-app: {reason}: running `invoke convert` first")
            from converter import ConvertSettings, convert as run_convert

            calibration = pick(None, c.config, "convert.calibration")
            run_convert(ConvertSettings(
                model=pick(None, c.config, "convert.model"),
                modes=(settings.model.rsplit("_", 1)[-1],),
                weights=str(pick(None, c.config, "convert.weights")),
                calibration=Path(calibration) if calibration else None,
                calibration_count=int(pick(None, c.config, "convert.calibration_count", 32)),
                seed=int(pick(None, c.config, "convert.seed", 0)),
                out=models_dir,
                build_dir=_build_dir(c),
            ))
        result = run_make_app(settings)
    _table(f"app assets ({result.variant})", ["asset", "size"],
           [(name, f"{size / 1e6:.2f} MB" if size > 1e5 else f"{size} B") for name, size in result.assets.items()])
    for line in result.notes:
        print(f"note: {line}")
    for line in result.warnings:
        print(f"WARNING: {line}")
    print(f"project: {result.out} (application id {result.application_id}; runtime "
          f"{result.runtime.source} {result.runtime.pytorch_android or result.runtime.aar_name})")
    print(f"app-info: {result.app_info}")
    print(f"next: invoke build-app --out {result.out}  (or open {result.out} in Android Studio)")


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
                                                timeout=float(pick(None, c.config, "app.gradle_timeout", 3600))))
    print(f"APK: {result.apk} ({result.size / 1e6:.1f} MB, sha256 {result.sha256[:16]}…, {result.seconds:.0f} s)")
    print(f"gradle log: {result.log_path}")


ns = Collection(convert, bench, make_app, build_app)
ns.configure(DEFAULTS)
