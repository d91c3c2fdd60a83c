"""``invoke report``: a PNG of latency and CPU-vs-NNAPI speed-up per device and mode."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from toolchain.errors import RecordError
from toolchain.fsutil import atomic_path

from .results import DB_NAME, ResultRow, ResultStore, export, speedups

log = logging.getLogger(__name__)

MODE_ORDER = {"none": 0, "core": 1, "full": 2}
COLORS = {"cpu": "#4c72b0", "nnapi": "#dd8452"}


@dataclass(frozen=True)
class ReportSettings:
    results: Path
    run_id: Optional[int] = None  # None: the latest run
    out: Optional[Path] = None  # PNG path; default <results>/report-run-NNNN.png
    source: str = "binary"  # binary | app


@dataclass
class ReportResult:
    png: Path
    run_id: int
    rows: List[ResultRow]
    exports: Dict[str, Path]


def make_report(s: ReportSettings) -> ReportResult:
    store = ResultStore(Path(s.results) / DB_NAME)
    rows = store.rows(s.run_id)
    run_id = rows[0].run_id
    chosen = [r for r in rows if r.source == s.source]
    if not any(r.status == "ok" for r in chosen):
        raise RecordError(f"run {run_id} has no successful {s.source} benchmarks to draw",
                          remedy="look at the table of `invoke deploy` for why they failed, or pick "
                                 "another run with --run")
    png = Path(s.out) if s.out else Path(s.results) / f"report-run-{run_id:04d}.png"
    draw(chosen, png, title=f"torchdroid run {run_id} ({rows[0].started}), {s.source} benchmark")
    exports = export(rows, Path(s.results), f"run-{run_id:04d}")
    return ReportResult(png, run_id, rows, exports)


def draw(rows: List[ResultRow], png: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r.serial, r.device_model, r.stem, r.mode) for r in rows},
                    key=lambda g: (g[0], g[2], MODE_ORDER.get(g[3], 9)))
    index = {(r.serial, r.stem, r.mode, r.backend): r for r in rows if r.status == "ok"}
    labels = [f"{model}\n{serial}\n{stem} {mode}" for serial, model, stem, mode in groups]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(7.0, 1.3 * len(groups) + 2), 8.5), constrained_layout=True)
    width = 0.38
    xs = list(range(len(groups)))
    for k, backend in enumerate(("cpu", "nnapi")):
        vals, errs = [], []
        for serial, _model, stem, mode in groups:
            r = index.get((serial, stem, mode, backend))
            vals.append(r.median_ms if r else 0.0)
            errs.append(max(0.0, (r.p90_ms or r.median_ms) - r.median_ms) if r else 0.0)
        pos = [x + (k - 0.5) * width for x in xs]
        bars = ax1.bar(pos, vals, width, yerr=[[0] * len(errs), errs], capsize=3, color=COLORS[backend],
                       label=f"{backend.upper()} median (whisker: p90)")
        for b, v, e in zip(bars, vals, errs):
            ax1.annotate("n/a" if v == 0 else f"{v:.1f}", (b.get_x() + b.get_width() / 2, v + e),
                         ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    ax1.set_ylabel("latency per inference (ms)")
    ax1.set_xticks(xs, labels, fontsize=8)
    ax1.set_title(title)
    ax1.legend(fontsize=8)
    ax1.grid(axis="y", alpha=0.3)

    sp_index = {(d["serial"], d["stem"], d["mode"]): d["speedup"] for d in speedups(rows)}
    sps = [sp_index.get((serial, stem, mode)) for serial, _m, stem, mode in groups]
    colors = ["#55a868" if (v or 0) >= 1 else "#c44e52" for v in sps]
    bars = ax2.bar(xs, [v or 0 for v in sps], 0.6, color=colors)
    for b, v in zip(bars, sps):
        ax2.annotate("n/a" if v is None else f"{v:.2f}x", (b.get_x() + b.get_width() / 2, v or 0),
                     ha="center", va="bottom", fontsize=9, xytext=(0, 2), textcoords="offset points")
    ax2.axhline(1.0, color="black", linewidth=1, linestyle="--")
    ax2.set_ylabel("NNAPI speed-up over CPU (x)\n(>1: NNAPI faster, red: slower)")
    ax2.set_xticks(xs, labels, fontsize=8)
    ax2.grid(axis="y", alpha=0.3)
    with atomic_path(png, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    log.info("report: %s", png)
    return png
