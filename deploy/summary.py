"""Console tables: per device, CPU vs NNAPI latency and speed-up per mode, NNAPI slowdowns called out."""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from .results import ResultRow, speedups

COLUMNS = ["model", "mode", "source", "CPU median ms", "NNAPI median ms", "speed-up",
           "CPU p90 ms", "CPU min ms", "CPU spread %", "NNAPI p90 ms", "NNAPI min ms", "NNAPI spread %", "note"]


def _fmt(v, spec=".2f") -> str:
    return "-" if v is None else format(v, spec)


def _detail(r) -> List[str]:
    """p90, min and spread: one number per cell (a failed or skipped row says so in the first)."""
    if r is None:
        return ["-", "-", "-"]
    if r.status != "ok":
        return [r.status, "-", "-"]
    return [_fmt(r.p90_ms), _fmt(r.min_ms), _fmt(r.spread_pct, ".1f")]


def _notes(sp, cpu, nn) -> List[str]:
    notes = []
    if sp["nnapi_slower"]:
        notes.append(f"NNAPI SLOWER than CPU ({1 / sp['speedup']:.2f}x)")
    for r in (cpu, nn):
        if r is not None and r.status != "ok" and r.reason:
            notes.append(f"{r.backend}: {r.status}: {r.reason}")
        elif r is not None and r.reason:
            notes.append(f"{r.backend}: {r.reason}")
    return notes


def device_tables(rows: Sequence[ResultRow]) -> List[Tuple[str, List[str], List[list]]]:
    """``[(title, columns, rows)]``, one table per device."""
    by_dev: Dict[str, List[ResultRow]] = {}
    for r in rows:
        if r.source != "deploy":  # a device or server the run could not work on: its problem is printed apart
            by_dev.setdefault(r.serial, []).append(r)
    tables = []
    for serial, drows in by_dev.items():
        first = drows[0]
        title = (f"{serial}: {first.device_model} ({first.board}), Android {first.release} "
                 f"(SDK {first.sdk}), {first.abi}")
        index = {(r.stem, r.mode, r.source, r.backend): r for r in drows}
        out = []
        for sp in speedups(drows):
            cpu = index.get((sp["stem"], sp["mode"], sp["source"], "cpu"))
            nn = index.get((sp["stem"], sp["mode"], sp["source"], "nnapi"))
            notes = _notes(sp, cpu, nn)
            out.append([sp["stem"], sp["mode"], sp["source"],
                        _fmt(cpu.median_ms if cpu else None), _fmt(nn.median_ms if nn else None),
                        "-" if sp["speedup"] is None else f"{sp['speedup']:.2f}x", *_detail(cpu), *_detail(nn),
                        "; ".join(notes)])
        tables.append((title, COLUMNS, out))
    return tables


def slower_callouts(rows: Sequence[ResultRow]) -> List[str]:
    """One line per device/model/mode where NNAPI is slower than the CPU."""
    out = []
    for sp in speedups(rows):
        if sp["nnapi_slower"]:
            out.append(f"{sp['serial']} ({sp['device_model']}): {sp['stem']} quant_{sp['mode']} ({sp['source']}): "
                       f"NNAPI is {1 / sp['speedup']:.2f}x SLOWER than CPU ({sp['nnapi_ms']:.2f} ms vs "
                       f"{sp['cpu_ms']:.2f} ms)")
    return out
