"""The hardware section (which hardware NNAPI chose, per phone, model and operation) of deploy's console output
and the report page: the per-phone summary like the Arm blog's Table 1 (float and int8 per phone), one row per
phone x NNAPI model with the operations that ran on NNAPI's CPU fallback."""

from __future__ import annotations

import html
from typing import Dict, List, Optional, Sequence, Tuple

from toolchain.hardware_records import CPU_FALLBACK, Placement
from toolchain.records import DeployResults

COLUMNS = ["device", "model file", "status", "where the operations ran", "on the CPU fallback (why)",
           "NNAPI devices (type, feature level)", "reason"]
MODE_NAMES = {"none": "float", "core": "int8 core", "full": "int8"}
NOT_READ = ("not read in this run: deploy ran without it (--no-hardware, --no-bench, or no benchmark binary) or "
            "before torchdroid had it; run `invoke deploy` again")
HOW = ("read from each phone's NNAPI runtime log (debug.nn.vlog=compilation,execution,manager; tags ExecutionPlan, "
       "CompilationBuilder and ExecutionBuilder: the plan and the runtime's own CPU fallbacks) during one extra run "
       "per NNAPI model; nnapi-reference is NNAPI's CPU fallback")


def _fallback(p: Placement) -> str:
    """``AVERAGE_POOL_2D x1 (qti-gpu can't do it), RESHAPE x1``: the operations on the CPU fallback, with the
    drivers that said they can't do them."""
    ops, why = p.fallback_operations(), p.why_on_cpu()
    if not ops:
        return "-" if p.status != "unknown" else ""
    return ", ".join(f"{op} x{n}" + (f" ({', '.join(why[op])} can't do it)" if op in why else "")
                     for op, n in ops.items())


def table_rows(placements: Sequence[Placement], labels: Dict[str, str]) -> List[List[str]]:
    return [[labels.get(p.serial, p.serial), p.file, p.status, p.where(), _fallback(p), p.device_list(),
             p.reason] for p in placements]


def summary(placements: Sequence[Placement], labels: Dict[str, str]) -> Tuple[List[str], List[List[str]]]:
    """Columns and rows of the per-phone table: one column per model stem x precision (float, int8), each cell the
    device(s) NNAPI chose, ``unknown`` where the phone did not say."""
    keys = list(dict.fromkeys((_stem(p.file), p.mode) for p in placements))
    columns = ["device"] + [f"{stem} {MODE_NAMES.get(mode, mode)}" for stem, mode in keys] + ["NNAPI devices"]
    out = []
    for serial in dict.fromkeys(p.serial for p in placements):
        mine = [p for p in placements if p.serial == serial]
        cells = {(_stem(p.file), p.mode): _chosen(p) for p in mine}
        listed = next((p.device_list() for p in mine if p.devices), "") or next(
            (p.device_list() for p in mine if p.drivers), "unknown")
        out.append([labels.get(serial, serial)] + [cells.get(k, "-") for k in keys] + [listed])
    return columns, out


def _stem(file: str) -> str:
    return file.rsplit("-quant_", 1)[0]


def _chosen(p: Placement) -> str:
    if p.status == "unknown":
        return "unknown"
    names = list(p.per_device())
    if names == [CPU_FALLBACK] or (p.status == "cpu" and not names):  # no plan logged, the runtime's fallback line
        return "CPU (NNAPI fallback)"
    return " + ".join(n if n != CPU_FALLBACK else "CPU fallback" for n in names)


def counts(placements: Sequence[Placement]) -> str:
    n = {k: sum(p.status == k for p in placements) for k in ("accelerated", "partly-cpu", "cpu", "unknown")}
    return (f"{n['accelerated']} on accelerators only, {n['partly-cpu']} partly on the CPU fallback, {n['cpu']} all "
            f"on the CPU fallback, {n['unknown']} unknown")


def problem_lines(placements: Sequence[Placement], labels: Dict[str, str]) -> List[str]:
    """A warning per phone x model whose NNAPI number is (partly) the CPU fallback's."""
    out = []
    for p in placements:
        if p.status in ("cpu", "partly-cpu"):
            why = [f"{', '.join(devs)} can't do {op}" for op, devs in p.why_on_cpu().items()]
            out.append(f"{labels.get(p.serial, p.serial)}: {p.file}: NNAPI ran {_share(p)} on its CPU fallback "
                       f"({CPU_FALLBACK}); its NNAPI latency is (partly) the fallback's"
                       + (f" (the runtime: {p.fallback[-1]})" if p.fallback else "")
                       + (f"; {'; '.join(why)}" if why else ""))
    return out


def _share(p: Placement) -> str:
    on_cpu = sum(p.fallback_operations().values())
    if p.status == "cpu":
        return "all of it"
    if not on_cpu:
        return "a step of the model (a driver's execution failed)"
    return f"{on_cpu} of {len(p.operations)} operations ({_fallback(p)})"


def of_run(doc: Optional[DeployResults], unreadable: str = "") -> Tuple[List[Placement], str]:
    """The placements of a run's document (:func:`deploy.results.run_document`), or none and why."""
    if unreadable:
        return [], f"not shown: {unreadable}"
    if doc is None or doc.hardware is None:
        return [], NOT_READ
    return list(doc.hardware), ("" if doc.hardware else "no NNAPI model ran in this run")


def html_section(placements: Sequence[Placement], labels: Dict[str, str], note: str) -> str:
    e = html.escape
    parts = ["<h2 id='hardware'>Which hardware ran each model (NNAPI)</h2>"]
    if note:
        parts.append(f"<p class='warn'>{e(note)}</p>")
    if placements:
        parts.append(f"<p>{e(counts(placements))}; {e(HOW)}</p>")
        parts.append(_table(*summary(placements, labels)))
        parts.append(_table(COLUMNS, table_rows(placements, labels),
                            ["failed" if p.status in ("cpu", "partly-cpu") else "skipped" if p.status == "unknown"
                             else "" for p in placements]))
        parts += [_operations(p, labels) for p in placements if p.operations]
    return "".join(parts)


def _operations(p: Placement, labels: Dict[str, str]) -> str:
    """One model's operations and where each ran; beside it the plan the runtime threw away, if it did."""
    e = html.escape
    columns = ["#", "operation", "device"] + (["planned (thrown away)"] if p.planned else [])
    rows = [[str(i), op, dev] + ([p.planned[i][1]] if i < len(p.planned) else []) for i, (op, dev)
            in enumerate(p.operations)]
    return (f"<details><summary>{e(labels.get(p.serial, p.serial))}: {e(p.file)}, {len(p.operations)} operations"
            f"</summary>{_table(columns, rows)}</details>")


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] = ()) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in columns)
    body = "".join(f"<tr class='{classes[i] if i < len(classes) else ''}'>"
                   + "".join(f"<td class='t'>{e(str(c))}</td>" for c in row) + "</tr>" for i, row in enumerate(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
