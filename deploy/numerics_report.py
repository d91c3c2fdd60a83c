"""The numerics section (is each phone's answer right) of deploy's console output and the report page."""

from __future__ import annotations

import html
from typing import Dict, List, Optional, Sequence, Tuple

from toolchain.numerics_records import NumericsVerdict
from toolchain.records import DeployResults

COLUMNS = ["device", "model file", "backend", "verdict", "largest diff", "LSB", "top-1", "top-5", "compared with",
           "tolerance", "reason"]
NOT_CHECKED = ("not checked in this run: deploy ran without the numerics check (--no-numerics, --no-bench, or no "
               "benchmark binary) or before torchdroid had it; run `invoke deploy` again")
ALSO_NOT_CHECKED = "not checked on the phone: the in-app benchmark's outputs (the app prints no outputs)"


def _num(v: Optional[float], spec: str) -> str:
    return "" if v is None else format(v, spec)


def table_rows(verdicts: Sequence[NumericsVerdict], labels: Dict[str, str]) -> List[List[str]]:
    return [[labels.get(v.serial, v.serial), v.file, v.backend, v.band or v.verdict, _num(v.max_abs, ".4g"),
             _num(v.max_lsb, ".3g"), v.top1, v.top5, v.reference, v.tolerance, v.reason] for v in verdicts]


def counts(verdicts: Sequence[NumericsVerdict]) -> str:
    n = {k: sum(v.verdict == k for v in verdicts) for k in ("agrees", "differs", "unknown")}
    exact = sum(v.band == "exact" for v in verdicts)
    return (f"{n['agrees']} agree ({exact} exactly), {n['differs']} differ, {n['unknown']} unknown" if exact
            else f"{n['agrees']} agree, {n['differs']} differ, {n['unknown']} unknown")


def problem_lines(verdicts: Sequence[NumericsVerdict], labels: Dict[str, str]) -> List[str]:
    """One line per phone x model whose answer differs from the host's (these are warnings)."""
    return [f"{labels.get(v.serial, v.serial)}: {v.file} ({v.backend}) DIFFERS from the host: {v.reason}"
            for v in verdicts if v.verdict == "differs"]


def of_run(doc: Optional[DeployResults], unreadable: str = "") -> Tuple[List[NumericsVerdict], str]:
    """The verdicts of a run's document (:func:`deploy.results.run_document`), or none and why (a run without
    the check, or a document this torchdroid cannot read)."""
    if unreadable:
        return [], f"not shown: {unreadable}"
    verdicts = doc.numerics if doc is not None else None
    return list(verdicts or []), ("" if verdicts else NOT_CHECKED)


def _table(verdicts: Sequence[NumericsVerdict], labels: Dict[str, str]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in COLUMNS)
    body = "".join(
        f"<tr class='{'failed' if v.verdict == 'differs' else 'skipped' if v.verdict == 'unknown' else ''}'>"
        + "".join(f"<td class='t'>{e(str(c))}</td>" for c in row) + "</tr>"
        for v, row in zip(verdicts, table_rows(verdicts, labels)))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_section(verdicts: Sequence[NumericsVerdict], labels: Dict[str, str], note: str) -> str:
    e = html.escape
    parts = ["<h2 id='numerics'>Is the answer right (each phone's output vs the host's: TorchScript models on their "
             "bundled inputs, ExecuTorch programs on the recorded reference inputs)</h2>"]
    if note:
        parts.append(f"<p class='warn'>{e(note)}</p>")
    if verdicts:
        parts.append(f"<p>{e(counts(verdicts))}; quantized outputs in LSB of the output scale, float outputs "
                     "relative to the reference's largest magnitude; NNAPI against the host NNAPI in both roundings "
                     "(the closer counts), within the platform's own quant8 tolerance for the phone's API level "
                     "(AOSP's whole-model tests: 2 LSB on Android 10, 3 LSB from Android 11); ExecuTorch programs "
                     "(backend executorch: executor_runner's printed outputs) against the host's ExecuTorch runtime, "
                     "fp32 relative to the host output's largest magnitude (plus the 6 printed decimals), int8 in LSB "
                     "of the recorded output quantization</p>")
        parts.append(_table(verdicts, labels))
    parts.append(f"<p>{e(ALSO_NOT_CHECKED)}</p>")
    return "".join(parts)
