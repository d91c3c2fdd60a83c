"""Inputs for deploy-executorch against a virtual device: a stand-in runner, its build-info, .pte programs, legacy results."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Optional

from deploy.executorch import TRACED_RUNNER
from tests.executorch_support.runtime import FIXTURE, fake_pte
from toolchain import pins
from toolchain.fsutil import sha256_file
from tests.executorch_support.section import write_section
from toolchain.records import BuildInfo, DeployResults, MANIFEST_KIND, MANIFEST_SCHEMA, ResultRow, write_record

RUNNER_SRC = FIXTURE / "examples" / "portable" / "executor_runner"


def build_standin_runner(out_dir: Path, api_level: int = 29, event_tracer: bool = False,
                         print_all_output_bool: bool = False) -> Path:
    """The fixture executor_runner (posix logging) compiled with the host C compiler; ``event_tracer``: as built with
    EXECUTORCH_ENABLE_EVENT_TRACER (takes --etdump_path, writes a real ETDump with the installed runtime).  It prints
    the program's real outputs with ``--print_output=all`` (runner_output.py, E19); ``print_all_output_bool``: a
    v1.0-v1.2 runner, which knows only ``--print_all_output`` and refuses ``--print_output`` (E21)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / pins.RUNNER
    cc = shutil.which("gcc") or shutil.which("cc")
    tracer = ["-DET_EVENT_TRACER_ENABLED=1", f'-DFIXTURE_ETDUMP_WRITER="{RUNNER_SRC / "etdump_writer.py"}"'] if event_tracer else []
    printer = [f'-DFIXTURE_OUTPUT_PRINTER="{RUNNER_SRC / "runner_output.py"}"']
    if print_all_output_bool:
        printer.append("-DFIXTURE_PRINT_ALL_OUTPUT_BOOL=1")
    subprocess.run([cc, "-O1", f"-DFIXTURE_NDK_API_LEVEL={api_level}", *tracer, *printer, "-o", str(exe),
                    str(RUNNER_SRC / "executor_runner.c"), str(RUNNER_SRC / "android_note.c"), "-lm"], check=True)
    return exe


def write_runtime_build_info(build_dir: Path, runner: Path, abi: str = "arm64-v8a", event_tracer: bool = False,
                             traced: Optional[Path] = None) -> Path:
    """An earlier build-android's build-info (one runner, traced when its top-level ``event_tracer`` says so), or with
    ``traced``, today's: the untraced ``runner`` and ``executor_runner_traced``, each with its ``event_tracer``."""
    out = build_dir / "android" / abi / "executorch"
    out.mkdir(parents=True, exist_ok=True)
    artefacts = []
    for name, exe, tracer in ((pins.RUNNER, runner, event_tracer), (TRACED_RUNNER, traced, True)):
        if exe is not None:
            shutil.copy2(exe, out / name)
            artefacts.append({"name": name, "path": name, "kind": "binary", "sha256": sha256_file(out / name),
                              **({"event_tracer": tracer} if traced is not None else {})})
    BuildInfo.create(out / "build-info.json", {
        "lane": pins.RUNTIME_LANE, "runtime": "executorch", "commit": pins.RUNTIME_COMMIT, "abi": abi, "api_level": 29,
        **({} if traced is not None else {"event_tracer": event_tracer}), "artefacts": artefacts})
    return out / "build-info.json"


def write_pte_models(models: Path, variants=(("fp32", "xnnpack", 6000), ("int8", "xnnpack", 2000),
                                            ("fp32", "portable", 6000), ("fp32", "vulkan", 6000))) -> Path:
    models.mkdir(parents=True, exist_ok=True)
    if not (models / "manifest.json").is_file():  # beside a legacy manifest: keep its models (write_section does)
        write_record(models / "manifest.json", MANIFEST_KIND, MANIFEST_SCHEMA, {"conversions": {}, "files": []})
    spec = {"shape": [1, 3, 224, 224], "dtype": "float32"}
    files = []
    for precision, delegate, size in variants:
        p = fake_pte(models / f"mobilenetv2-{precision}-{delegate}.pte", size)
        files.append({"file": p.name, "sha256": sha256_file(p), "size": p.stat().st_size, "model": "mobilenet_v2",
                      "stem": "mobilenetv2", "precision": precision, "delegate": delegate, "input": spec,
                      "output": {"shape": [1, 1000], "dtype": "float32"},
                      "baseline": "quant_none" if precision == "fp32" else "quant_full", "runs_on_host": delegate != "vulkan",
                      "executorch": {"version": pins.EXECUTORCH_VERSION}, "torch": {"version": "2.14.1"}})
    write_section(models, {"files": files})
    return models


def write_legacy_results(results: Path, serial: str, cpu_ms=(40.0, 20.0), nnapi_ms=(30.0, 10.0)) -> Path:
    rows = legacy_result_rows(serial, cpu_ms, nnapi_ms)
    results.mkdir(parents=True, exist_ok=True)
    return DeployResults(7, "2026-11-23T16:00:00+00:00", rows).write(results / "latest.json")


def legacy_result_rows(serial: str, cpu_ms=(40.0, 20.0), nnapi_ms=(30.0, 10.0)) -> list:
    """A TorchScript run's binary rows of one device: CPU and NNAPI, quant_none and quant_full."""
    rows = []
    for (variant, mode), cpu, nnapi in zip((("quant_none", "none"), ("quant_full", "full")), cpu_ms, nnapi_ms):
        for backend, ms in (("cpu", cpu), ("nnapi", nnapi)):
            rows.append(ResultRow(serial, "Virtual Pixel", "sdm670", "11", 30, "arm64-v8a", "mobilenetv2", variant, mode,
                                  backend, "binary", "ok", f"mobilenetv2-{variant}-{backend}.pt", ms, ms * 1.1, ms * 0.9,
                                  samples=10, repeats=1, iters=10, run_id=7))
    return rows


def deploy_executorch(models: Path, info: Path, results: Path, port: int, warmup: int, iters: int, repeat: int,
                      **kw):
    """deploy's one loop with the ExecuTorch format only (what `invoke deploy-executorch` runs): the record it wrote."""
    from deploy import BenchOptions, DeploySettings, deploy

    settings = DeploySettings(models=models, results=results, formats=("executorch",), runner_build_info=info,
                              adb_port=port, options=BenchOptions(warmup=warmup, iters=iters, repeat=repeat,
                                                                  timeout=kw.pop("timeout", 600)), **kw)
    return deploy(settings, on_status=lambda *_: None).executorch


def latest_executorch(results: Path, run=None):
    """The ExecuTorch part of a deploy run (default: the latest) as `invoke report` draws it, from the run's
    document: per device the programs beside the run's TorchScript rows with their speed-ups, the format's facts
    and the programs' verdicts."""
    from types import SimpleNamespace

    from deploy.results import format_lines, run_document

    doc, why = run_document(results, run)
    assert doc is not None, why or f"no run document in {results}"
    lines = format_lines(doc.rows)
    facts = doc.executorch
    return SimpleNamespace(run_id=doc.run_id, rows=lines, facts=facts, problems=facts.get("problems", []),
                           notes=facts.get("notes", []), operators=facts.get("operators", []),
                           operators_of=lambda serial: [o for o in facts.get("operators", []) if o["serial"] == serial],
                           verdicts=[v for v in doc.numerics or [] if v.backend == "executorch"])
