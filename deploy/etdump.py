"""Where the time went on a phone (ExecuTorch): the runner's ETDump, pulled and read with ExecuTorch's Inspector.

A runner built with ExecuTorch's devtools and event tracer (``build-android --lane executorch``, the default;
docs/facts.md EB1-EB4) takes ``--etdump_path`` and, after its executions, writes an ETDump: one event block per
execution with a profiling event per operator (``native_call_<op>.out`` on the portable kernels), per delegate
call (``DELEGATE_CALL``) and, where the delegate profiles itself (XNNPACK), per operator inside the delegate.
deploy runs each program once more on the traced runner (the timing rounds run the untraced one), pulls the file
back (adb's sync pull) and removes it from the phone, and
:func:`operator_table` joins it with the ETRecord convert wrote (aten operators per event) through
``executorch.devtools.Inspector``.  A runner built without the tracer gives no ETDump: the table then says
"unknown" and why, never a guess.
"""

from __future__ import annotations

import logging
import shlex
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional

log = logging.getLogger(__name__)
TOP = 10  # operators shown per program
# profiling events that are not an operator's own time: the whole execution, the wrapper around an operator
# call (the same span as its native_call_ event), and loading
_NOT_OPERATORS = {"Method::execute", "OPERATOR_CALL", "Method::init", "Program::load_method"}


def etdump_name(program: str) -> str:
    """The ETDump's name on the device, next to the program: ``m-fp32-xnnpack.pte`` -> ``m-fp32-xnnpack.etdump``."""
    return (program[:-4] if program.endswith(".pte") else program) + ".etdump"


def unknown(serial: str, program: str, reason: str) -> Dict[str, Any]:
    return {"serial": serial, "file": program, "status": "unknown", "reason": reason, "rows": [], "delegates": []}


def fetch(device: Any, directory: str, name: str, local: Path) -> Optional[str]:
    """Bring ``directory/name`` back from the device into ``local`` (adb's sync pull) and remove it from the device.
    Returns why it could not, or None."""
    from toolchain.errors import TorchdroidError

    remote = f"{directory.rstrip('/')}/{name}"
    q = shlex.quote(remote)
    if device.shell(f"test -f {q}").code != 0:
        return f"the runner wrote no ETDump at {remote}"
    try:
        device.pull(remote, local)
    except TorchdroidError as e:
        return f"the ETDump {remote} could not be pulled: {e.what}"
    finally:
        device.shell(f"rm -f {q}")
    if not local.stat().st_size:
        return f"the ETDump {remote} is empty"
    return None


def _kind(event: Any) -> str:
    if event.name == "DELEGATE_CALL":
        return "delegate call"
    return "in delegate" if event.is_delegated_op else "operator"


def _kept(event: Any, skip_runs: int) -> List[float]:
    """An event's times without the first ``skip_runs`` (warm-up) ones, unless that would leave none."""
    raw = list(event.perf_data.raw) if event.perf_data is not None else []
    return raw[skip_runs:] if len(raw) > skip_runs else raw


def _event_times(blocks: List[Any], skip_runs: int) -> tuple:
    """(times per (name, kind, backend, aten operators), the whole executions' times) of the execution blocks."""
    times: Dict[tuple, List[float]] = {}
    total: List[float] = []
    for block in blocks:
        for e in block.events:
            kept = _kept(e, skip_runs)
            if kept and e.name == "Method::execute":
                total.extend(kept)
            elif kept and e.name not in _NOT_OPERATORS:
                key = (e.name, _kind(e), e.delegate_backend_name or "", tuple(e.op_types or ()))
                times.setdefault(key, []).extend(kept)
    return times, total


def _rows(times: Dict[tuple, List[float]], total_ms: Optional[float]) -> List[Dict[str, Any]]:
    rows = []
    for (name, kind, backend, ops), values in times.items():
        ms = statistics.median(values)
        rows.append({"name": name, "kind": kind, "backend": backend, "aot_ops": list(ops), "median_ms": ms,
                     "calls": len(values), "share": (ms / total_ms) if total_ms else None})
    return rows


