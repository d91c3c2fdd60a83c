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
        raise Exit(f"torchdroid {name}: {e.label}: {e}\n  (run log: {log_path}; --debug shows the traceback)", code=e.exit_code)
    except KeyboardInterrupt:
        raise Exit(f"torchdroid {name}: interrupted (nothing half-written was left under a final name)", code=130)


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


def verify_after_convert(c, models: Path):
    """For `invoke convert`: verify the fresh models when the host NNAPI can be built here (returns None otherwise)."""
    import host_nnapi

    ok, why = host_nnapi.availability()
    if not ok:
        print(f"note: host NNAPI verification skipped: {why}")
        return None
    from host_nnapi.verify import verify as run_verify

    result = run_verify(_verify_settings(c, models=str(models)))
    _print_verify(result)
    return result


ns = Collection(convert, bench, verify)
ns.configure(DEFAULTS)
