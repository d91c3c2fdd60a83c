"""Console tables: per device, CPU vs NNAPI latency and speed-up per mode (one number per cell), NNAPI
slowdowns, failures and skips called out with their reason; the run's ExecuTorch lines beside them."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from .pte_report import PteReportSection
from .results import ResultRow, speedups

COLUMNS = ["model", "mode", "source", "CPU ms", "CPU p90", "CPU ±%", "NNAPI ms", "NNAPI p90", "NNAPI ±%", "speed-up",
           "note"]


def _fmt(v, spec=".2f") -> str:
    return "-" if v is None else format(v, spec)


def _cells(r: Optional[ResultRow]) -> List[str]:
    """median, p90, spread of an ok row; the status word (failed / skipped) otherwise."""
    if r is None:
        return ["-", "-", "-"]
    if r.status != "ok":
        return [r.status, "-", "-"]
    return [_fmt(r.median_ms), _fmt(r.p90_ms), _fmt(r.spread_pct, ".1f")]


def _notes(sp: dict, cpu: Optional[ResultRow], nn: Optional[ResultRow]) -> str:
    notes = []
    if sp["nnapi_slower"]:
        notes.append(f"NNAPI SLOWER than CPU ({1 / sp['speedup']:.2f}x)")
    if nn is not None and nn.has_flag("nnapi-cpu-fallback"):
        notes.append("NNAPI ran it all on its CPU fallback (nnapi-reference)")
    elif nn is not None and nn.has_flag("nnapi-partly-cpu"):
        notes.append("NNAPI ran part of it on its CPU fallback (nnapi-reference)")
    for r in (cpu, nn):
        if r is not None and r.reason:
            notes.append(f"{r.backend}: {r.status + ': ' if r.status != 'ok' else ''}{r.reason}")
    return "; ".join(notes)


def device_title(r: ResultRow) -> str:
    return f"{r.serial}: {r.device_model} ({r.board}), Android {r.release} (SDK {r.sdk}), {r.abi or '-'}"


def device_tables(rows: Sequence[ResultRow]) -> List[Tuple[str, List[str], List[list]]]:
    """``[(title, columns, rows)]``, one table per device; a device that failed as a whole is one row."""
    by_dev: Dict[str, List[ResultRow]] = {}
    for r in rows:
        if r.source != "deploy" and r.format == "torchscript":  # a device or server the run could not work on: its
            by_dev.setdefault(r.serial, []).append(r)  # problem is printed apart; ExecuTorch's rows: their own table
    tables = []
    for serial, drows in by_dev.items():
        index = {(r.stem, r.mode, r.source, r.backend): r for r in drows}
        out = []
        for sp in speedups(drows):
            cpu = index.get((sp["stem"], sp["mode"], sp["source"], "cpu"))
            nn = index.get((sp["stem"], sp["mode"], sp["source"], "nnapi"))
            out.append([sp["stem"], sp["mode"], sp["source"], *_cells(cpu), *_cells(nn),
                        "-" if sp["speedup"] is None else f"{sp['speedup']:.2f}x", _notes(sp, cpu, nn)])
        for r in drows:
            if r.source == "deploy":
                out.append(["-", "-", "device", "failed", "-", "-", "-", "-", "-", "-", r.reason])
        title = device_title(drows[0])
        if len({r.server for r in rows if r.server}) > 1:  # several adb servers in the run: say which one
            title += f", via adb server {drows[0].server}"
        tables.append((title, COLUMNS, out))
    return tables


def failed_devices(rows: Sequence[ResultRow]) -> Tuple[str, List[str]]:
    """``("failed devices (1 of 3), no numbers from them", ["Phone C (C): <the whole reason>", ...])``: every device (or adb server) the
    run could not work on, each reason once; ``("", [])`` when none failed."""
    reasons: Dict[str, List[str]] = {}
    labels: Dict[str, str] = {}
    for r in rows:
        labels.setdefault(r.serial, f"{r.device_model} ({r.serial})" if r.device_model else r.serial)
        if r.source == "deploy" and r.reason not in reasons.setdefault(r.serial, []):
            reasons[r.serial].append(r.reason)
    failed = {serial: why for serial, why in reasons.items() if why}
    if not failed:
        return "", []
    lines = [f"{labels[serial]}: {'; '.join(why)}" for serial, why in failed.items()]
    return f"failed devices ({len(failed)} of {len(labels)}), no numbers from them", lines


def slower_callouts(rows: Sequence[ResultRow]) -> List[str]:
    """One line per device/model/mode where NNAPI is slower than the CPU."""
    out = []
    for sp in speedups(rows):
        if sp["nnapi_slower"]:
            out.append(f"{sp['serial']} ({sp['device_model']}): {sp['stem']} quant_{sp['mode']} ({sp['source']}): "
                       f"NNAPI is {1 / sp['speedup']:.2f}x SLOWER than CPU ({sp['nnapi_ms']:.2f} ms vs "
                       f"{sp['cpu_ms']:.2f} ms)")
    return out


PTE_COLUMNS = ["runtime", "precision", "median ms", "p90 ms", "samples", "speed-up", "note"]


def executorch_tables(section: PteReportSection) -> List[Tuple[str, List[str], List[list]]]:
    """One table per device: TorchScript CPU, NNAPI and ExecuTorch lines, speed-up over the legacy CPU model."""
    tables = []
    for t in section.devices:
        out = [[r.runtime, r.precision, _fmt(r.median_ms) if r.status == "ok" else r.status, _fmt(r.p90_ms),
                str(r.samples), "-" if r.speedup_vs_cpu is None else f"{r.speedup_vs_cpu:.2f}x", r.note]
               for r in t.rows]
        tables.append((f"{t.title}: ExecuTorch beside TorchScript CPU and NNAPI (speed-up over the legacy CPU model "
                       "of the same precision)", PTE_COLUMNS, out))
    return tables
