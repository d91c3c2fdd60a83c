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


# --------------------------------------------------------------------------- build-android, check-compat, doctor


@task(
    help={
        "lane": "pin set: current (v2.8.0, default) or seed-2020 (config pytorch.lane)",
        "commit": "build another PyTorch commit (full SHA; lane facts from the nearest preset, with a warning)",
        "repo_url": "PyTorch repository to fetch from (config pytorch.repo_url)",
        "ndk": "Android NDK directory (else config ndk.path, ANDROID_NDK, ANDROID_NDK_HOME, ANDROID_HOME/ndk/*)",
        "abi": "arm64-v8a (default), armeabi-v7a, x86_64 or x86",
        "api_level": "Android API level the binary is built for (default 29, config android.api_level)",
        "python": "host Python for PyTorch's build scripts (config pytorch.python)",
        "max_jobs": "parallel compile jobs (default: all cores, config android.max_jobs)",
        "clean": "start the build over (removes the ABI's CMake tree, build-info and AAR under build/android/<abi>)",
        "aar": "also build the pytorch_android AAR from the same checkout (needs an Android SDK)",
        "cmake_arg": "extra CMake argument for build_android.sh (repeatable)",
        "debug": "show tracebacks",
    },
    iterable=["cmake_arg"],
)
def build_android(c, lane=None, commit=None, repo_url=None, ndk=None, abi=None, api_level=None, python=None,
                  max_jobs=None, clean=False, aar=False, cmake_arg=None, debug=False):
    """PyTorch Mobile (speed_benchmark_torch, static libraries, headers) from a lane's pinned commit, with the NDK."""
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
            api_level=int(pick(api_level, c.config, "android.api_level")),
            max_jobs=int(jobs) if jobs else None,
            clean=bool(clean),
            aar=bool(aar),
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
    print(f"verified: machine {ver.get('machine')}, API level {ver.get('api_level')}")
    for w in result.warnings:
        print(f"warning: {w}")
    print(f"build-info: {result.build_info_path} ({result.seconds:.1f}s; log {result.log_path})")


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
            build_info = _build_dir(c) / "android" / pick(abi, c.config, "android.abi") / "build-info.json"
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
        "debug": "show tracebacks",
    }
)
def doctor(c, strict=False, lane=None, ndk=None, debug=False):
    """What this machine has for every stage, what is missing, and how to get it."""
    with _stage(c, "doctor", debug):
        from ndk_build import DoctorSettings, problems, run_doctor

        port = pick(None, c.config, "deploy.adb_port")
        checks = run_doctor(DoctorSettings(
            lane=pick(lane, c.config, "pytorch.lane"),
            ndk=ndk,
            ndk_config=pick(None, c.config, "ndk.path"),
            sdk=pick(None, c.config, "android.sdk"),
            python=pick(None, c.config, "pytorch.python"),
            adb_host=pick(None, c.config, "deploy.adb_host", "127.0.0.1"),
            adb_port=int(port) if port else None,
        ))
    _table("torchdroid doctor", ["stage", "tool", "status", "found", "fix"],
           [(ch.stage, ch.name, ch.status, ch.found, ch.fix) for ch in checks])
    bad = problems(checks)
    if bad and strict:
        raise Exit(f"torchdroid doctor: {len(bad)} problem(s): " + ", ".join(ch.name for ch in bad), code=1)


ns = Collection(convert, bench, build_android, check_compat, doctor)
ns.configure(DEFAULTS)
