"""``invoke report``: latency per device × model × backend with its spread, the NNAPI speed-up, failed and
skipped rows with their reason; a PNG and an HTML page (charts and tables) beside it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from toolchain.errors import RecordError, UsageError
from toolchain.fsutil import atomic_path, check_removable

from toolchain.hardware_records import Placement
from toolchain.numerics_records import NumericsVerdict
from toolchain.records import DeployResults, deploy_results_path

from . import hardware_report, numerics_report, phone_overview
from .executorch import runtime_notes
from .plan import baseline_notes
from .report_html import is_report_page, write_html
from .results import DB_NAME, ResultRow, ResultStore, export_again, run_document, speedups
from .summary import FormatsSection, formats_section
from .run_weights import is_random, weights_line

log = logging.getLogger(__name__)

MODE_ORDER = {"none": 0, "core": 1, "full": 2}
COLORS = {"cpu": "#4c72b0", "nnapi": "#dd8452"}
FASTER, SLOWER = "#55a868", "#c44e52"  # speed-up bars
FORMAT_BARS = {"executorch": ("#55a868", "ExecuTorch"), "torchscript": ("#dd8452", "NNAPI (legacy)")}  # not CPU: 1x
SOURCES = ("binary", "app")


@dataclass(frozen=True)
class ReportSettings:
    results: Path
    run_id: Optional[int] = None  # None: the latest run
    out: Optional[Path] = None  # PNG path; default <results>/report-run-NNNN.png (the HTML goes beside it)
    source: str = "binary"  # binary | app


@dataclass
class ReportResult:
    png: Path
    html: Path
    run_id: int
    rows: List[ResultRow]
    exports: Dict[str, Path]
    executorch: Optional[FormatsSection] = None  # the run's ExecuTorch rows beside its TorchScript ones (or how)
    notes: List[str] = field(default_factory=list)  # what the CPU comparisons must say (unoptimised CPU models)
    numerics: List[NumericsVerdict] = field(default_factory=list)  # is each phone's answer right: models, programs
    numerics_note: str = ""  # why some are missing (a run without the check)
    labels: Dict[str, str] = field(default_factory=dict)  # serial -> "Model (serial)"
    hardware: List[Placement] = field(default_factory=list)  # which hardware NNAPI chose per phone and model
    hardware_note: str = ""  # why there are none
    phones: List[phone_overview.PhoneOverview] = field(default_factory=list)  # each phone at a glance
    weights: str = ""  # "weights: mobilenetv2: random (...) (from <manifest>)", or unknown and why


def _chosen(s: ReportSettings, rows: List[ResultRow], run_id: int, programs: int = 0) -> List[ResultRow]:
    """The TorchScript rows to draw: the chosen source's benchmarks and the devices that failed before any (none in a
    run of ExecuTorch ``programs`` only: its section has them)."""
    chosen = [r for r in rows if r.source == s.source]
    failed_devices = [r for r in rows if r.source == "deploy"]
    if not chosen and not failed_devices and not (programs and s.source == "binary"):
        other = sorted({r.source for r in rows} - {s.source})
        raise RecordError(f"run {run_id} has no {s.source} benchmarks to draw",
                          remedy=(f"draw the {other[0]} benchmark with --source {other[0]}, or " if other else "")
                          + "pick another run with --run")
    return chosen + failed_devices


def _png_path(s: ReportSettings, run_id: int) -> Path:
    """Where the chart goes; refuses to overwrite a file report did not write."""
    png = Path(s.out) if s.out else Path(s.results) / f"report-run-{run_id:04d}.png"
    if png.suffix.lower() == ".html":  # the page goes beside the picture, under the picture's name + .html
        raise UsageError(f"report --out {png} names a page, but --out is the picture (PNG)",
                         cause=f"the page is written beside the picture as <name>.html: it would overwrite {png.name}",
                         remedy=f"pass --out {png.with_suffix('.png')} (the page is then {png.with_suffix('.html')})")
    # the page beside the PNG was not named by the user: it is replaced only when report wrote it
    check_removable(png.with_suffix(".html"), f"the report page beside {png.name}", verb="overwrite",
                    ours=lambda page: s.out is None or is_report_page(page))  # default: the results dir's own name
    check_removable(png, "report --out", named=True, verb="overwrite")
    return png


def make_report(s: ReportSettings) -> ReportResult:
    if s.source not in SOURCES:
        raise RecordError(f"unknown report source {s.source!r}", remedy="use --source binary or --source app")
    store = ResultStore(Path(s.results) / DB_NAME)
    every = store.rows(s.run_id)  # every format's
    run_id = every[0].run_id
    rows = [r for r in every if r.format == "torchscript"]
    drawn = _chosen(s, rows, run_id, len(every) - len(rows))
    notes = baseline_notes(store.settings(run_id).get("models"), rows)
    doc, unreadable = _run_document(Path(s.results), run_id, notes)
    facts = doc.executorch if doc else {}
    pte = formats_section(Path(s.results), every, facts, deploy_results_path(Path(s.results), f"run-{run_id:04d}"))
    if pte.present and facts.get("build_info"):  # in-app ExecuTorch numbers: are the app and the runner one runtime
        pte.notes.extend(runtime_notes(str(facts["build_info"]), every, store.settings(run_id)))
    png = _png_path(s, run_id)
    title = f"torchdroid run {run_id} ({every[0].started}), {s.source} benchmark"
    weights = weights_line(store.settings(run_id).get("models"), every, every[0].started)
    draw(drawn, png, title=title, executorch=pte, weights=weights)
    verdicts, why = numerics_report.of_run(doc, unreadable)  # one list: the run's models' and programs' verdicts
    labels = {r.serial: f"{r.device_model} ({r.serial})" if r.device_model else r.serial for r in rows}
    placements, hw_why = hardware_report.of_run(doc, unreadable)
    phones = phone_overview.overview(drawn, placements, verdicts, labels,
                                     {d.serial: d.operators for d in pte.devices} if pte else None)
    html = write_html(png.with_suffix(".html"), png, title, rows, store.devices(run_id), pte, notes,
                      numerics_report.html_section(verdicts, labels, why),
                      hardware_report.html_section(placements, labels, hw_why), phone_overview.html_section(phones),
                      weights)
    exports = export_again(every, Path(s.results), run_id, store.devices(run_id), doc, unreadable)
    return ReportResult(png, html, run_id, rows, exports, pte, notes, verdicts, why, labels, placements, hw_why,
                        phones, weights)


def _run_document(results: Path, run_id: int, notes: List[str]) -> Tuple[Optional[DeployResults], str]:
    """The run's document, or None and what the numerics and hardware sections say instead (why it cannot be read
    and what remakes it goes into ``notes``, once)."""
    doc, why = run_document(results, run_id)
    if doc is None and not why:  # the store has the run, deploy wrote its document: it was moved or deleted
        why = (f"run-{run_id:04d}.json is missing from {results} (moved or deleted): the numerics and hardware "
               f"checks of run {run_id} cannot be shown; put it back, or run `invoke deploy` again for a new run")
    if not why:
        return doc, ""
    notes.append(why)
    return None, f"run-{run_id:04d}.json cannot be read (see its note)"


def _groups(rows: List[ResultRow]) -> list:
    return sorted({(r.serial, r.device_model, r.stem, r.mode) for r in rows if r.backend},
                  key=lambda g: (g[0], g[2], MODE_ORDER.get(g[3], 9)))


def _short(reason: str, n: int = 28) -> str:
    text = reason.split(";")[0].strip()
    return text if len(text) <= n else text[:n - 1] + "…"


FLAG_MARK = "⚠"
FLAG_LEGEND = f"{FLAG_MARK} after a number: flagged (the page's flags column says which)"


def _no_measurement(ax, pos: float, text: str, color: str = "#555555") -> None:
    """Words where a bar would be, from the panel's floor (axes coordinates: no height that reads as ms)."""
    ax.text(pos, 0.02, text, transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=7, rotation=90,
            color=color)


