"""``invoke deploy``: check, push, install, benchmark and record, one worker per device."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import RecordError, TorchdroidError, UsageError
from toolchain.fsutil import sha256_file
from toolchain.records import (
    APP_INFO_KIND,
    APP_INFO_NAME,
    APP_INFO_SCHEMA,
    BuildInfo,
    ConvertManifest,
    ModelFile,
    now_iso,
    read_record,
)

from . import bench as _bench
from .adb import Adb, state_error
from .checks import DeviceFacts, check_abi, check_commits, check_space, elf_abi, parse_df_available
from .hashes import HASH_CACHE_NAME, LocalHashes
from .install import install_apk
from .push import PushItem, check_dir, parse_state, push_all, state_command
from .results import DB_NAME, ResultRow, ResultStore, export
from .servers import Target, list_servers, problem_row, select
from .status import device_lines

log = logging.getLogger(__name__)

_PROJECT_RE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class DeploySettings:
    models: Path  # directory with the convert manifest
    results: Path  # results directory (SQLite + exports)
    build_info: Optional[Path] = None  # build-info.json (or its directory)
    binary: Optional[Path] = None  # --binary overrides the build-info's artefact
    app_dir: Optional[Path] = None  # directory with torchdroid-app.json
    apk: Optional[Path] = None  # --apk overrides the app-info's APK
    application_id: Optional[str] = None
    activity: str = ".MainActivity"
    variants: Tuple[str, ...] = ()  # () = all
    serials: Tuple[str, ...] = ()  # () = every connected device
    adb_host: Optional[str] = None  # None: ANDROID_ADB_SERVER_ADDRESS or 127.0.0.1 (adb's -H)
    adb_port: Optional[int] = None  # None: ANDROID_ADB_SERVER_PORT or 5037 (adb's -P)
    servers: Tuple[str, ...] = ()  # HOST:PORT of every adb server (--adb-server); () = the one above
    servers_from: str = "--adb-server"  # where ``servers`` came from (for messages): or "deploy.servers"
    device_dir: str = "/data/local/tmp/torchdroid"
    project: str = "default"
    bench: bool = True
    app_bench: bool = True
    install: bool = True
    options: _bench.BenchOptions = field(default_factory=_bench.BenchOptions)
    allow_mismatch: bool = False
    gatord: Optional[Path] = None
    timeout: float = 120.0  # per adb call (benchmarks use options.timeout)
    app_wait: float = 120.0


@dataclass
class DeviceReport:
    serial: str  # unique in the run (SERIAL@HOST:PORT when two servers list the same serial)
    server: str = ""  # HOST:PORT of its adb server
    facts: Optional[DeviceFacts] = None
    pushed_bytes: int = 0
    pushed_files: int = 0
    skipped_files: int = 0
    installed: Optional[bool] = None  # True: pm install ran; False: the same APK was already installed
    install_error: Optional[str] = None
    rows: List[ResultRow] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


@dataclass
class DeployResult:
    devices: List[DeviceReport]
    run_id: Optional[int]
    db_path: Path
    exports: Dict[str, Path]
    warnings: List[str]
    directory: str

    @property
    def rows(self) -> List[ResultRow]:
        return [r for d in self.devices for r in d.rows]

    @property
    def failed(self) -> List[DeviceReport]:
        return [d for d in self.devices if d.errors]


def project_name(text: str) -> str:
    name = _PROJECT_RE.sub("-", text).strip("-.") or "default"
    return name[:64]


@dataclass
class _Inputs:
    binary: Optional[Path]
    abi: Optional[str]
    commit: str
    models: List[ModelFile]
    apk: Optional[Path]
    application_id: Optional[str]
    activity: str
    hashes: LocalHashes = field(default_factory=LocalHashes)  # each local file hashed once for all devices


def _load_inputs(s: DeploySettings) -> Tuple[_Inputs, List[str]]:
    warnings: List[str] = []
    binary, abi, commit = None, None, ""
    if s.bench:
        if s.binary:
            binary = Path(s.binary)
            if not binary.is_file():
                raise UsageError(f"the benchmark binary {binary} does not exist",
                                 remedy="pass the speed_benchmark_torch that `invoke build-android` built")
            abi = elf_abi(binary)
            if s.build_info and Path(s.build_info).exists():
                commit = BuildInfo.load(s.build_info).commit
        else:
            if not s.build_info:
                raise UsageError("no benchmark binary", remedy="run `invoke build-android`, or pass --binary PATH")
            info = BuildInfo.load(s.build_info)
            binary, abi, commit = info.artefact(_bench.BINARY_NAME), info.abi, info.commit
            if not binary.is_file():
                raise RecordError(f"{info.path} names {binary}, which does not exist",
                                  remedy="run `invoke build-android` again, or pass --binary PATH")
    manifest = ConvertManifest.load(s.models)
    if s.variants:
        models = [f for name in s.variants for f in manifest.find(name).values()]
    else:
        models = manifest.files
    if not models:
        raise RecordError(f"{manifest.path} lists no models", remedy=ConvertManifest.REMEDY)
    for f in models:  # the full hash is checked while the file is sent (or matched on the device)
        if not f.path.is_file() or f.path.stat().st_size != f.size:
            f.check_hash()
    if s.bench and s.options.bundled_input < 0:  # refuse before anything is pushed
        for f in models:
            _bench.input_args(f.input)
    if s.bench and binary is not None:
        warnings += check_commits(commit, {f.file: f.torch_git_version for f in models}, s.allow_mismatch)
    apk, app_id, activity = None, s.application_id, s.activity
    if s.install:
        info_path = Path(s.app_dir) / APP_INFO_NAME if s.app_dir else None
        app = None
        if info_path is not None and info_path.is_file():
            app = read_record(info_path, APP_INFO_KIND, APP_INFO_SCHEMA, "run `invoke make-app` and `invoke build-app`")
        if s.apk:
            apk = Path(s.apk)
        elif app and app.get("apk"):
            apk = (info_path.parent / app["apk"]["path"]).resolve()
            if apk.is_file() and app["apk"].get("sha256") and sha256_file(apk) != app["apk"]["sha256"]:
                raise RecordError(f"{apk} does not match its app-info record",
                                  remedy="run `invoke build-app` again")
        else:
            raise UsageError("no APK to install", cause=f"no app-info with an \"apk\" entry at {info_path}",
                             remedy="run `invoke build-app`, pass --apk PATH, or --no-install")
        if not apk.is_file():
            raise UsageError(f"the APK {apk} does not exist", remedy="run `invoke build-app` or pass --apk PATH")
        if app:
            app_id = app_id or app.get("application_id")
            activity = app.get("activity") or activity
        if not app_id:
            raise UsageError("the app's application id is unknown",
                             remedy="set app.application_id in the config (or use the app-info of `invoke make-app`)")
    return _Inputs(binary, abi, commit, models, apk, app_id, activity), warnings


def deploy(s: DeploySettings, on_status: Optional[Callable[[str, str], None]] = None) -> DeployResult:
    """Deploy to every selected device in parallel; a failing device never stops the others."""
    adb = Adb.locate(s.servers, s.adb_host, s.adb_port, timeout=s.timeout, source=s.servers_from)
    inputs, warnings = _load_inputs(s)
    inputs.hashes.load(Path(s.results) / HASH_CACHE_NAME)  # local files' digests: not read again when unchanged
    for w in warnings:
        log.warning("%s", w)
    directory = check_dir(f"{s.device_dir.rstrip('/')}/{project_name(s.project)}")
    targets, unreachable = select(list_servers(adb), s.serials)
    reports = [DeviceReport(t.label, str(t.address)) for t in targets]
    started = now_iso()
    with contextlib.ExitStack() as stack:
        status = on_status or stack.enter_context(device_lines())
        _run_workers(reports, targets, s, inputs, directory, status)
    inputs.hashes.close()

    for u in unreachable:  # a server that is down, and the named devices it may hold: rows with the reason
        reports.append(DeviceReport(u.serial or f"(adb server {u.address})", str(u.address), errors=[str(u.error)]))
    for rep in reports:
        for r in rep.rows:
            r.server = rep.server
        if rep.errors and not rep.rows:
            rep.rows.append(problem_row(rep.serial, rep.server, rep.errors[0]))
    rows = [r for rep in reports for r in rep.rows]
    store = ResultStore(Path(s.results) / DB_NAME)
    run_id, exports = None, {}
    if rows:
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(s).items()}
        run_id = store.add_run(started, project_name(s.project), inputs.commit, settings, rows)
        exports = export(rows, Path(s.results), f"run-{run_id:04d}")
        exports.update({f"latest_{k}": v for k, v in export(rows, Path(s.results), "latest").items()})
    return DeployResult(reports, run_id, store.path, exports, warnings, directory)


def _run_workers(reports: List[DeviceReport], targets: List[Target], s: DeploySettings,
                 inputs: _Inputs, directory: str, status: Callable[[str, str], None]) -> None:
    """One worker thread per device (whichever adb server it is on); whatever one device does, the others go on."""

    def work(rep: DeviceReport, target: Target) -> None:
        try:
            _deploy_device(target, rep, s, inputs, directory, lambda t: status(rep.serial, t))
        except TorchdroidError as e:
            rep.errors.append(str(e))
            status(rep.serial, f"failed: {e.what}")
        except Exception as e:  # a bug or an unexpected adb failure: this device only
            log.debug("[%s] unexpected failure", rep.serial, exc_info=True)
            rep.errors.append(f"{type(e).__name__}: {e}")
            status(rep.serial, f"failed: {type(e).__name__}: {e}")

    with ThreadPoolExecutor(max_workers=max(1, len(reports)), thread_name_prefix="deploy") as pool:
        list(pool.map(work, reports, targets))


def _deploy_device(target: Target, rep: DeviceReport, s: DeploySettings, inputs: _Inputs,
                   directory: str, status: Callable[[str], None]) -> None:
    if target.state != "device":
        raise state_error(rep.serial, target.state)
    dev = target.server.device(target.serial, s.timeout)
    status("checking")
    parent = str(Path(directory).parent)
    # one round trip: the facts, the free space and what is in the directory already (read only)
    candidates = [_bench.BINARY_NAME, _bench.GATORD_NAME] + [m.file for m in inputs.models]
    props, df, there = dev.probe(parent, then=state_command(directory, candidates))
    facts = DeviceFacts.from_props(rep.serial, props)
    rep.facts = facts
    if s.bench:
        check_abi(facts, inputs.abi or "?")
    nnapi_reason = facts.nnapi_skip_reason()
    models = [m for m in inputs.models if m.backend != "nnapi" or nnapi_reason is None]
    if nnapi_reason:
        rep.notes.append(f"NNAPI skipped: {nnapi_reason}")
        for m in inputs.models:
            if m.backend == "nnapi":
                rep.rows.append(_row(facts, inputs, m, "binary", "skipped", s.options, reason=nnapi_reason))
    items: List[PushItem] = []
    if s.bench:
        items.append(PushItem(inputs.binary, _bench.BINARY_NAME, 0o755))
        if s.gatord:
            items.append(PushItem(Path(s.gatord), _bench.GATORD_NAME, 0o755))
    items += [PushItem(m.path, m.file, 0o644, m.sha256) for m in models]
    needed = sum(it.local.stat().st_size for it in items) + (inputs.apk.stat().st_size * 2 if inputs.apk else 0)
    check_space(facts, parse_df_available(df), needed, parent)

    total = sum(it.local.stat().st_size for it in items)
    done = [0, time.monotonic()]

    def on_bytes(n: int) -> None:  # called from this worker's thread only
        done[0] += n
        if time.monotonic() - done[1] >= 2.0:
            done[1] = time.monotonic()
            status(f"pushing: {done[0] / 1e6:.1f} of up to {total / 1e6:.1f} MB")

    existing = parse_state(dev, directory, there, [it.name for it in items])
    outcomes = push_all(dev, directory, items, on_progress=status, on_bytes=on_bytes, existing=existing,
                        hashes=inputs.hashes)
    rep.pushed_bytes = sum(o.bytes for o in outcomes)
    rep.pushed_files = sum(o.pushed for o in outcomes)
    rep.skipped_files = sum(not o.pushed for o in outcomes)
    status(f"files ready: {rep.pushed_files} pushed ({rep.pushed_bytes / 1e6:.1f} MB of {total / 1e6:.1f}), "
           f"{rep.skipped_files} unchanged")

    if inputs.apk is not None:
        status(f"installing {inputs.application_id}")
        try:
            rep.installed = install_apk(dev, directory, inputs.apk, inputs.application_id)
        except TorchdroidError as e:  # the binary benchmarks do not need the app: record and go on
            rep.install_error = e.what
            rep.errors.append(str(e))
            status(f"install failed: {e.what}")

    if not s.bench:
        return
    for i, m in enumerate(models, 1):
        status(f"benchmarking {m.file} ({i}/{len(models)}, {s.options.repeat}x{s.options.iters} iterations)")
        mb = _bench.run_model(dev, directory, m.file, m.backend, s.options, m.input)
        st = mb.stats
        if st is None:
            tail = "\n".join("\n".join(mb.outputs).splitlines()[-15:])
            rep.rows.append(_row(facts, inputs, m, "binary", "failed", s.options, reason=mb.problem or "failed",
                                 output_tail=tail, repeats=len(mb.runs)))
        else:
            rep.rows.append(_row(facts, inputs, m, "binary", "ok", s.options, stats=st,
                                 reason=mb.problem or ""))
    if inputs.apk is not None and rep.installed is not None and s.app_bench:
        for backend in ("cpu", "nnapi"):
            if backend == "nnapi" and nnapi_reason:
                continue
            status(f"in-app benchmark ({backend})")
            ab = _bench.run_app(dev, inputs.application_id, inputs.activity, backend, s.options, s.app_wait)
            rep.rows.append(_app_row(facts, inputs, ab, s.options, models))
    status("done")


def _row(facts: DeviceFacts, inputs: _Inputs, m: ModelFile, source: str, status: str, opts: _bench.BenchOptions,
         stats: Optional[_bench.BenchStats] = None, reason: str = "", output_tail: str = "",
         repeats: int = 0) -> ResultRow:
    return ResultRow(
        serial=facts.serial, device_model=facts.model, board=facts.board, release=facts.release, sdk=facts.sdk,
        abi=inputs.abi or "", stem=m.stem, variant=m.variant, mode=m.mode, backend=m.backend, source=source,
        status=status, model_file=m.file,
        median_ms=stats.median_ms if stats else None, p90_ms=stats.p90_ms if stats else None,
        min_ms=stats.min_ms if stats else None, spread_pct=stats.spread_pct if stats else None,
        samples=stats.samples if stats else 0, repeats=stats.runs if stats else repeats,
        iters=opts.iters, warmup=opts.warmup, torch_commit=m.torch_git_version or "",
        binary_commit=inputs.commit, reason=reason, output_tail=output_tail,
    )


def _app_row(facts: DeviceFacts, inputs: _Inputs, ab: _bench.AppBench, opts: _bench.BenchOptions,
             models: Sequence[ModelFile]) -> ResultRow:
    rec = ab.record or {}
    variant = rec.get("variant") or "quant_none"
    mode = variant.split("quant_")[-1] if "quant_" in variant else variant
    stem = next((m.stem for m in models if variant in (m.variant, m.qualified_variant)), "app")
    ok = ab.record is not None and not ab.problem and rec.get("median_ms") is not None
    reason = ab.problem or ("NNAPI fell back to CPU in the app" if rec.get("fell_back") else "")
    return ResultRow(
        serial=facts.serial, device_model=facts.model, board=facts.board, release=facts.release, sdk=facts.sdk,
        abi=inputs.abi or "", stem=stem, variant=variant, mode=mode, backend=ab.backend, source="app",
        status="ok" if ok else "failed", model_file="(app)",
        median_ms=rec.get("median_ms"), p90_ms=rec.get("p90_ms"), min_ms=rec.get("min_ms"),
        samples=int(rec.get("iters") or 0), repeats=1 if ok else 0, iters=int(rec.get("iters") or opts.iters),
        warmup=int(rec.get("warmup") or opts.warmup), binary_commit=inputs.commit, reason=reason,
    )
