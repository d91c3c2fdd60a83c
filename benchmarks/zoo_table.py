#!/usr/bin/env python3
"""The model zoo: every listed model in every lane on this machine, made or refused (why), checked, timed.

Per model, in a child process of its own (its memory goes back when it ends; a crash or a timeout is that
model's row, not the end of the run), with cheap settings (random weights, CALIBRATION calibration inputs,
a few timed iterations):

* legacy lane (``invoke convert``, modes none and full): the TorchScript CPU models and the NNAPI models, or why
  not; the NNAPI models verified on the host NNAPI (``invoke verify``, qnnpack rounding, the bundled input); the
  CPU models timed (``invoke bench --host``);
* ExecuTorch lane (``invoke convert --format executorch``, XNNPACK fp32/int8 and portable): each program, or why
  not; checked on held-out inputs and timed (``invoke bench-executorch``, no per-operator comparison, the portable
  program not timed).

Each lane is run on its own: one that refuses the model does not stop the other.  Resumable: a model whose row is
in the state directory (``--state``, default build/zoo-state/, one JSON row per model) is not run again
(``--again`` runs it again);
docs/zoo.md (between the markers) and docs/zoo.json are rewritten from every row after each model, with the date
and the machine.

Usage: python benchmarks/zoo_table.py [--models a,b] [--again] [--timeout 3600] [--out docs/zoo.md]
       python benchmarks/zoo_table.py --one NAME --dir DIR   (the child: one model into DIR, its row on stdout)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BEGIN, END = "<!-- zoo-table:begin -->", "<!-- zoo-table:end -->"
# relative to ROOT, where the children run: the commands the refusals quote (e.g. `invoke convert --model
# benchmarks/zoo_models.py:squeezenet1_1 --format executorch`) are the ones a user types at the repository's root,
# never a path of the machine or the copy the table was made on
ZOO_MODELS = Path("benchmarks") / "zoo_models.py"
CALIBRATION = 4
MODES = ("none", "full")
DELEGATES = ("xnnpack", "portable")
TIMING = dict(warmup=1, iters=5, repeat=1, threads=1)
ROW_MARK = "ZOO-ROW "

# by name where `invoke convert --model` lists the model (its quantizable variant: the legacy quantized modes),
# else a factory of benchmarks/zoo_models.py
NAMED = ("mobilenet_v2", "mobilenet_v3_large", "resnet18", "resnet50", "shufflenet_v2_x1_0", "googlenet",
         "inception_v3")
FACTORIES = ("mobilenet_v3_small", "squeezenet1_1", "efficientnet_b0", "mnasnet1_0", "regnet_y_400mf", "convnext_tiny", "vit_b_16",
             "swin_t", "lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "token_encoder",
             "audio_classifier")
ZOO = NAMED + FACTORIES


def model_arg(name: str) -> str:
    return name if name in NAMED else f"{ZOO_MODELS}:{name}"


# --------------------------------------------------------------------------- the child: one model, every lane


def _lane(fn: Callable[[], Dict[str, Any]], partly: Callable[[Any], Dict[str, Any]] = None) -> Dict[str, Any]:
    """``fn()``'s result, or how it was refused (a torchdroid error: its message, cause and fix) or failed; a lane
    that made some of its programs and refused others (exit 10) gives ``partly(result)`` with each refusal's reason."""
    from toolchain.errors import PartlyConverted, TorchdroidError

    t0, c0 = time.monotonic(), time.process_time()
    try:
        out = fn()
        out.setdefault("ok", True)
    except PartlyConverted as e:
        out = dict(partly(e.result), ok=True, exit=e.exit_code) if partly and e.result is not None else \
            {"ok": False, "refused": e.what, "cause": e.cause or "", "fix": e.remedy or "", "exit": e.exit_code}
    except TorchdroidError as e:
        out = {"ok": False, "refused": e.what, "cause": e.cause or "", "fix": e.remedy or "", "exit": e.exit_code}
    except Exception as e:  # noqa: BLE001 - a bug of torchdroid's: recorded as such, never a traceback in the table
        out = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
    out["seconds"] = round(time.monotonic() - t0, 1)
    out["cpu_seconds"] = round(time.process_time() - c0, 1)  # every thread of the child: what the lane costs, load or not
    return out