def _bar(ax, r: ResultRow, pos: float, width: float, label: Optional[str]) -> None:
    """One latency bar with its min..p90 whisker, or no bar and the words "no measurement" with the reason."""
    if r.status != "ok":
        _no_measurement(ax, pos, f"no measurement\n{r.status}: {_short(r.reason, 48)}",
                        "#c44e52" if r.status == "failed" else "#555555")
        return
    low = max(0.0, r.median_ms - (r.min_ms or r.median_ms))
    high = max(0.0, (r.p90_ms or r.median_ms) - r.median_ms)
    ax.bar(pos, r.median_ms, width, yerr=[[low], [high]], capsize=3, color=COLORS[r.backend], label=label)
    ax.annotate(f"{r.median_ms:.1f}{' ' + FLAG_MARK if r.flags else ''}", (pos, r.median_ms + high), ha="center",
                va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")


def _latency_panel(ax, rows: List[ResultRow], groups: list, title: str) -> None:
    from matplotlib.patches import Patch

    index = {(r.serial, r.stem, r.mode, r.backend): r for r in rows}
    width = 0.38
    for k, backend in enumerate(("cpu", "nnapi")):
        labelled = False
        for x, (serial, _model, stem, mode) in enumerate(groups):
            r = index.get((serial, stem, mode, backend))
            if r is not None:
                first_ok = r.status == "ok" and not labelled
                labelled = labelled or first_ok
                _bar(ax, r, x + (k - 0.5) * width, width,
                     f"{backend.upper()} median (whisker: min..p90)" if first_ok else None)
    ax.set_ylabel("latency per inference (ms)")
    measured = [r for r in rows if r.backend and r.status == "ok"]
    if not measured:  # nothing to scale: no millisecond axis that could be read as a measurement
        ax.set_yticks([])
        title += "\nno measurement: every benchmark of this run failed or was skipped"
    ax.set_title(title)
    handles, _ = ax.get_legend_handles_labels()
    if any(r.flags for r in measured):
        handles.append(Patch(facecolor="none", edgecolor="none", label=FLAG_LEGEND))
    if handles:
        ax.legend(handles=handles, fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def _speedup_panel(ax, rows: List[ResultRow], groups: list) -> None:
    from matplotlib.patches import Patch

    sp_index = {(d["serial"], d["stem"], d["mode"]): d["speedup"] for d in speedups(rows)}
    xs = list(range(len(groups)))
    drawn = set()
    for x, (serial, _m, stem, mode) in zip(xs, groups):
        v = sp_index.get((serial, stem, mode))
        if v is None:
            _no_measurement(ax, x, "no speed-up:\nno ok CPU and NNAPI pair")
            continue
        drawn.add(v >= 1)
        ax.bar(x, v, 0.6, color=FASTER if v >= 1 else SLOWER)
        ax.annotate(f"{v:.2f}x", (x, v), ha="center", va="bottom", fontsize=9, xytext=(0, 2), textcoords="offset points")
    ax.set_ylabel("NNAPI speed-up over CPU (x)")
    ax.grid(axis="y", alpha=0.3)
    if not drawn:  # no ratio to read: no scale, no 1x line
        ax.set_yticks([])
        return
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    handles = [Patch(color=FASTER, label="NNAPI faster than CPU")] if True in drawn else []
    handles += [Patch(color=SLOWER, label="NNAPI slower than CPU")] if False in drawn else []
    _legend(ax, handles, 8)


def _legend(ax, handles: list, fontsize: int) -> None:
    """A speed-up panel's legend: its bars' colours and the dashed 1x line; its grid."""
    from matplotlib.lines import Line2D

    ax.legend(handles=handles + [Line2D([], [], color="black", linewidth=1, linestyle="--", label="1x: same speed")],
              fontsize=fontsize)
    ax.grid(axis="y", alpha=0.3)


def _line_bar(ax, r, pos: float, width: float) -> None:
    """One NNAPI / ExecuTorch line: its speed-up bar, or why it has none."""
    if r.speedup_vs_cpu is None:
        ax.annotate(f"{r.runtime}: {r.status if r.status != 'ok' else 'no CPU baseline'}", (pos, 1.0), ha="center",
                    va="bottom", fontsize=6, rotation=90, color="#555555")
        return
    ax.bar(pos, r.speedup_vs_cpu, width * 0.9, color=FORMAT_BARS[r.format][0])
    label = r.runtime.replace("ExecuTorch ", "").replace(" ", "\n")
    ax.annotate(f"{label}\n{r.speedup_vs_cpu:.2f}x", (pos, r.speedup_vs_cpu),
                ha="center", va="bottom", fontsize=6, xytext=(0, 2), textcoords="offset points")


def _line_bars(ax, section: FormatsSection) -> List[list]:
    """Per device its NNAPI and ExecuTorch lines' bars side by side (the CPU lines are the 1x); the lines drawn."""
    per_device = [[r for r in t.rows if r.backend != "cpu"] for t in section.devices]
    width = 0.8 / max(1, max(len(lines) for lines in per_device))
    for x, lines in enumerate(per_device):
        for k, r in enumerate(lines):
            _line_bar(ax, r, x - 0.4 + width * (k + 0.5), width)
    return per_device


def _formats_panel(ax, section: FormatsSection) -> None:
    """Per device, each NNAPI / ExecuTorch line's speed-up over the legacy CPU model of its precision."""
    from matplotlib.patches import Patch

    per_device = _line_bars(ax, section)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    if max([r.speedup_vs_cpu or 0 for lines in per_device for r in lines] or [1.0]) > 10:
        ax.set_yscale("log")  # one bar 100x the others would flatten them: a log scale keeps every ratio readable
    ax.set_xticks(list(range(len(section.devices))), [t.title.replace(": ", "\n", 1) for t in section.devices],
                  fontsize=8)
    ax.margins(y=0.2)  # room for the labels above the tallest bar
    ax.set_ylabel("speed-up over legacy CPU (x)\n(same precision)")
    ax.set_title(f"ExecuTorch and NNAPI per device, run {section.run_id}", fontsize=9)
    drawn = {r.format for lines in per_device for r in lines if r.speedup_vs_cpu is not None}
    _legend(ax, [Patch(color=c, label=name) for f, (c, name) in FORMAT_BARS.items() if f in drawn], 7)


def _wrapped(text: str, fig_width_in: float, fontsize: float) -> str:
    """``text`` broken into lines that fit the figure's width (an average glyph is about 0.6 em wide)."""
    import textwrap

    chars = max(40, int(fig_width_in * 72 / (fontsize * 0.6)) - 4)
    return "\n".join(textwrap.fill(line, chars, break_long_words=True) for line in text.splitlines())


def draw(rows: List[ResultRow], png: Path, title: str, executorch: Optional[FormatsSection] = None,
         weights: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _groups(rows)
    failed_devices = [r for r in rows if r.source == "deploy"]
    labels = [f"{model}\n{serial}\n{stem} {mode}" for serial, model, stem, mode in groups]
    with_pte = executorch is not None and bool(executorch.devices)
    size = (max(7.0, 1.3 * len(groups) + 2), 12.5 if with_pte else 8.5)
    fig, axes = plt.subplots(3 if with_pte else 2, 1, figsize=size, constrained_layout=True)
    _latency_panel(axes[0], rows, groups, title)
    _speedup_panel(axes[1], rows, groups)
    for ax in axes[:2]:
        ax.set_xticks(list(range(len(groups))), labels, fontsize=8)
        ax.set_xlim(-0.5, max(1, len(groups)) - 0.5)  # both panels: one slot per group, bar or no bar
        ax.margins(y=0.12)  # room for the numbers above the tallest bar
    if with_pte:
        _formats_panel(axes[2], executorch)
    if weights:  # above everything: random weights make every answer meaningless
        fig.suptitle(_wrapped(weights, size[0], 8), fontsize=8, x=0.01, ha="left",
                     color="#c44e52" if is_random(weights) else "#222222")
    if failed_devices:  # below the axes: constrained layout keeps the figure's own labels clear of the tick labels
        # what failed, whole (a reason's first line); its cause and fix are too long to cut: the page has them
        fig.supxlabel(_wrapped("failed devices (no measurement): " + "\n".join(
            f"{r.serial}: {(r.reason.strip().splitlines() or [''])[0]}" for r in failed_devices)
            + f"\n(cause and fix of each: {png.with_suffix('.html').name}#failures and the console of invoke report)",
            size[0], 7), fontsize=7, x=0.01, ha="left", color="#c44e52")
    with atomic_path(png, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
    log.info("report: %s", png)
    return png
