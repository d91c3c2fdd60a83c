"""The report as an HTML page beside its PNG: the chart, then the tables people compare.

Plain HTML with inline CSS (opens from disk; one inline line of script marks whether the chart loaded): latency per device × model ×
backend with its spread, cold start and peak memory; CPU vs NNAPI speed-ups; the run's ExecuTorch lines
beside its TorchScript ones; every failed or skipped
row with its reason; the conditions of each device (SoC, governor, thermal, battery, before/after).
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

from toolchain.fsutil import atomic_write_text

from .results import ResultRow, speedups
from .summary import DETAIL_COLUMNS, FORMAT_COLUMNS, FormatsSection, line_cells, section_notes
from .run_weights import is_random

# fits a 1280 px window (issue 24): every table (this module's and the sections' own) is its own horizontal scroll
# container, never the page; text cells (reasons, paths) wrap anywhere, numbers never wrap
_CSS = ("body{font-family:sans-serif;margin:1.5em;color:#222;overflow-wrap:anywhere}"
        "table{border-collapse:collapse;margin:0 0 1.5em;display:block;max-width:100%;overflow-x:auto}"
        "th,td{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:right;vertical-align:top}"
        "th{background:#f0f0f0;overflow-wrap:normal}td{white-space:nowrap}"
        "td.t{text-align:left;white-space:normal;overflow-wrap:break-word}"
        "td.r{overflow-wrap:anywhere;min-width:18em}"
        "tr.failed td{background:#fde8e8}tr.skipped td{background:#f3f3f3}"
        ".warn{color:#b00}img{max-width:100%;border:1px solid #ddd}")
LATENCY_COLUMNS = ["device", "model", "mode", "backend", "source", "status", "median ms", "p90 ms", "min ms",
                   "max ms", "mean ms", "std ms", "spread %", "load ms", "first ms", "warm-up ms", "peak MB",
                   "samples", "flags", "reason"]

PROSE = {"reason", "note", "warnings"}  # columns of sentences: wrapped anywhere, at least 18em wide
GENERATOR = "<meta name='generator' content='torchdroid report'>"  # how report knows a page beside a PNG is its own


def is_report_page(path: Path) -> bool:
    """A page `invoke report` wrote (its generator tag near the top): the only HTML report ever replaces."""
    try:
        with open(path, "rb") as f:
            return GENERATOR.encode() in f.read(4096)
    except OSError:
        return False


def _e(v) -> str:
    return html.escape("" if v is None else str(v))


def _n(v, spec: str = ".2f") -> str:
    return "" if v is None else format(v, spec)


def _table(columns: Sequence[str], rows: Iterable[Sequence[str]], classes: Optional[List[str]] = None,
           text_cols: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    kinds = ['t r' if c in PROSE else 't' for c in columns]  # sentences (reasons) keep a readable width
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        cells = "".join(f'<td class="{kinds[k]}">{_e(v)}</td>' if k in text_cols else f"<td>{_e(v)}</td>"
                        for k, v in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def latency_rows(rows: Sequence[ResultRow]) -> List[List[str]]:
    return [[f"{r.device_model} ({r.serial})", r.stem or "-", r.mode or "-", r.backend or "-", r.source, r.status,
             _n(r.median_ms), _n(r.p90_ms), _n(r.min_ms), _n(r.max_ms), _n(r.mean_ms), _n(r.std_ms),
             _n(r.spread_pct, ".1f"), _n(r.load_ms, ".0f"), _n(r.first_ms), _n(r.warmup_ms),
             _n(r.peak_kb / 1024 if r.peak_kb else None, ".1f"), str(r.samples), r.flags, r.reason] for r in rows]


def _speedup_table(rows: Sequence[ResultRow]) -> str:
    out = [[f"{d['device_model']} ({d['serial']})", d["stem"], d["mode"], d["source"], _n(d["cpu_ms"]),
            _n(d["nnapi_ms"]), "" if d["speedup"] is None else f"{d['speedup']:.2f}x",
            "NNAPI slower" if d["nnapi_slower"] else ""] for d in speedups(rows)]
    return _table(["device", "model", "mode", "source", "CPU ms", "NNAPI ms", "speed-up", "note"], out,
                  text_cols=(0, 1, 2, 3, 7))


# what an empty condition cell means: what deploy read (deploy/environment.py) and got nothing from
UNKNOWN = {
    "soc": "unknown (the phone sets no ro.soc.manufacturer / ro.soc.model)",
    "page_size": "unknown (getconf PAGE_SIZE printed no number)",
    "cpu": "unknown (cpufreq governor and frequency not readable by the shell user)",
    "thermal": "unknown (dumpsys thermalservice gave no thermal status)",
    "hottest": "unknown (no readable thermal zone or sensor)",
    "battery": "unknown (dumpsys battery gave no level)",
}


def _snap(s: Optional[dict], why: str) -> List[str]:
    """CPU, thermal status, hottest sensor, battery of one snapshot; ``unknown (why)`` for what the phone did not say,
    ``unknown (why)`` in all four when the snapshot was not read."""
    if not s:
        return [f"unknown ({why})"] * 4
    temps = s.get("temps_c") or {}
    hottest = max(temps.values()) if temps else None
    gov = "/".join(sorted(s.get("governors") or {}))
    battery = None if s.get("battery_level") is None else f"{s['battery_level']}% {s.get('battery_status') or ''}"
    cur = s.get("cur_khz") or []
    freq = f"{min(cur) / 1e3:.0f}-{max(cur) / 1e3:.0f} MHz" if cur else ""
    return [f"{gov} {freq}".strip() or UNKNOWN["cpu"],
            UNKNOWN["thermal"] if s.get("thermal_status") is None else str(s["thermal_status"]),
            UNKNOWN["hottest"] if hottest is None else _n(hottest, ".1f"),
            UNKNOWN["battery"] if battery is None else battery.strip()]


def _first_line(text: str, n: int = 120) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= n else line[:n - 1] + "…"


def _device_conditions(serial: str, d: Optional[dict], gone: str) -> List[str]:
    """One device's row; ``gone``: why the device failed ("" when it did not)."""
    if d is None:
        why = gone or "not recorded in this run (deploy --no-bench reads no conditions)"
        return [serial, *[f"unknown ({why})"] * 10, "none"]
    also = f"; {gone}" if gone else ""
    return [serial, d.get("soc") or UNKNOWN["soc"],
            str(d["page_size"]) if d.get("page_size") else UNKNOWN["page_size"],
            *_snap(d.get("before"), "not read before the benchmark" + also),
            *_snap(d.get("after"), "not read after the benchmark" + also), "; ".join(d.get("warnings") or []) or "none"]


