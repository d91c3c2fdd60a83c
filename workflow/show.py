"""What each task prints about its result: a table (or JSON with ``--json``), notes, the next command."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Optional

from toolchain.errors import command

from toolchain.console import emit_json, next_step, note, table, warning


def by_format(results: dict, stage: str, as_json: bool) -> None:
    """A stage's ``{format: result}`` (convert, bench), each result shown by its format's function (``SHOWS``).
    With ``--json`` stdout is one JSON document: a single format's result as it is, several as ``{format: ...}``."""
    if as_json and len(results) > 1:
        return emit_json(results)
    for name, result in results.items():
        SHOWS[stage][name](result, as_json)


def _convert_row(f: Any) -> tuple:
    """A converted file's row; a model declaring several inputs: each one's shape, dtype and quantization, ';'
    between them."""
    ins = f.inputs
    return (f.file, f.backend, f.mode, "; ".join("x".join(map(str, i.shape)) for i in ins),
            "; ".join(i.dtype for i in ins), "; ".join(f"{i.scale:.5f}" if i.scale is not None else "-" for i in ins),
            "; ".join(str(i.zero_point) if i.scale is not None else "-" for i in ins), f"{f.size / 1e6:.1f}")


def convert(result: Any, as_json: bool = False) -> None:
    if as_json:
        return emit_json(result)
    if result.reused:  # nothing converted: what it reuses is one line (its table: --json or the manifest)
        for refusal in getattr(result, "refused", []):
            warning(refusal.line())
        return print(f"manifest: {result.manifest_path} (reused: its {len(result.files)} files are up to date with this "
                     "request; --force converts again)")
    rows = [_convert_row(f) for f in result.files]
    rows += [(f"not made: {name}", backend, mode, "-", "-", "-", "-", "-") for name, backend, mode in
             getattr(result, "not_made_files", list)()]  # why: the warnings below, or the error convert ends with
    table(f"converted into {result.manifest_path.parent} ({'reused' if result.reused else 'built'})",
          ["file", "backend", "mode", "input", "dtype", "in scale", "in zero point", "MB"], rows,
          numeric=("in scale", "in zero point", "MB"), drop=("in zero point", "in scale", "dtype", "input"))
    for line in result.notes:
        note(line)
    for refusal in getattr(result, "refused", []):
        warning(refusal.line())
    if result.host_check:
        for line in result.host_check_lines():
            print(line)
    print(f"manifest: {result.manifest_path}")


# a host bench's table, either format's; a narrow terminal leaves out the last of BENCH_DROP first (the median and
# the speed-up stay longest)
BENCH_COLUMNS = ["model", "file", "mode", "load ms", "first ms", "median ms", "p90 ms", "min ms", "max ms", "mean ms",
                 "std ms", "spread %", "model MB", "speed-up (rounds)"]
BENCH_DROP = ("std ms", "mean ms", "max ms", "load ms", "first ms", "model MB", "mode", "spread %", "file", "p90 ms",
              "min ms")


def bench_table(title: str, result: Any, speedup: bool = False) -> None:
    """A host bench's rows (converter.host_bench.BenchRow), either format's: a timed row's times (spread % with " !":
    the rounds disagree); a row not timed: its note.  ``file`` when a row's label is not its file, ``mode`` when every
    row has one; ``speedup``: each row over its baseline (the median of the per-round ratios, their range: one verdict
    rule, toolchain.stats.Comparison), a baseline 1.00x."""
    rows, ups = result.rows, _speedup_cells(result.ratios)
    shown = {"file": any(r.label != r.file for r in rows), "mode": all(r.mode for r in rows),
             "speed-up (rounds)": speedup}
    keep = [i for i, c in enumerate(BENCH_COLUMNS) if shown.get(c, True)]
    columns = [BENCH_COLUMNS[i] for i in keep]
    table(title, columns, [[cells[i] for i in keep] for cells in (_bench_cells(r, ups) for r in rows)],
          numeric=[c for c in columns if c.endswith((" ms", " %", " MB"))], drop=BENCH_DROP)


