"""Result rows from what a device did: a model's benchmark, an ExecuTorch program's, the in-app benchmark, a device
that failed."""

from __future__ import annotations

from typing import Optional

from toolchain.records import PteFile
from toolchain.records import ModelFile, ResultRow

from .app_bench import AppBench
from .bench import BenchOptions, BenchStats, ModelBench
from .plan import BinaryPlan, DeployPlan
from .preflight import DeviceFacts


def _device(facts: Optional[DeviceFacts], serial: str = "") -> dict:
    if facts is None:
        return dict(serial=serial, device_model="?", board="?", release="?", sdk=0)
    return dict(serial=facts.serial, device_model=facts.model, board=facts.board, release=facts.release, sdk=facts.sdk)


def _flags(*pairs) -> str:
    return ",".join(name for name, on in pairs if on)


_STAT_FIELDS = ("median_ms", "p90_ms", "min_ms", "spread_pct", "mean_ms", "std_ms", "max_ms")
_COLD_FIELDS = ("load_ms", "first_ms", "warmup_ms")


def _numbers(bench: Optional[ModelBench]) -> dict:
    """The statistics and cold-start numbers of a benchmark (empty for a model that was not run)."""
    stats = bench.stats if bench else None
    cold = bench.cold if bench else None
    out = {k: getattr(stats, k) for k in _STAT_FIELDS} if stats else {}
    out.update({k: getattr(cold, k) for k in _COLD_FIELDS} if cold else {})
    peaks = [p for p in (stats.peak_kb if stats else None, cold.peak_kb if cold else None) if p]
    out["peak_kb"] = max(peaks) if peaks else None
    out["samples"] = stats.samples if stats else 0
    out["repeats"] = stats.runs if stats else (len(bench.runs) if bench else 0)
    return out


def _bench_outcome(bench: ModelBench) -> tuple:
    """``(status, reason, output tail)`` of a model's benchmark."""
    stats = bench.stats
    cold_problem = bench.cold.problem if bench.cold else None
    reason = bench.problem or cold_problem or ("" if stats else "no latency measured")
    if stats is not None:
        return "ok", reason, ""
    return "failed", reason, "\n".join("\n".join(bench.outputs).splitlines()[-15:])


def model_row(facts: DeviceFacts, plan: DeployPlan, m: ModelFile, status: str, opts: BenchOptions,
              bench: Optional[ModelBench] = None, reason: str = "") -> ResultRow:
    """A row for one converted model run by speed_benchmark_torch (``bench``), or skipped (``reason``)."""
    tail = ""
    if bench is not None:
        status, reason, tail = _bench_outcome(bench)
    stats = bench.stats if bench else None
    unstable = stats is not None and stats.unstable
    nnapi_old = m.backend == "nnapi" and facts.nnapi_deprecated
    notes = [reason, stats.variance_note() if unstable else "",
             facts.nnapi_note() if nnapi_old and status == "ok" else ""]
    return ResultRow(
        **_device(facts), abi=plan.binary.abi if plan.binary else "", stem=m.stem, variant=m.variant, mode=m.mode,
        backend=m.backend, source="binary", status=status, model_file=m.file, iters=opts.iters, warmup=opts.warmup,
        torch_commit=m.torch_git_version or "", binary_commit=plan.commit, reason="; ".join(n for n in notes if n),
        output_tail=tail, flags=_flags(("unstable", unstable), ("nnapi-deprecated", nnapi_old)), **_numbers(bench))


def program_row(facts: DeviceFacts, runner: BinaryPlan, f: PteFile, stats: Optional[BenchStats], failure: str,
                opts: BenchOptions, traced: bool = False) -> ResultRow:
    """A row for one ExecuTorch program run by executor_runner: its statistics, or failed with ``failure``.  Its
    mode is the TorchScript mode it is compared with (fp32: none, int8: full); ``traced``: the latencies came from
    a runner with the event tracer (flag ``traced``)."""
    status = "ok" if stats is not None and not failure else "failed"
    unstable = status == "ok" and stats.unstable
    numbers = {k: getattr(stats, k) for k in _STAT_FIELDS} if status == "ok" else {}
    return ResultRow(
        **_device(facts), abi=runner.abi, stem=f.stem, variant=f.variant, mode=f.baseline.split("quant_")[-1],
        backend=f.delegate, source="binary", status=status, model_file=f.file, iters=opts.iters, warmup=opts.warmup,
        torch_commit=str(f.torch.get("git_version") or ""), binary_commit=runner.commit,
        reason=failure or (stats.variance_note() if unstable else "") or ("" if stats else "no latency measured"),
        samples=stats.samples if numbers else 0, repeats=stats.runs if numbers else 0,
        flags=_flags(("unstable", unstable), ("traced", traced)), format="executorch", **numbers)


def _app_numbers(rec: dict, ok: bool) -> dict:
    keys = ("median_ms", "p90_ms", "min_ms", "mean_ms", "max_ms", "std_ms")
    return {k: rec.get(k) for k in keys} if ok else {}


def _app_notes(ab: AppBench, rec: dict, ok: bool, deprecated_note: Optional[str]) -> str:
    notes = [ab.problem or ("" if ok else "the app reported no latency")]
    if rec.get("fell_back"):
        why = rec.get("fallback_reason")
        notes.append("NNAPI fell back to CPU in the app" + (f": {why}" if why else ""))
    if ok and deprecated_note:
        notes.append(deprecated_note)
    return "; ".join(n for n in notes if n)


def app_row(facts: DeviceFacts, plan: DeployPlan, ab: AppBench, opts: BenchOptions,
            status: Optional[str] = None) -> ResultRow:
    """A row for the in-app benchmark of one backend; the variant is the app's own (its line, else its plan).
    ``status="skipped"``: the benchmark was not run, ``ab.problem`` says why."""
    app = plan.app
    rec = ab.record or {}
    variant = str(rec.get("variant") or app.variant)
    median = rec.get("median_ms")
    ok = ab.record is not None and not ab.problem and isinstance(median, (int, float)) and median > 0
    status = status or ("ok" if ok else "failed")
    nnapi_old = ab.backend == "nnapi" and facts.nnapi_deprecated
    iters = int(rec.get("iters") or opts.iters)
    return ResultRow(
        **_device(facts), abi="", stem=app.stem, variant=variant, mode=variant.split("quant_")[-1], backend=ab.backend,
        source="app", status=status, model_file=f"{app.package} (app)",
        samples=iters if ok else 0, repeats=int(ok), iters=iters, warmup=int(rec.get("warmup") or opts.warmup),
        binary_commit=plan.commit, reason=_app_notes(ab, rec, ok, facts.nnapi_note() if nnapi_old else None),
        flags=_flags(("fell-back", bool(rec.get("fell_back"))), ("nnapi-deprecated", nnapi_old)),
        **_app_numbers(rec, ok))


def failed_device_row(serial: str, facts: Optional[DeviceFacts], reason: str, server: str = "") -> ResultRow:
    """A device (or adb server) the run could not work on: ``source = deploy``, the whole reason."""
    return ResultRow(**_device(facts, serial), abi="", stem="", variant="", mode="", backend="", source="deploy",
                     status="failed", model_file="", reason=reason, server=server)