def _conditions_table(devices: Sequence[dict], rows: Sequence[ResultRow]) -> str:
    """Every device of the run (failed ones too): its conditions, ``unknown`` and why in every cell it lacks."""
    failed = {}
    for r in rows:
        if r.source == "deploy":
            failed.setdefault(r.serial, r.reason)
    known = {d.get("serial", ""): d for d in devices}
    serials = list(known) + [s for s in dict.fromkeys(r.serial for r in rows) if s not in known]
    out = [_device_conditions(serial, known.get(serial),
                              f"device failed: {_first_line(failed[serial])}" if serial in failed else "")
           for serial in serials]
    cols = ["device", "SoC", "page size", "CPU before", "thermal before", "hottest °C before", "battery before",
            "CPU after", "thermal after", "hottest °C after", "battery after", "warnings"]
    return _table(cols, out, text_cols=tuple(range(12)))


def _failures_table(rows: Sequence[ResultRow]) -> str:
    bad = [r for r in rows if r.status != "ok"]
    body = _table(["device", "model", "backend", "source", "status", "reason"],
                  [[f"{r.device_model} ({r.serial})", r.model_file or r.stem or "-", r.backend or "-", r.source,
                    r.status, r.reason] for r in bad], [r.status for r in bad], text_cols=(0, 1, 2, 3, 4, 5))
    return f"<h2 id='failures'>Failed and skipped ({len(bad)})</h2>" + (body if bad else "<p>none</p>")


def _executorch_section(section: Optional[FormatsSection]) -> str:
    """Per device: the run's TorchScript CPU, NNAPI and ExecuTorch lines side by side, in the console's cells
    (deploy/summary.py's line_cells) and the page's two more columns."""
    if section is None:
        return ""
    parts = ["<h2 id='executorch'>ExecuTorch beside TorchScript CPU and NNAPI (speed-up over the legacy CPU model "
             "of the same precision)</h2>"]
    notes = section_notes(section)
    if notes:
        parts.append("<p class='warn'>" + "<br>".join(_e(n) for n in notes) + "</p>")
    if section.present:
        parts.append(f"<p>run {section.run_id}" + (f", with {_e(section.path)}" if section.path else "") + "</p>")
    for t in section.devices:
        parts.append(f"<h3>{_e(t.title)}</h3>" + _table(
            FORMAT_COLUMNS + DETAIL_COLUMNS, [line_cells(x, detail=True) for x in t.rows],
            ["failed" if x.status != "ok" else "" for x in t.rows], text_cols=(0, 1, 6, 8)))  # the console's cells
        parts.append(operator_section(t.serial, t.operators))
    return "".join(parts)


def operator_section(serial: str, entries: Sequence[dict]) -> str:
    """Where the time went on one phone (ExecuTorch's ETDump through its Inspector), per program, or "unknown"."""
    from .etdump import table_of

    if not entries:
        return ""
    parts = [f"<h4 id='operators-{_e(serial)}'>Top operators on {_e(serial)} (ExecuTorch ETDump)</h4>"]
    for entry in entries:
        t = table_of(entry)
        parts.append(f"<p>{_e(t['title'])}</p>")
        if t["rows"]:
            parts.append(_table(t["columns"], t["rows"], text_cols=(0, 1, 2)))
        if t["notes"]:
            parts.append("<p>" + "<br>".join(_e(n) for n in t["notes"]) + "</p>")
    return "".join(parts)