def _bench_cells(r: Any, ups: dict) -> list:
    what = [r.label, r.file, r.mode or "-"]
    t = r.timing
    if t is None:
        return what + ["-"] * 10 + [r.note]
    return what + [f"{t.load_ms:.0f}", f"{t.first_ms:.2f}", f"{t.median_ms:.2f}", f"{t.p90_ms:.2f}", f"{t.min_ms:.2f}",
                   f"{t.max_ms:.2f}", f"{t.mean_ms:.2f}", f"{t.std_ms:.2f}", f"{t.spread_pct:.1f}" + (" !" if t.unstable else ""),
                   "unknown" if r.memory_kb is None else f"{r.memory_kb / 1024:.0f}", ups.get(r.label, "-")]


def _speedup_cells(ratios: Any) -> dict:
    """label -> its speed-up cell: the median of the per-round ratios with their range (? = the range includes 1.0x:
    no measured difference; ~ = the rounds spread more than the difference); each ratio's base 1.00x."""
    cells = {r.base: "1.00x" for r in ratios}
    cells.update((r.other, f"{r.value:.2f}x ({r.low:.2f}-{r.high:.2f}{', ?' if r.uncertain else ', ~' if r.noisy else ''})")
                 for r in ratios)
    return cells


@dataclass(frozen=True)
class BenchView:
    """How a format's host bench is shown: its table's title, and its ratios as the table's speed-up column
    (ExecuTorch: each line over its baseline) or a verdict line each (TorchScript: each quantized model over its
    float model)."""

    title: Callable[[Any], str]
    speedup: bool = False


def _cpu_title(result: Any) -> str:
    return (f"CPU models on this host (quantized engine {result.quantized_engine}, "
            f"{result.conditions.threads if result.conditions else '?'} thread(s), rounds alternated"
            f"{_busy_mark(result.conditions)})")


def _pte_title(result: Any) -> str:
    """The threads each runtime used: torch's are set, ExecuTorch's threadpool keeps its default (no public API sizes
    it: docs/architecture.md); what the speed-up column's marks mean."""
    c = result.conditions
    threads = f"torch at {c.threads} thread(s)" if c and c.threads else "torch threads unknown"
    return (f"host latency, same protocol, alternated round by round; {threads}, ExecuTorch at its threadpool's "
            "default (one per processor) (speed-up "
            "over legacy TorchScript CPU of the same precision; ? = the rounds' range includes 1.0x: no measured "
            f"difference; ~ = the rounds spread more than the difference{_busy_mark(result.conditions)})")


BENCH_VIEWS = {"torchscript": BenchView(_cpu_title), "executorch": BenchView(_pte_title, speedup=True)}


def host_bench(result: Any, as_json: bool = False, view: BenchView = BENCH_VIEWS["torchscript"]) -> None:
    """Either format's host bench (converter.host_bench.HostBenchResult): its programs' checks against their
    reference when it has any, its timing table (``view``), what its rows and checks note, how the rounds were
    taken, the run's notes and where the results went."""
    if as_json:
        return emit_json(result)
    if result.checks:
        from converter.executorch_check import check_cells

        table("ExecuTorch programs against their reference (host runtime)",
              ["program", "reference", "max |diff|", "bound", "top-1/top-5", "per operator", "result"],
              [check_cells(c) for c in result.checks], drop=("bound", "reference", "per operator"))
    bench_table(view.title(result), result, speedup=view.speedup)
    for r in [] if view.speedup else result.ratios:  # the one verdict rule, a line each
        print(r.summary())
    for x in result.rows:
        if x.timing and x.note:
            print(f"{x.label}: {x.note}")
    for c in result.checks:
        if c.operator_note:
            print(f"per operator, {c.variant}: {c.operator_note}")
    _taken(result.conditions)
    for line in result.notes:
        note(line)
    print(f"results: {result.json_path}")


def _busy_mark(conditions: Any) -> str:
    """The timing table's flag for a run taken on a busy machine (toolchain/host_conditions.py)."""
    return "; BUSY machine: see the note" if conditions is not None and conditions.busy else ""


def _taken(conditions: Any) -> None:
    """How the host numbers were taken: one line (the busy and governor notes come with the run's notes)."""
    if conditions is not None:
        print(conditions.line())