def operator_table(etdump: Path, etrecord: Optional[Path], skip_runs: int = 0, top: int = TOP) -> Dict[str, Any]:
    """Per-operator times of the runs in ``etdump`` (the first ``skip_runs`` executions are warm-up), joined with
    the ETRecord's aten operators: ``{"total_ms", "runs", "rows": [...top operators], "delegates": [...]}``."""
    from executorch.devtools import Inspector

    kwargs = {"etrecord": str(etrecord)} if etrecord is not None and etrecord.is_file() else {}
    inspector = Inspector(etdump_path=str(etdump), **kwargs)
    blocks = [b for b in inspector.event_blocks if b.name.startswith("Execute")]
    if not blocks:
        raise ValueError("the ETDump holds no execution")
    times, total = _event_times(blocks, skip_runs)
    total_ms = statistics.median(total) if total else None
    rows = _rows(times, total_ms)
    delegates = [r for r in rows if r["kind"] == "delegate call"]
    operators = sorted((r for r in rows if r["kind"] != "delegate call"), key=lambda r: -r["median_ms"])
    return {"total_ms": total_ms, "runs": len(total) or None, "skipped_runs": skip_runs,
            "etrecord": bool(kwargs), "rows": operators[:top], "operators_seen": len(operators),
            "delegates": delegates}


def program_operators(device: Any, directory: str, program: Any, models: Path, local_dir: Path,
                      skip_runs: int) -> Dict[str, Any]:
    """Pull one program's ETDump from the device and make its operator table (``status`` ok or unknown)."""
    serial = device.serial
    local = local_dir / serial / etdump_name(program.file)
    why = fetch(device, directory, etdump_name(program.file), local)
    if why:
        return unknown(serial, program.file, why)
    etrecord = (program.extra.get("etrecord") or {}).get("file")
    try:
        table = operator_table(local, Path(models) / etrecord if etrecord else None, skip_runs)
    except ImportError as e:
        return unknown(serial, program.file, f"ExecuTorch's Inspector is not installed on this host ({e}); "
                                             "pip install executorch (toolchain/pins.py)")
    except Exception as e:  # a damaged or foreign file: say so, keep the timings
        log.debug("ETDump %s not readable", local, exc_info=True)
        return unknown(serial, program.file, f"the ETDump {local} could not be read by the Inspector "
                                             f"({type(e).__name__}: {str(e)[:200]})")
    return {"serial": serial, "file": program.file, "status": "ok", "reason": "", "etdump": str(local.resolve()),
            **table}


COLUMNS = ["operator", "where", "aten operators", "median ms", "share"]


def _title(entry: Dict[str, Any], head: str) -> str:
    total = entry.get("total_ms")
    return (f"{head}: where the time went (phone's ETDump, median of {entry.get('runs')} executions"
            + (f" after {entry.get('skipped_runs')} warm-up" if entry.get("skipped_runs") else "")
            + (f", {total:.3f} ms each)" if total else ")"))


def _share(r: Dict[str, Any]) -> str:
    return f"{r['share']:.0%}" if r.get("share") is not None else "-"


def _row(r: Dict[str, Any]) -> tuple:
    return (r["name"], r["kind"] + (f" ({r['backend']})" if r.get("backend") else ""),
            ", ".join(o.replace("aten.", "") for o in r.get("aot_ops") or []) or "-", f"{r['median_ms']:.3f}",
            _share(r))


def _delegate_note(d: Dict[str, Any]) -> str:
    return (f"delegate block {d.get('backend') or '?'}: {d['median_ms']:.3f} ms per call"
            + (f" ({_share(d)} of the execution)" if d.get("share") is not None else "")
            + f", covering {len(d.get('aot_ops') or [])} aten operators")


def _notes(entry: Dict[str, Any], shown: int) -> List[str]:
    notes = [_delegate_note(d) for d in entry.get("delegates") or []]
    seen = entry.get("operators_seen", shown)
    if seen > shown:
        notes.append(f"top {shown} of {seen} operators shown (all in {entry.get('etdump')})")
    if not entry.get("etrecord"):
        notes.append("no ETRecord found: operators are named by the runtime only")
    return notes


def table_of(entry: Dict[str, Any]) -> Dict[str, Any]:
    """One program's per-operator entry as text: ``{"title", "columns", "rows", "notes"}`` (console and report)."""
    head = f"{entry.get('serial')} {entry.get('file')}"
    if entry.get("status") != "ok":
        return {"title": f"{head}: per operator: unknown", "columns": COLUMNS, "rows": [],
                "notes": [f"unknown: {entry.get('reason')}"]}
    rows = [_row(r) for r in entry.get("rows") or []]
    return {"title": _title(entry, head), "columns": COLUMNS, "rows": rows, "notes": _notes(entry, len(rows))}
