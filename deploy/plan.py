"""Deploy's plan: what to push, install and benchmark, checked on the host before any device is touched.

A deploy may carry a benchmark binary, an APK, or both, whichever source they come from (options,
config, or the records of build-android / build-app).  Each part is planned by its own step:
``plan_binary`` → ``plan_models`` → ``plan_app``; ``make_plan`` joins them.
"""

from __future__ import annotations

import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from toolchain.errors import RecordError, TorchdroidError, UsageError
from toolchain.fsutil import sha256_file
from toolchain.hardware_records import LISTER_NAME
from toolchain.numerics_records import ReferenceOutputs, references_path
from toolchain.records import (APP_BENCH_CONTRACT, APP_BENCH_META, BENCH_BINARY, AppInfo, BuildInfo, ConvertManifest,
                               ModelFile)
from toolchain.settings import default
from toolchain.variants import IN_FILE_NAME, check_all

from . import bench as _bench
from .apk import ApkFacts, read_apk
from .hashes import LocalHashes
from .preflight import check_commits, elf_abi, load_alignment
from .stf import FarmSettings, api_base

_PROJECT_RE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class DeploySettings:
    models: Path  # directory with the convert manifest
    results: Path  # results directory (SQLite + exports)
    build_info: Optional[Path] = None  # build-info.json (or its directory)
    binary: Optional[Path] = None  # --binary overrides the build-info's artefact
    app_dir: Optional[Path] = None  # directory with torchdroid-app.json
    apk: Optional[Path] = None  # --apk overrides the app-info's APK
    variants: Tuple[str, ...] = ()  # () = all
    serials: Tuple[str, ...] = ()  # () = ANDROID_SERIAL, else every connected device
    adb_host: Optional[str] = None  # None: ANDROID_ADB_SERVER_ADDRESS or 127.0.0.1 (adb's -H)
    adb_port: Optional[int] = None  # None: ANDROID_ADB_SERVER_PORT or 5037 (adb's -P)
    servers: Tuple[str, ...] = ()  # HOST:PORT of every adb server (--adb-server); () = the one above
    servers_from: str = "--adb-server"  # where ``servers`` came from (for messages): or "deploy.servers"
    device_dir: str = default("deploy.device_dir")
    project: str = field(default_factory=lambda: Path.cwd().name)  # like the task: this directory's name
    bench: bool = True
    app_bench: bool = True
    install: bool = True
    hardware: bool = True  # which hardware NNAPI chose per operation, from its log (deploy/nnapi_log.py)
    numerics: bool = True  # each model's output on its bundled inputs against the host reference (deploy/numerics.py)
    options: _bench.BenchOptions = field(default_factory=_bench.BenchOptions)
    allow_mismatch: bool = False
    fail_on_numerics: bool = False  # a phone whose outputs differ fails the task (exit 8), not only a warning
    gatord: Optional[Path] = None
    timeout: float = default("deploy.timeout")  # per adb call (benchmarks use options.timeout)
    app_wait: float = default("deploy.app_wait")  # seconds for the app's first progress line (start + model load)
    # torchscript: the benchmark binary, its models and the app; executorch: executor_runner and the .pte programs
    # (deploy/executorch.py) from the runner's build-info
    formats: Tuple[str, ...] = ("torchscript",)
    runner_build_info: Optional[Path] = None
    rerun: Tuple[str, ...] = ("invoke", "deploy")  # the command that runs this deploy again (remedies name it)
    stf: Optional[FarmSettings] = None  # phones lent by a device farm instead of those on the adb servers


def project_name(text: str) -> str:
    name = _PROJECT_RE.sub("-", text).strip("-.") or "default"
    return name[:64]


def check_values(s: DeploySettings) -> None:
    """deploy's own values, before any record (manifest, build-info, app-info) is read: exit 2 naming the value."""
    from .adb import resolve_servers
    from .push import check_dir

    check_dir(f"{s.device_dir.rstrip('/')}/{project_name(s.project)}")
    resolve_servers(s.servers, s.adb_host, s.adb_port, source=s.servers_from)
    check_all(s.variants, "--variant", programs=False)
    if s.stf is not None:
        api_base(s.stf.url)
    if s.gatord is not None and not Path(s.gatord).is_file():
        raise UsageError(f"--profile-with-gatord {s.gatord} does not exist",
                         remedy="pass the path of Arm's gatord binary (Arm Streamline / Performance Studio), or leave "
                                "the option (config deploy.gatord) out")


@dataclass(frozen=True)
class BinaryPlan:
    path: Path
    abi: Optional[str]
    commit: str  # "" when unknown (--binary without a build-info)
    alignment: Optional[int]  # smallest LOAD p_align
    lister: Optional[Path] = None  # the NNAPI device lister build-android built beside it (None: not recorded)
    api_level: Optional[int] = None  # the API level it was built for (None: unknown); a farm's phones are chosen by it