def build_android(result: Any, as_json: bool = False) -> None:
    if as_json:
        return emit_json(result)
    info = result.info
    rows = [(a["name"], a["kind"], a["sha256"][:12], a["path"]) for a in info["artefacts"]]
    table(f"{'up to date' if result.reused else 'built'}: PyTorch {info['commit'][:12]} ({info['lane']}) "
          f"{info['abi']} API {info['api_level']}, NDK {info['ndk']['revision']}",
          ["artefact", "kind", "sha256", "path"], rows)
    ver = info.get("verification", {})
    print(f"verified: machine {ver.get('machine')}, API level {ver.get('api_level')}, "
          f"LOAD alignment {ver.get('load_alignment')} bytes (16 KB pages: {ver.get('page_16k_ok')})")
    for w in result.warnings:
        warning(w)
    print(f"build-info: {result.build_info_path} ({result.seconds:.1f}s; log {result.log_path})")


def compat(report: Any, as_json: bool = False) -> None:
    if as_json:
        return emit_json(report)
    for line in report.lines():
        print(line)


def doctor(checks: Any, as_json: bool = False) -> None:
    if as_json:
        return emit_json({"checks": list(checks)})
    table("torchdroid doctor", ["stage", "tool", "status", "found", "fix"],
          [(ch.stage, ch.name, ch.status, ch.found, ch.fix) for ch in checks])


def make_app(result: Any, compat_report: Any) -> None:
    """What make-app wrote, its notes and warnings and check-compat's verdict; an app that is up to date is one line
    (nothing was made again, so, as make does, its warnings are not said again: they were when it was made)."""
    then = f"{command('invoke', 'build-app', '--out', result.out)}  (or open {result.out} in Android Studio)"
    if getattr(result, "up_to_date", False):
        said = f" ({len(result.warnings)} warning(s) when it was made, still in force)" if result.warnings else ""
        print(f"make-app: {result.out} is up to date ({result.notes[0].split(': ', 1)[-1]}); nothing written{said}")
        return next_step(then)
    print(f"app assets ({result.variant}): " + ", ".join(
        f"{name} ({size / 1e6:.2f} MB)" if size > 1e5 else f"{name} ({size} B)" for name, size in result.assets.items()))
    for line in result.notes:
        note(line)
    for line in result.warnings:
        warning(line)
    runtime = result.runtime
    what = runtime.label if runtime.library != "pytorch_android" else \
        f"{runtime.source} {runtime.pytorch_android or runtime.aar_name}"
    print(f"project: {result.out} (application id {result.application_id}; runtime {what}); app-info: "
          f"{result.app_info}")
    if compat_report is not None:  # the verdict in one line; `invoke check-compat` has the rest
        said = f"check-compat: {compat_report.status}: {compat_report.reason}; runtime: {compat_report.runtime}"
        if compat_report.ok:
            print(said)
        else:
            warning(f"the app's runtime may not run these models ({said}); details: invoke check-compat")
    next_step(then)


def build_app(result: Any) -> None:
    print(f"APK: {result.apk} ({result.size / 1e6:.1f} MB, sha256 {result.sha256[:16]}…, {result.seconds:.0f} s)")
    print(f"gradle log: {result.log_path}")
    next_step("invoke deploy  (installs it on every connected phone)")


def result_tables(rows: Any, tables: bool = True) -> None:
    """Per device its latency table (``tables``: not when each phone's overview showed them), then which NNAPI
    models were slower than the CPU."""
    from deploy.summary import device_tables, slower_callouts

    for title, columns, table_rows in device_tables(rows) if tables else ():
        table(title, columns, table_rows)
    for line in slower_callouts(rows):
        note(line)


def executorch_tables(section: Any) -> None:
    """The report's ExecuTorch lines per device, or the one line that says how to get them."""
    from deploy.summary import executorch_tables as tables, section_notes

    if section is None:
        return
    for (title, columns, table_rows), device in zip(tables(section), section.devices):
        table(title, columns, table_rows, numeric=("median ms", "p90 ms", "samples", "speed-up"))
        pte_operators(device.operators)
    for line in section_notes(section):
        note(line)


def numerics(verdicts: Any, labels: Any, why: str = "", shown: Any = ()) -> None:
    """Is each phone's answer right: one list, a row per phone x model or program (not those each phone's overview
    showed: ``shown``, (serial, file) pairs; when that is all of them, the counts only), a warning per one that
    differs."""
    from deploy import numerics_report as nr

    if why:
        note(f"numerics: {why}")
    if not verdicts:
        return
    title = f"is the answer right: each phone's output vs the host's on the same inputs ({nr.counts(verdicts)})"
    rest = [v for v in verdicts if (v.serial, v.file) not in shown]
    if rest:
        table(title, nr.COLUMNS, nr.table_rows(rest, labels), numeric=("largest diff", "LSB", "top-1", "top-5"))
    else:
        print(title)
    for line in nr.problem_lines(verdicts, labels):
        warning(line)