def legacy_lane(name: str, out: Path) -> Dict[str, Any]:
    from converter import ConvertSettings, convert

    return legacy_made(convert(ConvertSettings(out=out, model=model_arg(name), modes=MODES, weights="random",
                                              calibration_count=CALIBRATION, build_dir=out.parent / "build")))


def legacy_made(r) -> Dict[str, Any]:
    """What the legacy lane made and refused (converter.pipeline.ConvertResult), for the table."""
    return {"files": [{"file": f.file, "mode": f.mode, "backend": f.backend} for f in r.files],
            "nnapi_refused": [{"mode": x.mode, "reason": x.reason, "alternative": x.alternative} for x in r.refused],
            "not_made": dict(r.not_made), "notes": list(r.notes)}


def verify_lane(out: Path) -> Dict[str, Any]:
    from host_nnapi.verify import VerifySettings, verify

    r = verify(VerifySettings(models=out, rounding="qnnpack", random_inputs=0, min_top1_agreement=0.0,
                              min_top5_agreement=0.0, out=out / "verify-zoo.json"))
    return {"rows": {row.variant: {"ok": row.ok, "lsb": row.max_lsb_diff, "abs": row.max_abs_diff,
                                   "ops": len(row.layers), "why": "; ".join(row.failures)[:300] or row.error}
                     for row in r.rows}}


def bench_lane(out: Path) -> Dict[str, Any]:
    from converter.host_bench import HostBenchSettings, run_host_bench

    r = run_host_bench(HostBenchSettings(models=out, out=out.parent / "bench", **TIMING))
    return {"median_ms": {row.variant: row.timing.median_ms for row in r.rows}}


def executorch_lane(name: str, out: Path) -> Dict[str, Any]:
    from converter.executorch import ExecutorchSettings, convert_executorch

    return pte_made(convert_executorch(ExecutorchSettings(out=out, model=model_arg(name), weights="random",
                                                          calibration_count=CALIBRATION, delegates=DELEGATES)))


def pte_made(r) -> Dict[str, Any]:
    """What the ExecuTorch lane made and refused (converter.executorch.ExecutorchResult), for the table."""
    return {"files": [f.variant for f in r.files], "skipped": dict(r.skipped), "not_made": dict(r.not_made),
            "notes": list(r.notes)}


def pte_bench_lane(out: Path) -> Dict[str, Any]:
    from converter.host_bench import PteBenchSettings, run_pte_bench

    r = run_pte_bench(PteBenchSettings(models=out, out=out.parent / "bench", per_operator=False, legacy=False,
                                       host_nnapi=False, reference_kernels="skip", **TIMING))
    return {"checks": {c.variant: {"ran": c.ran, "ok": c.ok, "reason": c.reason, "grid_rule": c.grid_rule,
                                   "rel": c.rel_error, "budget": c.rel_budget, "abs": c.max_abs_diff}
                       for c in r.checks},
            "median_ms": {x.label.split()[-1]: x.timing.median_ms for x in r.rows if x.timing}}


