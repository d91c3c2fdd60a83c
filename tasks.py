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
        from converter import ConvertSettings
        from converter import convert as run_convert

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


# --------------------------------------------------------------------------- deploy / report


def _opt_path(value):
    return Path(value) if value else None


@task(
    help={
        "serial": "device serial to use (repeatable; default: every connected device)",
        "models": "directory written by `invoke convert` (default: config convert.out)",
        "variant": "variants to deploy, e.g. quant_full (repeat or comma-separate; default all)",
        "binary": "speed_benchmark_torch to push instead of the one in the build-info",
        "build_info": "build-info.json of `invoke build-android` (default build/android/<abi>/build-info.json)",
        "apk": "APK to install instead of the one `invoke build-app` recorded",
        "app": "directory of the generated app (with torchdroid-app.json; default config app.out)",
        "bench": "run the benchmarks (default on; --no-bench only pushes and installs)",
        "app_bench": "also run the in-app benchmark via its intent and logcat (default on)",
        "install": "install the APK (default on; --no-install skips the app entirely)",
        "warmup": "warm-up iterations per run (default 5)",
        "iter": "timed iterations per run (default 200)",
        "repeat": "runs per model; median/p90/min/spread are over all of them (default 3)",
        "threads": "--pthreadpool_size (default 1; 0 leaves the flag out)",
        "caching_allocator": "pass --use_caching_allocator=true to CPU models",
        "allow_mismatch": "benchmark even when the models' torch commit differs from the binary's",
        "profile_with_gatord": "PATH to Arm's gatord: push it and run each benchmark under `gatord --app`",
        "device_dir": "parent directory on the device (default /data/local/tmp/torchdroid)",
        "project": "sub-directory name on the device (default: this directory's name)",
        "results": "results directory: SQLite history + CSV/JSON (default build/results)",
        "adb_host": "adb server host (default 127.0.0.1)",
        "adb_port": "adb server port (default ANDROID_ADB_SERVER_PORT or 5037)",
        "debug": "show tracebacks",
    },
    iterable=["serial", "variant"],
    auto_shortflags=False,
)
def deploy(c, serial=None, models=None, variant=None, binary=None, build_info=None, apk=None, app=None,
           bench=True, app_bench=True, install=True, warmup=None, iter=None, repeat=None, threads=None,
           caching_allocator=False, allow_mismatch=False, profile_with_gatord=None, device_dir=None, project=None,
           results=None, adb_host=None, adb_port=None, debug=False):
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
        )
        settings = DeploySettings(
            models=Path(pick(models, c.config, "convert.out")),
            results=Path(pick(results, c.config, "deploy.results")),
            build_info=Path(pick(build_info, c.config, "deploy.build_info",
                                 str(_build_dir(c) / "android" / abi / "build-info.json"))),
            binary=_opt_path(pick(binary, c.config, "deploy.binary")),
            app_dir=Path(pick(app, c.config, "deploy.app_dir", pick(None, c.config, "app.out", "build/app"))),
            apk=_opt_path(pick(apk, c.config, "deploy.apk")),
            application_id=pick(None, c.config, "app.application_id"),
            variants=tuple(_split(variant) or pick(None, c.config, "deploy.variants", [])),
            serials=tuple(_split(serial) or pick(None, c.config, "deploy.serials", [])),
            adb_host=str(pick(adb_host, c.config, "deploy.adb_host", "127.0.0.1")),
            adb_port=int(pick(adb_port, c.config, "deploy.adb_port", 0)) or None,
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
            app_wait=float(pick(None, c.config, "deploy.app_wait", 120)),
        )
        result = run_deploy(settings)
    _print_deploy(result)
    if result.failed:
        raise Exit(f"torchdroid deploy: {len(result.failed)} of {len(result.devices)} device(s) had problems "
                   "(see above; the others were deployed)", code=7)


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
        for e in d.errors:
            print("  problem: " + e.replace("\n", "\n    "))
    print(f"device directory: {result.directory}")
    if result.run_id is not None:
        print(f"results: run {result.run_id} in {result.db_path}; "
              + ", ".join(str(p) for p in result.exports.values() if "run-" in p.name))
        print("picture: invoke report")


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
    print("exports: " + ", ".join(str(p) for p in result.exports.values()))


ns = Collection(convert, bench, deploy, report)
ns.configure(DEFAULTS)