def hardware(placements: Any, labels: Any, why: str = "", tables: bool = True) -> None:
    """Which hardware NNAPI chose: the per-phone summary, one row per phone x NNAPI model (``tables``: not when
    each phone's overview showed them, then the counts only), a warning per model whose NNAPI number is (partly)
    the CPU fallback's."""
    from deploy import hardware_report as hr

    if why:
        note(f"hardware: {why}")
    if not placements:
        return
    if not tables:
        return print(f"which hardware NNAPI chose ({hr.counts(placements)})")
    columns, rows = hr.summary(placements, labels)
    table(f"which hardware NNAPI chose ({hr.counts(placements)})", columns, rows)
    table("NNAPI placement per phone and model (from the phones' NNAPI logs)", hr.COLUMNS,
          hr.table_rows(placements, labels))
    for line in hr.problem_lines(placements, labels):
        warning(line)


def phones(overviews: Any) -> None:
    """Each phone at a glance: latency, the hardware NNAPI chose, the answers' verdicts, the top operators."""
    from deploy.phone_overview import COLUMNS

    for p in overviews:
        if p.problem:
            warning(f"{p.label}: failed: {p.problem}")
        if p.rows:
            table(f"{p.label}: latency, hardware and answers", COLUMNS, p.rows,
                  numeric=("CPU ms", "NNAPI ms", "speed-up"))
        for line in p.top_operators:
            note(f"{p.label}: top ExecuTorch operator: {line}")


def deployed(result: Any, formats: Any, as_json: bool = False) -> None:
    """What `invoke deploy` did: each format's part (``formats``: the run's, in ``SHOWS``' order); with ``--json``
    one JSON document (every device's rows, numerics and placements, the ExecuTorch record)."""
    if as_json:
        return emit_json(result, {"rows": result.rows, "failed": [d.serial for d in result.failed]})
    for name, part in SHOWS["deploy"].items():
        if name in formats:
            part(result)
    _results_line(result)
    labels = {d.serial: f"{d.facts.model} ({d.serial})" if d.facts else d.serial for d in result.devices}
    rec = result.executorch  # every format's verdicts in one list (a row per phone x model or program)
    numerics(result.numerics, labels, "" if result.numerics or rec is None or rec.facts.get("checked")
             else "the runner's outputs were not checked")
    from deploy.orchestrate import numerics_policy

    policy = numerics_policy(result)
    if policy:
        note(policy)
    then = _deploy_next(result)
    if then:  # last: after every format's part and the one verdict list
        next_step(then)


def _results_line(result: Any) -> None:
    """Where every format's rows of the run are (one run)."""
    if result.run_id is not None:
        print(f"results: run {result.run_id} in {result.db_path}; "
              + ", ".join(str(p) for p in result.exports.values() if "run-" in p.name))


def _deploy_next(result: Any) -> Optional[str]:
    """The command after a deploy: report, or (ExecuTorch alone, no legacy run to compare with) deploy both."""
    rec = result.executorch
    if rec is None:
        return "invoke report  (the chart and an HTML page of this run)" if result.run_id is not None else None
    if any(r.format == "torchscript" for r in result.rows):  # both formats in this run
        return "invoke report  (the chart and an HTML page of this run, with the ExecuTorch lines beside it)"
    return ("invoke deploy --format torchscript,executorch  (the TorchScript CPU and NNAPI lines these are compared "
            "with, in the same run; then invoke report)")


def deploy(result: Any) -> None:
    """Deploy's warnings, its tables (latency, hardware, answers), a few lines per device, where the results went."""
    for w in result.warnings:
        warning(w)
    result_tables(result.rows)
    labels = {d.serial: f"{d.facts.model} ({d.serial})" if d.facts else d.serial for d in result.devices}
    hardware(result.hardware, labels)
    for d in result.devices:
        _device(d)
    print(f"device directory: {result.directory}")