FARM_SCHEMES = ("http://", "https://")  # a row's server that is a device farm's address (deploy --stf), not HOST:PORT


def _farm_section(rows: Sequence[ResultRow]) -> str:
    """The phones each device farm lent (deploy --stf), grouped by farm: farm serial, model, how its rows went."""
    farms: Dict[str, Dict[str, List[ResultRow]]] = {}
    for r in rows:
        if (r.server or "").startswith(FARM_SCHEMES):
            farms.setdefault(r.server, {}).setdefault(r.serial, []).append(r)
    parts = ["<h2 id='farms'>Phones by device farm</h2>"] if farms else []
    for farm, phones in farms.items():
        cells = []
        for serial, rs in phones.items():
            bad = [r for r in rs if r.status != "ok"]
            cells.append([serial, rs[0].device_model, f"{rs[0].release} (SDK {rs[0].sdk})", str(len(rs) - len(bad)),
                          str(len(bad)), _first_line(bad[0].reason) if bad else ""])
        parts.append(f"<h3>{_e(farm)} ({len(phones)} phone(s))</h3>" + _table(
            ["phone (farm serial)", "model", "Android", "ok rows", "failed or skipped", "reason"], cells,
            ["failed" if c[4] != "0" else "" for c in cells], text_cols=(0, 1, 2, 5)))
    return "".join(parts)


def _weights(line: str) -> str:
    """Which weights the models had: in warning colour when random (every answer of the run means nothing)."""
    if not line:
        return ""
    return f"<p id='weights' class='{'warn' if is_random(line) else 'info'}'>{_e(line)}</p>"


def render(png: Path, html_path: Path, title: str, rows: Sequence[ResultRow], devices: Sequence[dict],
           executorch: Optional[FormatsSection] = None, notes: Sequence[str] = (), numerics: str = "",
           hardware: str = "", overview: str = "", weights: str = "") -> str:
    img = os.path.relpath(png, html_path.parent)
    throttled = [d for d in devices if d.get("warnings")]
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'>{GENERATOR}<title>{_e(title)}</title><style>{_CSS}</style>"
             f"</head><body><h1>{_e(title)}</h1>",
             _weights(weights),
             f"<p><img id='chart' src='{_e(img)}' alt='latency and NNAPI speed-up chart'></p>", overview,
             _farm_section(rows)]
    if any(r.has_flag("nnapi-deprecated") for r in rows):
        parts.append("<p class='warn'>NNAPI rows flagged nnapi-deprecated come from Android 15+ (SDK 35+) devices: "
                     "NNAPI is deprecated there and the numbers may come from a CPU fallback driver, not an "
                     "accelerator.</p>")
    if throttled:
        parts.append("<p class='warn'>" + "<br>".join(_e(f"{d['serial']}: {w}") for d in throttled
                                                       for w in d["warnings"]) + "</p>")
    parts.append("<h2>Latency per device, model and backend</h2>")
    parts.append(_table(LATENCY_COLUMNS, latency_rows(rows), [r.status if r.status != "ok" else "" for r in rows],
                        text_cols=(0, 1, 2, 3, 4, 5, 18, 19)))
    parts.append("<h2>NNAPI speed-up over CPU</h2>" + _speedup_table(rows))
    if notes:  # what the CPU-vs-NNAPI comparisons must say (CPU models not optimised for mobile...)
        parts.append("<p class='warn' id='cpu-baseline'>" + "<br>".join(_e(n) for n in notes) + "</p>")
    parts.append(hardware)  # which hardware NNAPI chose (deploy/hardware_report.py)
    parts.append(numerics)  # is each phone's answer right (deploy/numerics_report.py)
    parts.append(_executorch_section(executorch))
    parts.append(_failures_table(rows))
    parts.append("<h2 id='conditions'>Device conditions</h2>" + _conditions_table(devices, rows))
    # the page says whether the browser could show the chart (a broken image has naturalWidth 0)
    parts.append("<script>window.addEventListener('load', function () { var c = document.getElementById('chart'); "
                 "document.body.setAttribute('data-chart-width', String(c.naturalWidth)); });</script>")
    parts.append("</body></html>\n")
    return "".join(parts)


def write_html(html_path: Path, png: Path, title: str, rows: Sequence[ResultRow], devices: Sequence[dict],
               executorch: Optional[FormatsSection] = None, notes: Sequence[str] = (), numerics: str = "",
               hardware: str = "", overview: str = "", weights: str = "") -> Path:
    return atomic_write_text(html_path, render(png, html_path, title, rows, devices, executorch, notes, numerics,
                                               hardware, overview, weights))