@dataclass(frozen=True)
class AppPlan:
    apk: Path
    facts: ApkFacts
    variant: str  # quant_full ... ("unknown" for an app not made by make-app)
    stem: str  # mobilenetv2 ... (the package for an app not made by make-app)
    bench_skip: Optional[str] = None  # why the in-app benchmark cannot run in this app (None: it can)

    @property
    def package(self) -> str:
        return self.facts.package

    @property
    def activity(self) -> Optional[str]:
        """The activity that takes the benchmark intent: the one that declares the contract."""
        return self.facts.bench_activity

    @property
    def backends(self) -> Tuple[str, ...]:
        """What the in-app benchmark runs: an ExecuTorch app (``fp32-xnnpack``...) has no NNAPI model to ask for."""
        return ("cpu", "nnapi") if self.variant.startswith("quant_") or self.variant == "unknown" else ("cpu",)


@dataclass
class DeployPlan:
    binary: Optional[BinaryPlan]
    models: List[ModelFile]
    app: Optional[AppPlan]
    warnings: List[str] = field(default_factory=list)
    hashes: LocalHashes = field(default_factory=LocalHashes)  # each local file hashed once for all devices
    references: Optional[ReferenceOutputs] = None  # the host's outputs (None: numerics off or no record)
    executorch: Optional[Any] = None  # the ExecuTorch format's part (executorch.ExecutorchPlan)

    @property
    def commit(self) -> str:
        return self.binary.commit if self.binary else ""


# --------------------------------------------------------------------------- binary


def _recorded(info: BuildInfo, name: str, remedy: Optional[str] = None) -> Path:
    """A recorded artefact, checked against its build-info's hash; ``remedy``: the fix to print instead of the
    legacy binary's."""
    path = info.artefact(name)
    if not path.is_file():
        raise RecordError(f"{info.path} names {path}, which does not exist",
                          remedy=remedy or "run `invoke build-android` again, or pass --binary PATH")
    recorded = next((a.get("sha256") for a in info.get("artefacts", []) if a.get("name") == name), None)
    if recorded and sha256_file(path) != recorded:
        raise RecordError(f"{path} no longer matches its build-info {info.path}",
                          cause=f"{name} was rebuilt, replaced or modified after `invoke build-android` recorded it",
                          remedy=remedy or "run `invoke build-android` again (it rewrites the build-info), or pass "
                                           "the binary you mean with --binary PATH")
    return path


def _recorded_lister(info: Optional[BuildInfo]) -> Optional[Path]:
    """The NNAPI device lister; None when the build-info predates it (the hardware record says so)."""
    if info is None or not any(a.get("name") == LISTER_NAME for a in info.get("artefacts", [])):
        return None
    return _recorded(info, LISTER_NAME)


def plan_binary(s: DeploySettings) -> Optional[BinaryPlan]:
    """The benchmark binary: --binary, else the build-info's; None when neither is there (an app-only deploy)."""
    if not s.bench:
        return None
    info_there = bool(s.build_info) and Path(s.build_info).exists()
    info = BuildInfo.load(s.build_info, remedy="run `invoke build-android` first (or pass the file with "
                                               "--build-info, or the binary with --binary)") if info_there else None
    if s.binary:
        path = Path(s.binary)
        if not path.is_file():
            raise UsageError(f"the benchmark binary {path} does not exist",
                             remedy="pass the speed_benchmark_torch that `invoke build-android` built")
        return BinaryPlan(path, elf_abi(path), info.commit if info else "", load_alignment(path),
                          _recorded_lister(info), info.api_level if info else None)
    if info is None:
        return None
    path = _recorded(info, BENCH_BINARY)
    return BinaryPlan(path, info.abi or elf_abi(path), info.commit, load_alignment(path), _recorded_lister(info),
                      info.api_level)


# --------------------------------------------------------------------------- models


def _chosen_models(s: DeploySettings, manifest: ConvertManifest) -> List[ModelFile]:
    """Every model of the manifest, or those of ``s.variants`` (each file once); refuses an empty list."""
    if s.variants:
        chosen = [f for name in s.variants for f in manifest.find(name).values()]
        models = list({f.file: f for f in chosen}.values())  # a variant named twice is deployed once
    else:
        models = manifest.files
    if not models:
        raise RecordError(f"{manifest.path} lists no models", remedy=ConvertManifest.REMEDY)
    return models


def _check_inputs(s: DeploySettings, models: List[ModelFile], manifest_path: Path) -> None:
    """Refuse an input the benchmark could not pass, before anything is pushed."""
    if s.options.bundled_input < 0:
        for f in models:
            _bench.input_args(f.inputs)
    elif s.options.bundled_input > 0:
        _check_bundled_index(s.options.bundled_input, models, manifest_path)