def one_model(name: str, directory: Path) -> Dict[str, Any]:
    """Every lane of one model into ``directory`` (fresh), each on its own."""
    import host_nnapi

    legacy, pte = directory / "legacy" / "models", directory / "executorch" / "models"
    row: Dict[str, Any] = {"model": name, "source": "torchvision name" if name in NAMED else "zoo_models.py factory"}
    t0, c0 = time.monotonic(), time.process_time()
    row["legacy"] = _lane(lambda: legacy_lane(name, legacy), legacy_made)
    if row["legacy"]["ok"] and any(f["backend"] != "cpu" for f in row["legacy"]["files"]):
        host_nnapi.load()
        row["verify"] = _lane(lambda: verify_lane(legacy))
    if row["legacy"]["ok"]:
        row["bench"] = _lane(lambda: bench_lane(legacy))
    row["executorch"] = _lane(lambda: executorch_lane(name, pte), pte_made)
    if row["executorch"]["ok"]:
        row["pte_bench"] = _lane(lambda: pte_bench_lane(pte))
    row["seconds"] = round(time.monotonic() - t0, 1)
    row["cpu_seconds"] = round(time.process_time() - c0, 1)
    return row


# --------------------------------------------------------------------------- the parent: one child per model


def run_child(name: str, timeout: float) -> Dict[str, Any]:
    """One model's row from a child process (a crash or a timeout is the row's ``error``)."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"zoo-{name}-") as tmp:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--one", name, "--dir", tmp]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
        except subprocess.TimeoutExpired:
            return {"model": name, "error": f"not done within {timeout:.0f} s (--timeout)",
                    "seconds": round(time.monotonic() - t0, 1)}
    rows = [line[len(ROW_MARK):] for line in p.stdout.splitlines() if line.startswith(ROW_MARK)]
    if p.returncode == 0 and rows:
        return json.loads(rows[-1])
    tail = [x for x in (p.stderr or p.stdout).strip().splitlines() if x.strip()][-1:] or ["no output"]
    return {"model": name, "error": f"the child exited {p.returncode}: {tail[0][:300]}",
            "seconds": round(time.monotonic() - t0, 1)}


def load_rows(state: Path) -> Dict[str, Dict[str, Any]]:
    rows = {}
    for p in sorted(state.glob("*.json")) if state.is_dir() else []:
        try:
            row = json.loads(p.read_text())
            rows[row["model"]] = row
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a damaged row: the model runs again
    return rows


def commit() -> str:
    """The commit the row ran at, "+changes" when the working tree differs from it (the table and its JSON this
    run rewrites aside; rows of one table can come from several resumed runs: the table names each commit)."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "--short=8", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "unknown (not a git checkout)"
    changed = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs/zoo.md",
                              ":!docs/zoo.json"], capture_output=True, text=True)  # not the table this run writes
    return head.stdout.strip() + ("+changes" if changed.stdout.strip() else "")


def save_row(state: Path, row: Dict[str, Any]) -> None:
    from toolchain.fsutil import atomic_write_json

    state.mkdir(parents=True, exist_ok=True)
    atomic_write_json(state / f"{row['model']}.json", row)


# --------------------------------------------------------------------------- the table


def _refusal(lane: Dict[str, Any]) -> str:
    """What refused the lane, its cause (cut when long) and its fix (never cut)."""
    if "error" in lane:
        return f"**error** ({lane['error']})"
    text = f"refused (exit {lane.get('exit')}): {lane['refused']}"
    if lane.get("cause"):
        text += f": {_cut(lane['cause'], 300)}"
    return text + (f"; **fix**: {lane['fix']}" if lane.get("fix") else "")


