"""Result rows from what a device did: a model's benchmark, the in-app benchmark, a device that failed."""

from __future__ import annotations

from typing import Optional

from toolchain.records import ModelFile, ResultRow

from .app_bench import AppBench
from .bench import BenchOptions, ModelBench
from .plan import DeployPlan
from .preflight import DeviceFacts


def _device(facts: Optional[DeviceFacts], serial: str = "") -> dict:
    if facts is None:
        return dict(serial=serial, device_model="?", board="?", release="?", sdk=0)
    return dict(serial=facts.serial, device_model=facts.model, board=facts.board, release=facts.release, sdk=facts.sdk)


def _flags(*pairs) -> str:
    return ",".join(name for name, on in pairs if on)


def model_row(facts: DeviceFacts, plan: DeployPlan, m: ModelFile, status: str, opts: BenchOptions,
              bench: Optional[ModelBench] = None, reason: str = "") -> ResultRow:
    """A row for one converted model run by speed_benchmark_torch (``bench``), or skipped (``reason``)."""
    stats = bench.stats if bench else None
    cold = bench.cold if bench else None
    if bench is not None:
        status = "ok" if stats is not None else "failed"
        reason = bench.problem or (cold.problem if cold and cold.problem else "") or ""
        if stats is None and not reason:
            reason = "no latency measured"
    notes = [reason] if reason else []
    if stats is not None and stats.unstable:
        notes.append(stats.variance_note())
    nnapi_old = m.backend == "nnapi" and facts.nnapi_deprecated
    if nnapi_old and status == "ok":
        notes.append(facts.nnapi_note())
    tail = ""
    if bench is not None and stats is None:
        tail = "\n".join("\n".join(bench.outputs).splitlines()[-15:])
    return ResultRow(
        **_device(facts), abi=plan.binary.abi if plan.binary else "", stem=m.stem, variant=m.variant, mode=m.mode,
        backend=m.backend, source="binary", status=status, model_file=m.file,
        median_ms=stats.median_ms if stats else None, p90_ms=stats.p90_ms if stats else None,
        min_ms=stats.min_ms if stats else None, spread_pct=stats.spread_pct if stats else None,
        samples=stats.samples if stats else 0, repeats=stats.runs if stats else len(bench.runs) if bench else 0,
        iters=opts.iters, warmup=opts.warmup, torch_commit=m.torch_git_version or "", binary_commit=plan.commit,
        reason="; ".join(notes), output_tail=tail,
        mean_ms=stats.mean_ms if stats else None, std_ms=stats.std_ms if stats else None,
        max_ms=stats.max_ms if stats else None, load_ms=cold.load_ms if cold else None,
        first_ms=cold.first_ms if cold else None, warmup_ms=cold.warmup_ms if cold else None,
        peak_kb=(stats.peak_kb if stats else None) or (cold.peak_kb if cold else None),
        flags=_flags(("unstable", stats is not None and stats.unstable), ("nnapi-deprecated", nnapi_old)),
    )


def app_row(facts: DeviceFacts, plan: DeployPlan, ab: AppBench, opts: BenchOptions) -> ResultRow:
    """A row for the in-app benchmark of one backend; the variant is the app's own (its line, else its plan)."""
    app = plan.app
    rec = ab.record or {}
    variant = str(rec.get("variant") or app.variant)
    mode = variant.split("quant_")[-1] if "quant_" in variant else variant
    median = rec.get("median_ms")
    ok = ab.record is not None and not ab.problem and isinstance(median, (int, float)) and median > 0
    fell_back = bool(rec.get("fell_back"))
    notes = [ab.problem or ("" if ok else "the app reported no latency")]
    if fell_back:
        notes.append("NNAPI fell back to CPU in the app" + (f": {rec['fallback_reason']}" if rec.get("fallback_reason")
                                                              else ""))
    nnapi_old = ab.backend == "nnapi" and facts.nnapi_deprecated
    if nnapi_old and ok:
        notes.append(facts.nnapi_note())
    iters = int(rec.get("iters") or opts.iters)
    return ResultRow(
        **_device(facts), abi="", stem=app.stem, variant=variant, mode=mode, backend=ab.backend, source="app",
        status="ok" if ok else "failed", model_file=f"{app.package} (app)",
        median_ms=median if ok else None, p90_ms=rec.get("p90_ms") if ok else None,
        min_ms=rec.get("min_ms") if ok else None, samples=iters if ok else 0, repeats=1 if ok else 0,
        iters=iters, warmup=int(rec.get("warmup") or opts.warmup), binary_commit=plan.commit,
        reason="; ".join(n for n in notes if n), mean_ms=rec.get("mean_ms") if ok else None,
        max_ms=rec.get("max_ms") if ok else None, std_ms=rec.get("std_ms") if ok else None,
        flags=_flags(("fell-back", fell_back), ("nnapi-deprecated", nnapi_old)),
    )


def failed_device_row(serial: str, facts: Optional[DeviceFacts], reason: str) -> ResultRow:
    return ResultRow(**_device(facts, serial), abi="", stem="", variant="", mode="", backend="", source="device",
                     status="failed", model_file="", reason=reason)