def plan_models(s: DeploySettings, needed: bool) -> List[ModelFile]:
    """The converted models to push (every variant, or ``s.variants``); [] when not needed and not there."""
    if not needed and not ConvertManifest.exists(s.models):
        return []
    manifest = ConvertManifest.load(s.models)
    models = _chosen_models(s, manifest)
    for f in models:  # the full hash is checked while the file is sent (or matched on the device)
        if not f.path.is_file() or f.path.stat().st_size != f.size:
            f.check_hash()
    if needed:
        _check_inputs(s, models, manifest.path)
    return models


def _check_bundled_index(index: int, models, manifest_path) -> None:
    """``--use_bundled_input=N`` beyond the model's bundled inputs fails on the phone, after every push: refuse here.

    `invoke convert` bundles exactly one input per model (converter/export.py: one tuple given to
    ``augment_model_with_bundled_inputs``); a manifest entry may state another count as ``bundled_inputs``."""
    short = [f for f in models if index >= int(f.extra.get("bundled_inputs", 1) or 1)]
    if short:
        counts = sorted({int(f.extra.get("bundled_inputs", 1) or 1) for f in short})
        have = "one bundled input (index 0)" if counts == [1] else f"{'/'.join(map(str, counts))} bundled inputs"
        raise UsageError(
            f"--bundled-input {index}: {short[0].file} has only {have}",
            cause=f"{manifest_path} records what each model bundles; speed_benchmark_torch would fail on the phone "
                  "with an index beyond them, after the models were pushed",
            remedy="use --bundled-input 0 (the input convert bundles, config deploy.bundled_input), or -1 to pass "
                   "the manifest's input shape and type instead")


# --------------------------------------------------------------------------- app


def _app_info(s: DeploySettings) -> Optional[AppInfo]:
    return AppInfo.load(s.app_dir) if s.app_dir and AppInfo.exists(s.app_dir) else None


def _asset_variant(facts: ApkFacts) -> Tuple[Optional[str], Optional[str]]:
    """``(variant, stem)`` from the model asset names in the APK (``mobilenetv2-quant_full-cpu.pt``)."""
    with zipfile.ZipFile(facts.path) as z:
        for name in z.namelist():
            m = IN_FILE_NAME.search(os.path.basename(name)) if name.startswith("assets/") and \
                name.endswith((".pt", ".ptl", ".pte")) else None
            if m:
                return m.group(2), m.group(1)
    return None, None


def app_variant(facts: ApkFacts, info: Optional[AppInfo], recorded: bool) -> Tuple[str, str]:
    """``(variant, stem)`` of the app: its app-info's when this is the recorded APK, else from its assets."""
    variant, stem = _asset_variant(facts)
    if recorded and info is not None and info.variant:
        m = IN_FILE_NAME.search(info.qualified_variant or info.variant)
        if m:
            return m.group(2), m.group(1) or stem or "app"
    return variant or "unknown", stem or "app"


def _chosen_apk(s: DeploySettings, info: Optional[AppInfo], have_binary: bool) -> Tuple[Optional[Path], bool]:
    """``(APK, is it the app-info's)``: --apk, else the app-info's (checked against its hash), else None."""
    if s.apk:
        apk = Path(s.apk)
        if not apk.is_file():
            raise UsageError(f"the APK {apk} does not exist", remedy="run `invoke build-app` or pass --apk PATH")
        recorded = info is not None and info.apk_file is not None and info.apk_file == apk.resolve()
        return apk, recorded
    if info is not None and info.apk is not None:
        return info.check_apk(), True
    if have_binary:
        return None, False
    raise UsageError("nothing to deploy: no benchmark binary and no APK",
                     cause=f"no build-info at {s.build_info} and no app-info with an APK in {s.app_dir}",
                     remedy="run `invoke build-android` (binary) or `invoke build-app` (APK), or pass "
                            "--binary PATH / --apk PATH")


def plan_app(s: DeploySettings, have_binary: bool) -> Optional[AppPlan]:
    """The APK to install: --apk, else the app-info's; None (with the binary only) when there is none."""
    if not s.install:
        return None
    info = _app_info(s)
    apk, recorded = _chosen_apk(s, info, have_binary)
    if apk is None:
        return None
    facts = read_apk(apk)
    if recorded and info.application_id != facts.package:
        raise RecordError(f"the APK {apk} is {facts.package}, its app-info says {info.application_id}",
                          remedy="run `invoke build-app` again")
    skip = app_bench_skip(facts)
    if skip is not None:  # not torchdroid's app: installed and named by its package, never benchmarked
        return AppPlan(apk, facts, "unknown", facts.package, skip)
    variant, stem = app_variant(facts, info, recorded)
    return AppPlan(apk, facts, variant, stem)