def _device(d: Any) -> None:
    """One device's line (what was pushed and installed), its notes, its failed benchmarks and its problems."""
    facts = f" ({d.facts.model}, SDK {d.facts.sdk})" if d.facts else ""
    app = "" if d.installed is None else f", app {'installed' if d.installed else 'already installed'}"
    print(f"{d.serial}{facts}: {d.pushed_files} file(s) pushed ({d.pushed_bytes} bytes), {d.skipped_files} unchanged"
          + app)
    for n in d.notes:
        print(f"  note: {n}")
    for r in d.rows:
        if r.status == "failed" and r.source != "deploy" and r.format == "torchscript":  # ExecuTorch's: its problems
            print(f"  failed: {r.model_file} ({r.backend}, {r.source}): {r.reason}")
    for e in d.errors:
        print("  problem: " + e.replace("\n", "\n    "))


def report(result: Any, as_json: bool = False) -> None:
    if as_json:
        return emit_json(result)
    from deploy.run_weights import is_random
    from deploy.summary import failed_devices

    weights = getattr(result, "weights", "")
    if weights:  # what the numbers are of: random weights make every answer meaningless
        (warning if is_random(weights) else print)(weights)
    phones(result.phones)
    detail = not result.phones  # each phone's overview has its latencies, hardware and answers: not twice
    result_tables(result.rows, tables=detail)
    for line in getattr(result, "notes", []):
        note(line)
    hardware(result.hardware, result.labels, result.hardware_note, tables=detail)
    numerics(result.numerics, result.labels, result.numerics_note,
             shown=() if detail else {(r.serial, r.model_file) for r in result.rows})
    executorch_tables(result.executorch)
    print(f"picture: {result.png}")
    print(f"page: {result.html} (chart and every table, per model and run; open it in a browser)")
    print("exports: " + ", ".join(str(p) for p in result.exports.values()))
    title, lines = failed_devices(result.rows)  # last, where the outcome is read
    if lines:
        warning(title + ":\n" + "\n".join(lines))


def _verify_row(r: Any) -> tuple:
    diff = f"{r.max_lsb_diff} LSB" if r.quantized and r.max_lsb_diff is not None else f"{r.max_abs_diff:.3g}"
    worst = max((x["max_lsb"] or 0 for x in r.layers), default=None) if r.quantized and r.layers else None
    return (r.variant, "ok" if r.ok else "FAIL", r.inputs, diff, _fixed(r.top1_agreement), _fixed(r.top5_agreement),
            "-" if worst is None else f"{worst} LSB", sum(1 for f in r.findings if f["severity"] != "info"))


def _fixed(x: Any) -> str:
    return "-" if x is None else f"{x:.2f}"


def verify(result: Any, as_json: bool = False) -> None:
    if as_json:
        return emit_json(result)
    for refusal in getattr(result, "skipped", []):
        print(f"verify: skipped {refusal.line()}")
    if getattr(result, "nothing", ""):
        print(f"verify: nothing verified: {result.nothing}")
    if not result.rows:
        return
    table("host NNAPI vs CPU", ["variant", "result", "inputs", "end-to-end diff", "top-1",
                                                    "top-5", "worst op (isolated)", "findings"],
          [_verify_row(r) for r in result.rows],
          numeric=("inputs", "end-to-end diff", "top-1", "top-5", "worst op (isolated)", "findings"))
    said: dict = {}  # the same finding in several variants (core and full share their input): one line naming them
    for r in result.rows:
        for f in r.findings:
            if f["severity"] != "info":
                said.setdefault((f["severity"], f["message"]), []).append(r.variant)
    for (severity, message), variants in said.items():
        print(f"{', '.join(variants)}: {severity}: {message}")
    for r in result.rows:
        if r.agreement_note:
            note(f"{r.variant}: top-1/top-5 agreement {r.agreement_note}")
    print(f"results: {result.json_path} (host NNAPI: {result.library})")


def all_summary(summary: Any, path: Any, substituted: bool, as_json: bool = False) -> None:
    """One table of every stage (what ran, was up to date, skipped or failed, and the reason in a few words), the
    weights when they are random, where the full reasons are, and how to get what was skipped."""
    if as_json:
        import json

        return print(json.dumps(_read(path), indent=2))
    from converter.models import RANDOM_WEIGHTS

    table("torchdroid all" + (f" ({RANDOM_WEIGHTS})" if substituted else ""),
          ["stage", "result", "seconds", "detail"],
          [(o.stage, o.status, f"{o.seconds:.0f}" if o.seconds else "", _gist(o)) for o in summary.outcomes],
          numeric=("seconds",), drop=("seconds",))
    doctor = any(o.status == "skipped" and o.detail != "skipped with --skip" for o in summary.outcomes)
    print(f"summary: {path} (every reason in full" + ("; what the skipped stages need, and how to get it: invoke "
                                                       "doctor)" if doctor else ")"))


