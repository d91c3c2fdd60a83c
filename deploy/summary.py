"""Console tables: per device, CPU vs NNAPI latency and speed-up per mode (one number per cell), NNAPI
slowdowns, failures and skips called out with their reason; the run's ExecuTorch lines beside them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import command

from .results import Line, ResultRow, format_lines, speedups

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


HINT = ("no ExecuTorch rows in run {run}: run `invoke convert --format torchscript,executorch`, `invoke build-android "
        "--lane executorch` and `invoke deploy --format torchscript,executorch` (`invoke deploy-executorch`: the "
        "programs alone) for ExecuTorch XNNPACK beside TorchScript CPU and NNAPI in one run")
EARLIER_RECORD = "executorch-latest.json"  # what an earlier torchdroid's deploy-executorch wrote
EARLIER = ("{path} holds ExecuTorch lines an earlier torchdroid joined to another run: not drawn (each run now holds "
           "its own); run `invoke deploy --format torchscript,executorch` for both formats in one run")
FORMAT_COLUMNS = ["runtime", "precision", "median ms", "p90 ms", "samples", "speed-up", "note"]
DETAIL_COLUMNS = ["min ms", "file"]  # what the report's page adds after them (:func:`line_cells` ``detail``)


@dataclass
class DeviceLines:
    """One device's lines of the run (:func:`deploy.results.format_lines`) and its per-operator tables."""

    serial: str
    title: str
    rows: List[Line]
    operators: List[Dict[str, Any]] = field(default_factory=list)  # per program: the phone's ETDump table or unknown


@dataclass
class FormatsSection:
    """The report's formats side by side: the run's ExecuTorch programs beside its TorchScript CPU and NNAPI rows,
    per device, with what the run's document adds (``DeployResults.executorch``: operators, problems, notes)."""

    run_id: int
    present: bool  # the run has ExecuTorch rows
    path: Optional[Path] = None  # the run's document (None: it cannot be read; the rows are still drawn)
    devices: List[DeviceLines] = field(default_factory=list)
    missing_devices: List[str] = field(default_factory=list)  # devices of the run without ExecuTorch rows
    problems: List[str] = field(default_factory=list)  # what the run's ExecuTorch format reported
    notes: List[str] = field(default_factory=list)  # what every comparison must say (unoptimised CPU baselines...)
    hint: str = ""


def formats_section(results_dir: Path, run_rows: Sequence[ResultRow], facts: Dict[str, Any],
                    path: Optional[Path] = None) -> FormatsSection:
    """The section of the run whose rows (every format's) are ``run_rows``, ``facts`` from its document at ``path``
    ({}: none); a run without ExecuTorch rows: the hint (naming an earlier torchdroid's record, left as it is)."""
    run_id = run_rows[0].run_id
    lines = format_lines(run_rows)
    if not lines:
        earlier = Path(results_dir) / EARLIER_RECORD
        return FormatsSection(run_id, False, hint=HINT.format(run=run_id) + (
            "; " + EARLIER.format(path=earlier) if earlier.is_file() else ""))
    devices = [_device(serial, lines, run_rows, facts) for serial in dict.fromkeys(x.serial for x in lines)]
    return FormatsSection(run_id, True, path if facts else None, devices,
                          sorted({r.serial for r in run_rows if r.source != "deploy"} - {d.serial for d in devices}),
                          list(facts.get("problems") or []), list(facts.get("notes") or []))


def _device(serial: str, lines: Sequence[Line], run_rows: Sequence[ResultRow], facts: Dict[str, Any]) -> DeviceLines:
    r = next((r for r in run_rows if r.serial == serial and r.device_model), None)
    return DeviceLines(serial, f"{serial}: {r.device_model}, Android {r.release} (SDK {r.sdk})" if r else serial,
                       [x for x in lines if x.serial == serial],
                       [o for o in facts.get("operators") or [] if o.get("serial") == serial])


def section_notes(section: FormatsSection) -> List[str]:
    """The notes printed (and shown on the page) with the formats' tables."""
    if not section.present:
        return [section.hint]
    out = [f"no ExecuTorch rows for device {s} in run {section.run_id}: run "
           f"`{command('invoke', 'deploy', '--format', 'torchscript,executorch', '--serial', s)}`"
           for s in section.missing_devices]
    out.extend(f"ExecuTorch problem: {p}" for p in section.problems)
    out.extend(section.notes)
    return out


def line_cells(x: Line, detail: bool = False) -> List[str]:
    """A line as :data:`FORMAT_COLUMNS`' cells (deploy's table, the report's and its page's), a row that is not ok
    its status in the median's cell; ``detail``: then :data:`DETAIL_COLUMNS`' (the page's)."""
    ok = x.status == "ok"
    cells = [x.runtime, x.precision, _fmt(x.median_ms) if ok else x.status, _fmt(x.p90_ms), str(x.samples),
             "-" if x.speedup_vs_cpu is None else f"{x.speedup_vs_cpu:.2f}x", x.note]
    return cells + [_fmt(x.min_ms), x.model_file] if detail else cells


def executorch_tables(section: FormatsSection) -> List[Tuple[str, List[str], List[list]]]:
    """One table per device: TorchScript CPU, NNAPI and ExecuTorch lines, speed-up over the legacy CPU model."""
    return [(f"{t.title}: ExecuTorch beside TorchScript CPU and NNAPI (speed-up over the legacy CPU model of the same "
             "precision)", FORMAT_COLUMNS, [line_cells(x) for x in t.rows]) for t in section.devices]