def app_bench_skip(facts: ApkFacts) -> Optional[str]:
    """Why deploy cannot run the in-app benchmark in this APK, or None when it declares the contract deploy speaks
    (an app that does not would never log the lines deploy waits for: waiting on it only wastes minutes)."""
    if facts.bench_activity is None:
        return (f"{facts.package} does not declare torchdroid's in-app benchmark (no <meta-data android:name="
                f"\"{APP_BENCH_META}\"> on an activity, which apps made by `invoke make-app` have): it is installed, "
                "not benchmarked; the benchmark binary measures the models")
    if facts.bench_contract != str(APP_BENCH_CONTRACT):
        return (f"{facts.package} declares torchdroid's in-app benchmark contract version {facts.bench_contract!r}, "
                f"this torchdroid speaks version {APP_BENCH_CONTRACT}: it is installed, not benchmarked; regenerate "
                "the app with this torchdroid's `invoke make-app` and `invoke build-app`")
    return None


# --------------------------------------------------------------------------- the plan


def _refused_warnings(s: DeploySettings, models: List[ModelFile]) -> List[str]:
    """NNAPI models convert did not write: their CPU models go alone, and the run says why."""
    if not models:
        return []
    deployed = {(f.stem, f.mode) for f in models}
    manifest = ConvertManifest.load(s.models)
    stems = {stem for stem, _ in deployed}
    return [f"{r.line()}: only its CPU model is deployed" for r in manifest.refused if (r.stem, r.mode) in deployed] \
        + [f"{name} is not deployed: convert refused it ({why.split('; fix: ', 1)[0]})"
           for name, why in sorted(manifest.not_made().items()) if name.rsplit("-", 1)[0] in stems]


def _plan_warnings(s: DeploySettings, binary: Optional[BinaryPlan], app: Optional[AppPlan],
                   models: List[ModelFile]) -> List[str]:
    warnings: List[str] = []
    if app is not None and app.bench_skip and s.app_bench:
        warnings.append(f"in-app benchmark skipped: {app.bench_skip}")
    if binary is not None:
        warnings += check_commits(binary.commit, {f.file: f.torch_git_version for f in models}, s.allow_mismatch)
    warnings += _refused_warnings(s, models)
    return warnings + unoptimized_warnings(models)


def make_plan(s: DeploySettings) -> DeployPlan:
    """The TorchScript format's part (deploy/formats.py; the ExecuTorch format's is executorch.plan_executorch)."""
    binary = plan_binary(s)
    app = plan_app(s, binary is not None or not s.bench)
    models = plan_models(s, needed=binary is not None)
    if binary is None and app is None and not models:
        raise UsageError("nothing to deploy: no benchmark binary, no APK and no converted models",
                         remedy="run `invoke build-android`, or pass --binary PATH (or --apk PATH)")
    return DeployPlan(binary, models, app, _plan_warnings(s, binary, app, models),
                      references=plan_references(s, binary is not None))


def unoptimized_warnings(files: List[ModelFile]) -> List[str]:
    """What every CPU-vs-NNAPI (and ExecuTorch-vs-CPU) comparison on the phones must say about the TorchScript CPU
    models among ``files`` converted without optimize_for_mobile (nothing when there are none)."""
    bad = [f.file for f in files if f.backend == "cpu" and not f.extra.get("mobile_optimized", False)]
    return [f"the TorchScript CPU models ({', '.join(bad)}) were converted without optimize_for_mobile (the "
            "converting torch has no XNNPACK, as the x86_64 PyPI wheels): fused but not XNNPACK-prepacked, so the "
            "CPU numbers (and every speed-up over them) are those of unoptimised files; convert with a torch built "
            "with XNNPACK (aarch64 wheels, or a source build) for fully optimised CPU models"] if bad else []


def baseline_notes(models: Optional[str], rows: Sequence[Any]) -> List[str]:
    """:func:`unoptimized_warnings` for the TorchScript CPU models among the run's ``rows`` (the baselines of every
    speed-up), when the manifest at ``models`` still describes them; none when it cannot be read."""
    if not models:
        return []
    try:
        files = ConvertManifest.load(Path(models)).files
    except TorchdroidError:
        return []
    ran = {r.model_file for r in rows if r.backend == "cpu"}
    return unoptimized_warnings(sorted((f for f in files if f.file in ran), key=lambda f: f.file))


def plan_references(s: DeploySettings, binary: bool) -> Optional[ReferenceOutputs]:
    """The host's reference outputs (``invoke deploy`` computes them first); None when there is nothing to check."""
    path = references_path(s.models)
    if not (s.numerics and s.bench and binary) or not path.is_file():
        return None
    return ReferenceOutputs.load(path)