def _cut(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reason(one_line: str) -> str:
    """A refusal as the manifest records it (what; cause; fix: remedy): the cause cut when long, the fix never."""
    head, sep, fix = one_line.partition("; fix: ")
    return _cut(head, 400) + (f"; **fix**: {fix}" if sep else "")


def _ms(value) -> str:
    return f"{value:.1f} ms" if isinstance(value, (int, float)) else "-"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def legacy_lines(row: Dict[str, Any]) -> List[tuple]:
    """(lane, made/refused, checked, host latency) of the legacy lane's CPU and NNAPI models."""
    lane = row["legacy"]
    if not lane["ok"]:
        return [("TorchScript CPU + NNAPI", _refusal(lane), "-", "-")]
    verified = (row.get("verify") or {}).get("rows", {})
    medians = (row.get("bench") or {}).get("median_ms", {})
    out = []
    for f in lane["files"]:
        variant = f["file"].rsplit("-", 1)[0]  # mobilenetv2-quant_none-cpu.pt -> bench's mobilenetv2-quant_none
        if f["backend"] == "cpu":
            out.append((f"CPU quant_{f['mode']}", "made", "host check (convert)", _ms(medians.get(variant))))
        else:
            out.append((f"NNAPI quant_{f['mode']}", "made", _nnapi_check(verified, f["mode"]), "-"))
    for mode, why in (lane.get("not_made") or {}).items():
        out.append((f"CPU + NNAPI {mode}", f"refused (exit 10): {_reason(why)}", "-", "-"))
    for x in lane["nnapi_refused"]:
        alt = f"; {x['alternative']}" if x.get("alternative") else ""
        out.append((f"NNAPI quant_{x['mode']}", f"refused: {x['reason']}{alt}", "-", "-"))
    if "verify" in row and not row["verify"]["ok"]:
        out.append(("NNAPI verify", _refusal(row["verify"]), "-", "-"))
    return out


def _nnapi_check(verified: Dict[str, Any], mode: str) -> str:
    v = verified.get(f"quant_{mode}") or next((x for k, x in verified.items() if k.endswith(mode)), None)
    if v is None:
        return "-"
    if not v["ok"]:
        return f"**verify fails**: {v['why']}"
    return f"verify ok ({v['lsb']} LSB)" if v["lsb"] is not None else "verify ok"


def _pte_check(c) -> str:
    if c is None:
        return "-"
    if not c["ran"]:
        return "not run here"
    text = "ok" if c["ok"] else f"**fails**: {c['reason']}"
    return text + (f" (int8 grid {c['grid_rule']})" if c.get("grid_rule") else "")


def executorch_lines(row: Dict[str, Any]) -> List[tuple]:
    lane = row["executorch"]
    if not lane["ok"]:
        return [("ExecuTorch", _refusal(lane), "-", "-")]
    bench = row.get("pte_bench") or {}
    if bench and not bench.get("ok", True):
        return [(f"ExecuTorch {v}", "made", _refusal(bench), "-") for v in lane["files"]]
    out = []
    for variant in lane["files"]:
        check = _pte_check((bench.get("checks") or {}).get(variant))
        out.append((f"ExecuTorch {variant}", "made", check, _ms((bench.get("median_ms") or {}).get(variant))))
    return out + [(f"ExecuTorch {variant}", f"refused (exit 10): {_reason(why)}", "-", "-")
                  for variant, why in (lane.get("not_made") or {}).items()]


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").is_file() else \
        platform.processor()
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} logical CPUs"


def markdown(rows: List[Dict[str, Any]]) -> str:
    return "\n".join(_header() + _table(rows) + ["", *_notes(rows), "", _times(rows)]) + "\n"


def _header() -> List[str]:
    from importlib.metadata import version

    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [f"Generated by `python benchmarks/zoo_table.py` on {when}, on {machine()} (shared), torch "
            f"{version('torch')}. Random weights, {CALIBRATION} calibration inputs, legacy modes "
            f"{' and '.join(MODES)}, ExecuTorch {' and '.join(DELEGATES)}; latencies: median of "
            f"{TIMING['iters']} iterations after {TIMING['warmup']} warm-up, {TIMING['threads']} thread "
            "(cheap settings: comparable within a row, rough across rows).", "",
            "| model | lane | made / refused (why) | checked | host latency |", "|---|---|---|---|---|"]


def _table(rows: List[Dict[str, Any]]) -> List[str]:
    lines = []
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['model']} | all | **error**: {_cell(row['error'])} | - | - |")
            continue
        for lane, made, check, ms in legacy_lines(row) + executorch_lines(row):
            lines.append(f"| {row['model']} | {lane} | {_cell(made)} | {_cell(check)} | {ms} |")
    return lines


