"""``invoke make-app``: render the Gradle project around one converted variant."""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from toolchain import __version__ as TORCHDROID_VERSION
from toolchain import pins, records
from toolchain.errors import RecordError, UsageError
from toolchain.fsutil import atomic_copy, atomic_dir, atomic_write_bytes, atomic_write_text, sha256_file
from toolchain.progress import progress

from . import assets, validate
from .gradle import WRAPPER_JAR, Gradle, wrapper_jar_howto
from .runtime import Runtime, choose_runtime
from .template import AppTemplate

log = logging.getLogger(__name__)

LABELS_ASSET = "labels.txt"
SAMPLE_ASSET = "sample.jpg"
LUT_ASSET = "input_lut.bin"
ASSETS_DIR = Path("app/src/main/assets")


@dataclass(frozen=True)
class AppSettings:
    model: str = "quant_full"
    models: Path = Path("build/models")
    out: Path = Path("build/app")
    app_name: str = "torchdroid demo"
    application_id: str = "org.torchdroid.demo"
    abi_filters: Tuple[str, ...] = ("arm64-v8a",)
    min_sdk: int = 21
    target_sdk: Optional[int] = None  # None: the lane's compileSdk
    lane: str = pins.DEFAULT_LANE
    pytorch_android: Optional[str] = None
    aar: Optional[Path] = None
    force: bool = False
    build_dir: Path = Path("build")
    wrapper_jar: bool = True  # create gradle-wrapper.jar with a local Gradle when there is one


@dataclass
class MakeAppResult:
    out: Path
    app_info: Path
    variant: str
    application_id: str
    assets: Dict[str, int]  # asset name -> size
    runtime: Runtime
    wrapper_jar: bool
    notes: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Checked:
    variant: str
    application_id: str
    app_name: str
    abi_filters: Tuple[str, ...]
    min_sdk: int
    target_sdk: int
    lane: pins.Lane
    runtime: Runtime


def check(settings: AppSettings) -> _Checked:
    """Everything that can be validated before torch or the manifest is touched."""
    lane = pins.lane(settings.lane)
    target = lane.compile_sdk if settings.target_sdk in (None, "") else settings.target_sdk
    min_sdk, target_sdk = validate.sdk_levels(settings.min_sdk, target, lane.compile_sdk)
    return _Checked(
        variant=validate.variant_name(settings.model),
        application_id=validate.application_id(settings.application_id),
        app_name=validate.app_name(settings.app_name),
        abi_filters=validate.abi_filters(settings.abi_filters),
        min_sdk=min_sdk,
        target_sdk=target_sdk,
        lane=lane,
        runtime=choose_runtime(lane.name, settings.pytorch_android, settings.aar),
    )


def find_variant(models: Path, variant: str) -> Dict[str, records.ModelFile]:
    """The variant's ``{"cpu": ModelFile, "nnapi": ModelFile}`` from the convert manifest (hashes checked)."""
    found = records.ConvertManifest.load(models).find(variant)
    if "cpu" not in found:
        raise RecordError(f"the manifest in {models} has no CPU model for {variant}",
                          remedy=f"run `invoke convert --quant {variant.rsplit('_', 1)[-1]} --force`")
    for f in found.values():
        f.check_hash()
    return found


