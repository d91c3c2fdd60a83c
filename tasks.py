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


ns = Collection(convert, bench)
ns.configure(DEFAULTS)
