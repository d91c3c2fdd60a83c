"""One page per run, phone by phone (issue 23 item 4): for each phone of the run, each model's latency (CPU and
NNAPI), which hardware NNAPI chose, whether the phone's answers agree with the host's, and the top ExecuTorch
operators of deploy-executorch's ETDump.  Built from the records the other sections show; a cell the phone did not
fill says ``unknown`` (no hardware log, no numerics check) or ``-`` (not run)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from toolchain.hardware_records import Placement
from toolchain.numerics_records import NumericsVerdict

from .hardware_report import MODE_NAMES, _chosen
from .results import ResultRow, speedups

COLUMNS = ["model", "CPU ms", "NNAPI ms", "speed-up", "NNAPI ran on", "answer CPU", "answer NNAPI"]


@dataclass
class PhoneOverview:
    serial: str
    label: str
    rows: List[List[str]] = field(default_factory=list)
    top_operators: List[str] = field(default_factory=list)  # "program: operator 0.123 ms (61%)"
    problem: str = ""  # the device failed as a whole


def _ms(r: Optional[ResultRow]) -> str:
    if r is None:
        return "-"
    return f"{r.median_ms:.2f}" if r.status == "ok" and r.median_ms else r.status


def _verdict(v: Optional[NumericsVerdict]) -> str:
    if v is None:
        return "unknown (not checked)"
    return v.shown()


def _top_operators(entries: Sequence[dict]) -> List[str]:
    out = []
    for e in entries:
        rows = e.get("rows") or []
        if e.get("status") != "ok" or not rows:
            out.append(f"{e.get('file')}: unknown ({e.get('reason') or 'no operator rows'})")
            continue
        top = rows[0]
        share = f" ({top['share']:.0%})" if top.get("share") is not None else ""
        out.append(f"{e.get('file')}: {top['name']} {top['median_ms']:.3f} ms{share}")
    return out


def _phones(rows: Sequence[ResultRow], labels: Dict[str, str]) -> Dict[str, PhoneOverview]:
    """Every phone of the run in the order of its rows, with why it failed as a whole (a ``deploy`` row)."""
    phones: Dict[str, PhoneOverview] = {}
    for r in rows:
        phone = phones.setdefault(r.serial, PhoneOverview(r.serial, labels.get(r.serial, r.serial)))
        if r.source == "deploy":
            phone.problem = r.reason
    return phones


def _ran_on(nn: Optional[ResultRow], place: Optional[Placement]) -> str:
    if nn is None:
        return "-"
    return _chosen(place) if place else "unknown (not read)"


def _answer(r: Optional[ResultRow], ans: Dict[tuple, NumericsVerdict]) -> str:
    return "-" if r is None else _verdict(ans.get((r.serial, r.model_file)))


def _model_row(sp: dict, index: Dict[tuple, ResultRow], hw: Dict[tuple, Placement],
               ans: Dict[tuple, NumericsVerdict]) -> List[str]:
    """One model x mode of one phone: both latencies, the speed-up, the hardware, both answers."""
    cpu = index.get((sp["serial"], sp["stem"], sp["mode"], "cpu"))
    nn = index.get((sp["serial"], sp["stem"], sp["mode"], "nnapi"))
    place = hw.get((sp["serial"], nn.model_file)) if nn else None
    return [f"{sp['stem']} {MODE_NAMES.get(sp['mode'], sp['mode'])} ({sp['source']})", _ms(cpu), _ms(nn),
            "-" if sp["speedup"] is None else f"{sp['speedup']:.2f}x", _ran_on(nn, place), _answer(cpu, ans),
            _answer(nn, ans)]


def overview(rows: Sequence[ResultRow], placements: Sequence[Placement], verdicts: Sequence[NumericsVerdict],
             labels: Dict[str, str], operators: Optional[Dict[str, List[dict]]] = None) -> List[PhoneOverview]:
    """One entry per phone of the run (failed ones too), in the order they appear in the rows."""
    index = {(r.serial, r.stem, r.mode, r.backend): r for r in rows if r.backend}
    hw = {(p.serial, p.file): p for p in placements}
    ans = {(v.serial, v.file): v for v in verdicts}
    phones = _phones(rows, labels)
    for sp in speedups(rows):
        phones[sp["serial"]].rows.append(_model_row(sp, index, hw, ans))
    for serial, entries in (operators or {}).items():
        if serial in phones:
            phones[serial].top_operators = _top_operators(entries)
    return list(phones.values())


def html_section(phones: Sequence[PhoneOverview]) -> str:
    e = html.escape
    if not phones:
        return ""
    parts = ["<h2 id='phones'>Each phone at a glance</h2>"]
    for p in phones:
        parts.append(f"<h3 id='phone-{e(p.serial)}'>{e(p.label)}</h3>")
        if p.problem:
            parts.append(f"<p class='warn'>failed: {e(p.problem)}</p>")
        if p.rows:
            head = "".join(f"<th>{e(c)}</th>" for c in COLUMNS)
            body = "".join("<tr>" + "".join(f"<td class='t'>{e(c)}</td>" for c in row) + "</tr>" for row in p.rows)
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        if p.top_operators:
            parts.append("<p>top ExecuTorch operator per program (phone's ETDump): "
                         + "; ".join(e(t) for t in p.top_operators) + "</p>")
    return "".join(parts)