def make_app(settings: AppSettings) -> MakeAppResult:
    checked = check(settings)
    template = AppTemplate.locate()
    files = find_variant(Path(settings.models), checked.variant)
    cpu = files["cpu"]
    nnapi = files.get("nnapi")
    notes: List[str] = []
    warnings: List[str] = list(checked.runtime.warnings)
    if nnapi is None:
        warnings.append(f"{checked.variant} has no NNAPI model: the app runs the CPU model only")
    if checked.min_sdk < pins.NNAPI_MIN_SDK:
        notes.append(f"on devices below API {pins.NNAPI_MIN_SDK} the app runs the CPU model (NNAPI needs Android 10)")
    if checked.lane.compile_sdk < 34:
        warnings.append(f"lane {checked.lane.name} compiles against API {checked.lane.compile_sdk}, but CameraX "
                        f"{pins.CAMERAX_VERSION} needs compileSdk 34 and AGP 7.4+: this project will not build as is")

    uint8 = cpu.input.dtype == "quint8"
    if uint8 and (cpu.input.scale is None or cpu.input.zero_point is None):
        raise RecordError(f"the manifest gives {cpu.file} a quint8 input without scale/zero point",
                          remedy="run `invoke convert --force` to rewrite the manifest")
    size = int(cpu.input.shape[-1])
    num_classes = int(cpu.output.shape[-1])
    mean, std = assets.normalization(cpu.conversion)
    stem_variant = cpu.qualified_variant
    asset_names = {
        "cpu": f"{stem_variant}-cpu{'-uint8' if uint8 else ''}.pt",
        "nnapi": f"{stem_variant}-nnapi{'-uint8' if uint8 else ''}.pt" if nnapi else "",
    }
    gradle_dir = Path(settings.out)
    work = Path(settings.build_dir) / "make-app"
    work.mkdir(parents=True, exist_ok=True)

    with progress(f"make-app {stem_variant}", total=4) as bar, atomic_dir(gradle_dir, force=settings.force) as tmp:
        bar.describe("rendering the Gradle project")
        context = {
            "project_dir": "project",
            "app_name": checked.app_name,
            "gradle_project_name": validate.gradle_project_name(checked.app_name),
            "application_id": checked.application_id,
            "package_dir": checked.application_id.replace(".", "/"),
            "variant": checked.variant,
            "input_mode": "uint8_lut" if uint8 else "float32",
            "input_size": size,
            "mean": ",".join(repr(float(x)) for x in mean),
            "std": ",".join(repr(float(x)) for x in std),
            "num_classes": num_classes,
            "min_sdk": checked.min_sdk,
            "target_sdk": checked.target_sdk,
            "compile_sdk": checked.lane.compile_sdk,
            "nnapi_min_sdk": pins.NNAPI_MIN_SDK,
            "abi_filters": ",".join(checked.abi_filters),
            "gradle_version": checked.lane.gradle,
            "agp_version": checked.lane.android_gradle_plugin,
            "use_namespace": "yes" if _agp_has_namespace(checked.lane.android_gradle_plugin) else "no",
            "runtime_source": checked.runtime.source,
            "pytorch_android": checked.runtime.pytorch_android or "",
            "aar_file": checked.runtime.aar_name,
            "snapshot_repo": "yes" if checked.runtime.snapshot_repo else "no",
            "camerax_version": pins.CAMERAX_VERSION,
            "activity_version": pins.ANDROIDX_ACTIVITY_VERSION,
            "fbjni_version": pins.FBJNI_VERSION,
            "soloader_version": pins.SOLOADER_VERSION,
            "model_cpu_asset": asset_names["cpu"],
            "model_nnapi_asset": asset_names["nnapi"],
            "labels_asset": LABELS_ASSET,
            "sample_asset": SAMPLE_ASSET,
            "lut_asset": LUT_ASSET if uint8 else "",
            "bench_tag": records.APP_BENCH_TAG,
            "bench_prefix": records.APP_BENCH_PREFIX,
        }
        with tempfile.TemporaryDirectory(prefix=".render-", dir=tmp) as render_dir:
            rendered = template.render(context, Path(render_dir), work)
            for child in rendered.iterdir():
                os.replace(child, tmp / child.name)
        _make_executable(tmp / "gradlew")
        _make_executable(tmp / "gradlew.bat")
        bar.advance()

        bar.describe("packaging models, labels and the sample image")
        asset_dir = tmp / ASSETS_DIR
        asset_dir.mkdir(parents=True, exist_ok=True)
        model_records: Dict[str, str] = {}
        asset_records: Dict[str, Dict[str, Any]] = {}
        for backend, f in (("cpu", cpu), ("nnapi", nnapi)):
            if f is None:
                continue
            name = asset_names[backend]
            if uint8:
                from .app_model import wrap_uint8_input  # imports torch

                wrap_uint8_input(f.path, asset_dir / name, f.input.scale, f.input.zero_point)
            else:
                atomic_copy(f.path, asset_dir / name)
            model_records[name] = f.sha256
            asset_records[name] = {"backend": backend, "source": f.file, "source_sha256": f.sha256,
                                   "sha256": sha256_file(asset_dir / name),
                                   "input": {"shape": [1, size, size, 3], "dtype": "uint8", "layout": "NHWC",
                                             "through": LUT_ASSET} if uint8 else f.input.to_dict(),
                                   "wrapped": "appgen.app_model.Uint8Input" if uint8 else None}
        labels, labels_source = assets.labels_for(num_classes)
        atomic_write_text(asset_dir / LABELS_ASSET, "\n".join(labels) + "\n")
        atomic_copy(assets.sample_image(), asset_dir / SAMPLE_ASSET)
        if uint8:
            lut = assets.input_lut(mean, std, cpu.input.scale, cpu.input.zero_point)
            atomic_write_bytes(asset_dir / LUT_ASSET, lut)
            notes.append(f"quant_full: the app maps pixels through {LUT_ASSET} (normalisation + quantization, "
                         f"scale {cpu.input.scale:.6g}, zero point {cpu.input.zero_point}) into a uint8 NHWC tensor; "
                         "the packaged models take it and quantize inside TorchScript")
        if checked.runtime.aar:
            libs = tmp / "app" / "libs"
            libs.mkdir(parents=True, exist_ok=True)
            atomic_copy(checked.runtime.aar, libs / checked.runtime.aar.name)
        bar.advance()

        bar.describe("gradle wrapper jar")
        has_jar = False
        if settings.wrapper_jar:
            gradle = Gradle.locate()
            if gradle:
                gradle.write_wrapper_jar(tmp, checked.lane.gradle, work / "gradle-wrapper.log")
                has_jar = True
                notes.append(f"wrapper jar written by the local Gradle {gradle.version} ({gradle.executable}); "
                             f"it runs Gradle {checked.lane.gradle}")
        if not has_jar:
            notes.append(f"no {WRAPPER_JAR} (no Gradle installed here): " + wrapper_jar_howto(gradle_dir, checked.lane.gradle))
        bar.advance()

        bar.describe("app-info record")
        info_path = tmp / records.APP_INFO_NAME
        records.write_record(info_path, records.APP_INFO_KIND, records.APP_INFO_SCHEMA, {
            "application_id": checked.application_id,
            "activity": ".MainActivity",
            "app_name": checked.app_name,
            "variant": checked.variant,
            "qualified_variant": stem_variant,
            "input_mode": "uint8_lut" if uint8 else "float32",
            "models": model_records,
            "assets": asset_records,
            "labels": {"file": LABELS_ASSET, "count": len(labels), "source": labels_source},
            "sample": {"file": SAMPLE_ASSET, "source": f"matplotlib {assets.SAMPLE_IMAGE}"},
            "lut": {"file": LUT_ASSET, "sha256": sha256_file(asset_dir / LUT_ASSET)} if uint8 else None,
            "manifest": {"path": str(Path(settings.models).resolve() / records.MANIFEST_NAME),
                         "sha256": sha256_file(Path(settings.models) / records.MANIFEST_NAME)},
            "abi_filters": list(checked.abi_filters),
            "min_sdk": checked.min_sdk,
            "target_sdk": checked.target_sdk,
            "pins": {**checked.lane.to_dict(), "camerax": pins.CAMERAX_VERSION,
                     "androidx_activity": pins.ANDROIDX_ACTIVITY_VERSION},
            "runtime": checked.runtime.to_dict(),
            "converter_torch": cpu.conversion.get("torch"),
            "wrapper_jar": has_jar,
            "bench": {"tag": records.APP_BENCH_TAG, "prefix": records.APP_BENCH_PREFIX,
                      "extras": {"benchmark": "bool", "iters": "int", "warmup": "int", "backend": "cpu|nnapi"}},
            "apk": None,
            "torchdroid": TORCHDROID_VERSION,
        })
        bar.advance()
        sizes = {p.name: p.stat().st_size for p in sorted(asset_dir.iterdir())}

    for w in warnings:
        log.debug("warning: %s", w)
    log.info("wrote the Gradle project %s", gradle_dir)
    return MakeAppResult(gradle_dir, gradle_dir / records.APP_INFO_NAME, stem_variant, checked.application_id,
                         sizes, checked.runtime, has_jar, notes, warnings)


def _agp_has_namespace(agp: str) -> bool:
    """``namespace`` in build.gradle exists from AGP 7.0; before, the manifest's package attribute names it."""
    try:
        return int(agp.split(".")[0]) >= 7
    except ValueError:
        return True


def _make_executable(path: Path) -> None:
    if path.exists():
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def needs_convert(models: Path, variant: str) -> Optional[str]:
    """Why ``invoke convert`` must run before make-app can package ``variant``, or None."""
    models = Path(models)
    if not records.ConvertManifest.exists(models):
        return f"no convert manifest in {models}"
    try:
        found = records.ConvertManifest.load(models).find(variant)
    except RecordError as e:
        return f"the manifest in {models} is unusable ({e.what})"
    except UsageError:
        return f"{variant} is not converted in {models}"
    for f in found.values():
        if not f.path.is_file():
            return f"{f.file} is missing"
    return None