def _gist(outcome: Any) -> str:
    """Why a stage was skipped or up to date in a few words: the first line of the reason up to its first ": "
    (the full text is in all.json); a failure's first line whole (its full message was printed when it failed)."""
    first = outcome.detail.splitlines()[0] if outcome.detail else ""
    if outcome.status in ("failed", "partly made"):  # a partly made convert: what was made and what refused
        return first.split(": ", 1)[-1] if first.startswith("torchdroid ") else first
    return first.split(": ", 1)[0].split(" (", 1)[0] if len(first) > 60 else first


def _read(path: Any) -> Any:
    import json
    from pathlib import Path

    return json.loads(Path(path).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the ExecuTorch lane (docs/executorch.md)


def pte_convert(result: Any, as_json: bool = False) -> None:
    if as_json:
        return emit_json(result)
    built = "built " + ", ".join(result.built) if result.built else "reused"
    rows = [(f.file, f.delegate, f.precision, f"{f.size / 1e6:.1f}", _pte_check(f)) for f in result.files]
    rows += [(f"not made: {name}", name.split("-", 1)[-1], name.split("-", 1)[0], "-", "refused: see below")
             for name in getattr(result, "not_made", {})]
    table(f"ExecuTorch programs in {result.manifest_path.parent} ({built})", ["file", "delegate", "precision", "MB",
          "host check"], rows, numeric=("MB",))
    for name, reason in sorted(result.skipped.items()):
        print(f"skipped delegate {name}: {reason}")
    for line in result.notes:
        note(line)
    print(f"manifest: {result.manifest_path}")


def _pte_check(f: Any) -> str:
    check = f.extra.get("host_check") or {}
    return f"max |diff| {check['max_abs_diff']:.2e}" if check.get("ran") else f"not run: {check.get('reason', '?')}"


def executorch_runtime(result: Any, log_path: Any, as_json: bool = False) -> None:
    if as_json:
        return emit_json(result, {"log": log_path})
    info = result.build_info
    print(f"built ExecuTorch {info.get('tag')} ({info.commit[:12]}) for {info.abi} API {info.get('api_level')}:")
    for art in info.get("artefacts", []):
        role = ("with the event tracer, for per-operator times (ETDump)" if art.get("event_tracer") else
                "without the event tracer, for the timing rounds")
        print(f"  {art['name']}: {role}; LOAD alignment {art.get('load_alignment')}: {info.dir / art['path']}")
    if result.traced is None:
        print("  no traced runner (android.executorch_event_tracer off): no per-operator times on the phones")
    print(f"build-info: {info.path} ({result.seconds:.1f}s; log {log_path})")




def pte_deploy(result: Any) -> None:
    """The ExecuTorch format's part of a deploy (``result.executorch``: its lines and facts, in the run's document)."""
    from deploy.summary import FORMAT_COLUMNS, line_cells

    rec = result.executorch
    table("per device: legacy and ExecuTorch, speed-up over the legacy TorchScript CPU model of the same precision",
          ["device", *FORMAT_COLUMNS], [[x.serial, *line_cells(x)] for x in rec.rows],
          numeric=("median ms", "p90 ms", "samples", "speed-up"))
    for p in rec.problems:
        print(f"problem: {p}")
    for line in rec.facts["notes"]:
        note(line)
    pte_operators(rec.facts["operators"])


def pte_operators(entries: Any) -> None:
    """Per device and program: where the time went on the phone (ETDump), or why it is unknown."""
    from deploy.etdump import table_of

    for entry in entries:
        t = table_of(entry)
        if t["rows"]:
            table(t["title"], t["columns"], t["rows"], numeric=("median ms", "share"))
        else:
            print(t["title"])
        for line in t["notes"]:
            print(f"  {line}")


SHOWS = {"convert": {"torchscript": convert, "executorch": pte_convert},
         "bench": {name: partial(host_bench, view=view) for name, view in BENCH_VIEWS.items()},
         "deploy": {"torchscript": deploy, "executorch": pte_deploy}}