def _notes(rows: List[Dict[str, Any]]) -> List[str]:
    """The delegates not lowered here, and the models a stopped run has not reached yet (it resumes there)."""
    skipped = {k: v for r in rows for k, v in ((r.get("executorch") or {}).get("skipped") or {}).items()}
    notes = ["ExecuTorch delegates not lowered on this machine (every model): "
             + "; ".join(f"{k}: {v}" for k, v in sorted(skipped.items()))] if skipped else []
    missing = [m for m in ZOO if m not in {r["model"] for r in rows}]
    return notes + [_commits(rows)] + ([f"Not run yet ({len(missing)} of {len(ZOO)}): {', '.join(missing)}."] if missing else [])


def _commits(rows: List[Dict[str, Any]]) -> str:
    """Which commit each row ran at (a resumed run can span several)."""
    at: Dict[str, List[str]] = {}
    for r in rows:
        at.setdefault(r.get("commit", "unknown (a row from before rows recorded their commit)"), []).append(
            r["model"] + (f" {r['ran']}" if r.get("ran") else ""))
    if len(at) == 1:
        return f"Every row ran at commit {next(iter(at))}."
    return "Rows ran at several commits: " + "; ".join(f"{c}: {', '.join(m)}" for c, m in at.items()) + "."


def _times(rows: List[Dict[str, Any]]) -> str:
    total = {"model": "all", "seconds": sum(r.get("seconds", 0) for r in rows)}
    if all("cpu_seconds" in r for r in rows):
        total["cpu_seconds"] = sum(r["cpu_seconds"] for r in rows)
    secs = ", ".join(f"{r['model']} {_spent(r)}" for r in [*rows, total])
    return ("Time per model (all lanes, one child process each; wall, and the CPU time of the child's threads, which "
            f"depends much less than the wall time on other work on the machine): {secs}.")


def _spent(row: Dict[str, Any]) -> str:
    cpu = row.get("cpu_seconds")
    return f"{row.get('seconds', 0):.0f} s" + (f" (CPU {cpu:.0f} s)" if cpu is not None else "")


def write_table(state: Path, out: Path) -> None:
    rows = load_rows(state)
    write([rows[m] for m in ZOO if m in rows], out)


def write(rows: List[Dict[str, Any]], out: Path) -> None:
    from toolchain.fsutil import atomic_write_json, atomic_write_text

    text = out.read_text() if out.is_file() else f"# Model zoo\n\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    atomic_write_text(out, f"{head}{BEGIN}\n{markdown(rows)}{END}{tail}")
    atomic_write_json(out.with_suffix(".json"), rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(ZOO), help="comma-separated (default: the whole zoo)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "zoo.md")
    ap.add_argument("--state", type=Path, default=None, help="rows of models done (default: build/zoo-state)")
    ap.add_argument("--again", action="store_true", help="run the models again even when their row is done")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per model")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.one:
        os.chdir(ROOT)  # the model paths are relative to the repository's root (ZOO_MODELS)
        print(ROW_MARK + json.dumps(one_model(args.one, args.dir), default=str), flush=True)
        return 0
    wanted = [m for m in args.models.split(",") if m]
    unknown = [m for m in wanted if m not in ZOO]
    if unknown:
        print(f"unknown zoo model(s): {', '.join(unknown)}; the zoo: {', '.join(ZOO)}", file=sys.stderr)
        return 2
    state = args.state or ROOT / "build" / "zoo-state"
    done = {} if args.again else load_rows(state)
    for name in wanted:
        if name in done:
            print(f"{name}: done before ({state / (name + '.json')}; --again runs it again)", flush=True)
            continue
        row = {**run_child(name, args.timeout), "commit": commit(),
               "ran": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
        save_row(state, row)
        print(f"{name}: {row.get('seconds', 0):.0f} s" + (f", {row['error']}" if "error" in row else ""), flush=True)
        write_table(state, args.out)
    write_table(state, args.out)  # also when every model was done before: the table of the rows kept
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
