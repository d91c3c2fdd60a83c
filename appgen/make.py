"""``invoke make-app``: render the Gradle project around one converted variant.

Four steps, each testable alone:

* :func:`plan` checks every value and reads the convert manifest (nothing is written);
* :func:`up_to_date` compares the plan with the app-info of an existing project;
* :func:`guard_out` decides whether ``--out`` may be (re)written: never over files torchdroid did not
  write (without ``--force``), never over the command's own inputs (even with ``--force``);
* :func:`execute` renders the template and packages the assets into a temporary directory, and
  :func:`record` writes the app-info there; the directory gets its final name only when complete.
"""

from __future__ import annotations

import logging
import os
import shlex
import stat
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from toolchain import __version__ as TORCHDROID_VERSION
from toolchain import pins, records, variants
from toolchain.errors import RecordError, UsageError
from toolchain.fsutil import (
    atomic_copy,
    atomic_dir,
    atomic_write_bytes,
    atomic_write_text,
    check_not_inputs,
    refuse_another_owner,
    check_removable,
    ensure_space,
    foreign_files,
    is_owned,
    output_lock,
    sha256_file,
)
from toolchain.layout import Layout
from toolchain.progress import progress
from toolchain.records import PteFile
from toolchain.settings import default

from . import assets, executorch_app, validate
from .gradle import WRAPPER_JAR, Gradle, wrapper_jar_howto
from .runtime import Runtime, choose_runtime, page_size_warnings
from .template import AppTemplate

log = logging.getLogger(__name__)

LABELS_ASSET = "labels.txt"
SAMPLE_ASSET = "sample.jpg"
LUT_ASSET = "input_lut.bin"
ASSETS_DIR = Path("app/src/main/assets")
SPACE_MARGIN = 8 << 20  # template, labels, sample image, record: a few MB on top of the models


@dataclass(frozen=True)
class AppSettings:
    model: str = default("app.model")
    models: Path = Path(default("convert.out"))
    out: Path = Path(default("app.out"))
    app_name: str = default("app.name")
    application_id: str = default("app.application_id")
    abi_filters: Tuple[str, ...] = tuple(default("app.abi_filters"))
    min_sdk: int = default("app.min_sdk")
    target_sdk: Optional[int] = None  # None: the lane's compileSdk
    lane: str = pins.DEFAULT_LANE
    pytorch_android: Optional[str] = None
    aar: Optional[Path] = None
    executorch_android: Optional[str] = None  # an ExecuTorch program's app: Maven version of executorch-android
    executorch_aar: Optional[Path] = None  # ... or a locally built ExecuTorch AAR
    force: bool = False
    build_dir: Path = Path(default("build_dir"))
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
    up_to_date: bool = False  # True: nothing was written, the project already matches the request


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

    @property
    def program(self) -> bool:
        """An ExecuTorch program's app (org.pytorch.executorch), not a TorchScript one."""
        return self.runtime.library == executorch_app.LIBRARY


@dataclass(frozen=True)
class AppPlan:
    """Everything make-app will write, decided before anything is written."""

    settings: AppSettings
    checked: _Checked
    cpu: Union[records.ModelFile, PteFile]  # the model the app runs on the CPU: TorchScript, or the .pte program
    nnapi: Optional[records.ModelFile]
    manifest_path: Path
    template: AppTemplate
    gradle: Optional[Gradle]  # a local Gradle that can write the wrapper jar
    request: Dict[str, Any]  # what the app-info records as the request (the up-to-date key)
    notes: Tuple[str, ...]
    warnings: Tuple[str, ...]
    program_conversion: Dict[str, Any] = field(default_factory=dict)  # the .pte's conversion record

    @property
    def conversion(self) -> Dict[str, Any]:
        return self.program_conversion if self.checked.program else self.cpu.conversion

    @property
    def out(self) -> Path:
        return Path(self.settings.out)

    @property
    def uint8(self) -> bool:
        return self.cpu.input.dtype == "quint8"

    @property
    def qualified_variant(self) -> str:
        return self.cpu.qualified_variant

    def asset_name(self, backend: str) -> str:
        if self.checked.program:
            return f"{self.qualified_variant}.pte"
        return f"{self.qualified_variant}-{backend}{'-uint8' if self.uint8 else ''}.pt"

    def model_files(self) -> Dict[str, records.ModelFile]:
        return {b: f for b, f in (("cpu", self.cpu), ("nnapi", self.nnapi)) if f is not None}


# --------------------------------------------------------------------------- plan


def check(settings: AppSettings) -> _Checked:
    """Everything that can be validated before torch or the manifest is touched."""
    lane = pins.lane(settings.lane)
    variant = variants.check((settings.model or "").strip(), "--model")
    program = variants.is_program(variant)
    executorch_app.refuse_other_runtime_options(variant, settings)
    target = lane.compile_sdk if settings.target_sdk in (None, "") else settings.target_sdk
    lowest = executorch_app.min_sdk(settings.min_sdk) if program else settings.min_sdk
    min_sdk, target_sdk = validate.sdk_levels(lowest, target, lane.compile_sdk)
    abis = validate.abi_filters(settings.abi_filters)
    if program:
        runtime = executorch_app.choose_runtime(lane, settings.executorch_android, settings.executorch_aar, abis)
    else:
        runtime = choose_runtime(lane.name, settings.pytorch_android, settings.aar)
    return _Checked(
        variant=variant,
        application_id=validate.application_id(settings.application_id),
        app_name=validate.app_name(settings.app_name),
        abi_filters=abis,
        min_sdk=min_sdk,
        target_sdk=target_sdk,
        lane=lane,
        runtime=runtime,
    )


def convert_command(models: Path, variant: str, manifest: Optional[records.ConvertManifest] = None) -> str:
    """The exact `invoke convert` command that produces ``variant`` in ``models``."""
    prefix, _, quant = variant.rpartition("-")
    argv = ["invoke", "convert"]
    model = None
    if prefix and manifest is not None:
        model = next((f.model for f in manifest.files if f.stem == prefix), None)
    if model:
        argv += ["--model", model]
    argv += ["--quant", quant.rsplit("_", 1)[-1], "--out", str(models)]
    command = " ".join(shlex.quote(a) for a in argv)
    if prefix and not model:
        command += f" --model MODEL  (MODEL: the one whose files are named {prefix}-*)"
    return command


def find_variant(models: Path, variant: str) -> Dict[str, records.ModelFile]:
    """The variant's ``{"cpu": ModelFile, "nnapi": ModelFile}`` from the convert manifest (hashes checked).

    make-app never converts by itself: a missing manifest, an unreadable one or a missing variant is a
    record error (exit 5) that names what is missing and the exact convert command.
    """
    models = Path(models)
    why = "make-app packages the models `invoke convert` wrote; it does not convert anything itself"
    if not records.ConvertManifest.exists(models):
        raise RecordError(f"no converted models in {models} (no {records.MANIFEST_NAME})", cause=why,
                          remedy=f"run `{convert_command(models, variant)}`, then make-app again "
                                 "(or point --models at the directory convert wrote)")
    try:
        manifest = records.ConvertManifest.load(models)
        found = manifest.find(variant)
    except RecordError as e:
        raise RecordError(f"the convert manifest in {models} cannot be used ({e.what})", cause=e.cause or why,
                          remedy=f"run `{convert_command(models, variant)}` to write it again") from e
    except UsageError as e:
        if "ambiguous" in e.what or isinstance(e, records.RefusedVariant):  # refused: its reason, not "run convert"
            raise
        raise RecordError(f"{variant} is not converted in {models}", cause=e.cause,
                          remedy=f"run `{convert_command(models, variant, manifest)}`, then make-app again") from e
    if "cpu" not in found:
        raise RecordError(f"the manifest in {models} has no CPU model for {variant}",
                          remedy=f"run `{convert_command(models, variant, manifest)} --force`")
    for f in found.values():
        f.check_hash()
    return found


def plan(settings: AppSettings) -> AppPlan:
    """Check the settings, find the models and decide what the project will contain (writes nothing)."""
    checked = check(settings)
    if checked.program:
        return plan_program(settings, checked)
    template = AppTemplate.locate()
    files = find_variant(Path(settings.models), checked.variant)
    cpu, nnapi = files["cpu"], files.get("nnapi")
    executorch_app.refuse_non_image(cpu.inputs, cpu.qualified_variant, "model",
                     "load the .pt in your own app with pytorch_android (Module.load, forward with your IValues); "
                     "`invoke bench` and `invoke deploy` check and time it on this machine and the phones")
    if cpu.input.dtype == "quint8" and (cpu.input.scale is None or cpu.input.zero_point is None):
        raise RecordError(f"the manifest gives {cpu.file} a quint8 input without scale/zero point",
                          remedy=f"run `{convert_command(Path(settings.models), checked.variant)} --force` "
                                 "to rewrite the manifest")
    refusal = records.ConvertManifest.load(Path(settings.models)).refusal(cpu.stem, cpu.mode) if nnapi is None else None
    made = _made_with(cpu, checked.lane)
    if made and checked.runtime.source == "maven" and not checked.runtime.matches_converter:
        # the runtime's warning names the torch that converted these models, not the lane's converter
        checked = replace(checked, runtime=choose_runtime(checked.lane.name, settings.pytorch_android, None, made))
        made = None
    notes, warnings = _plan_messages(checked, nnapi is not None, refusal.line() if refusal else "")
    if made:
        warnings.append(f"these models were converted with torch {made} (their manifest), not lane "
                        f"{checked.lane.name}'s converter {checked.lane.converter_torch}: the app's runtime may not "
                        "load them; `invoke check-compat` says which operators or file format differ")
    gradle = Gradle.locate() if settings.wrapper_jar else None
    runtime = checked.runtime
    request = _request(checked, template, cpu.qualified_variant, sorted(f.sha256 for f in files.values()),
                       {"source": runtime.source, "pytorch_android": runtime.pytorch_android,
                        "aar_sha256": sha256_file(runtime.aar) if runtime.aar else None})
    return AppPlan(settings, checked, cpu, nnapi, Path(settings.models) / records.MANIFEST_NAME, template, gradle,
                   request, tuple(notes), tuple(warnings))


def _made_with(cpu: records.ModelFile, lane: pins.Lane) -> Optional[str]:
    """The torch version that really converted the models (their manifest), when it is not the lane's converter."""
    made = (cpu.conversion.get("torch") or {}).get("version")
    return None if not made or lane.converter_torch == f"torch=={made}" else made


def plan_program(settings: AppSettings, checked: _Checked) -> AppPlan:
    """The plan of an ExecuTorch program's app: the .pte from the manifest's executorch section, no NNAPI model."""
    template = AppTemplate.locate()
    pte, conversion = executorch_app.find_program(Path(settings.models), checked.variant)
    runtime = checked.runtime
    runtime = replace(runtime, warnings=tuple(executorch_app.check_program(pte, runtime)),
                      matches_converter=executorch_app.matches_converter(pte, runtime))
    checked = replace(checked, runtime=runtime)
    notes, warnings = _plan_messages(checked, False)
    if checked.min_sdk > int(settings.min_sdk):
        notes.append(f"minSdk raised from {settings.min_sdk} to {checked.min_sdk}: "
                     f"{pins.EXECUTORCH_ANDROID_ARTIFACT} declares minSdk {pins.EXECUTORCH_ANDROID_MIN_SDK}")
    gradle = Gradle.locate() if settings.wrapper_jar else None
    request = _request(checked, template, pte.qualified_variant, [pte.sha256],
                       {"source": runtime.source, "library": runtime.library,
                        "executorch_android": runtime.executorch_android,
                        "aar_sha256": sha256_file(runtime.aar) if runtime.aar else None})
    return AppPlan(settings, checked, pte, None, Path(settings.models) / records.MANIFEST_NAME, template, gradle,
                   request, tuple(notes), tuple(warnings), conversion)


def _request(checked: _Checked, template: AppTemplate, variant: str, sources: List[str],
             runtime: Dict[str, Any]) -> Dict[str, Any]:
    """What the app-info records as the request: the same values make the same project (the up-to-date key)."""
    return {
        "variant": variant,
        "sources": sources,
        "app_name": checked.app_name,
        "application_id": checked.application_id,
        "abi_filters": list(checked.abi_filters),
        "min_sdk": checked.min_sdk,
        "target_sdk": checked.target_sdk,
        "lane": checked.lane.name,
        "runtime": runtime,
        "template": template.digest(),
        "torchdroid": TORCHDROID_VERSION,
    }


def _plan_messages(checked: _Checked, has_nnapi: bool, why_not: str = "") -> Tuple[List[str], List[str]]:
    """``why_not``: why convert wrote no NNAPI model for the variant (its manifest's refusal), when it did not."""
    notes: List[str] = []
    warnings: List[str] = list(checked.runtime.warnings)
    warnings += page_size_warnings(checked.runtime, checked.abi_filters)
    if checked.program:
        notes.append(f"ExecuTorch program {checked.variant}: the app runs it with org.pytorch.executorch.Module on the "
                     "CPU (its delegate inside the program); there is no NNAPI model in this lane")
        return notes, warnings
    if not has_nnapi:
        warnings.append(f"{checked.variant} has no NNAPI model: the app runs the CPU model only"
                        + (f" ({why_not})" if why_not else ""))
    if checked.min_sdk < pins.NNAPI_MIN_SDK:
        notes.append(f"on devices below API {pins.NNAPI_MIN_SDK} the app runs the CPU model (NNAPI needs Android 10)")
    if checked.lane.compile_sdk < 34:
        warnings.append(f"lane {checked.lane.name} compiles against API {checked.lane.compile_sdk}, but CameraX "
                        f"{pins.CAMERAX_VERSION} needs compileSdk 34 and AGP 7.4+: this project will not build as is")
    return notes, warnings


# --------------------------------------------------------------------------- up to date? may we write?


def up_to_date(p: AppPlan) -> Tuple[bool, str]:
    """Is the project in ``--out`` exactly what this plan would write (same request, intact assets)?"""
    out = p.out
    if not records.AppInfo.exists(out):
        return False, "not generated yet" if not out.exists() else f"{out} holds no {records.APP_INFO_NAME}"
    try:
        info = records.AppInfo.load(out)
    except RecordError as e:
        return False, f"its {records.APP_INFO_NAME} cannot be read ({e.what})"
    differs = sorted(k for k in p.request if info.request.get(k) != p.request[k])
    if differs:
        return False, f"it was made with other {', '.join(differs)}"
    if p.gradle is not None and not info.wrapper_jar:
        return False, "it has no Gradle wrapper jar and a local Gradle can now write one"
    if not info.asset_files:
        return False, f"its {records.APP_INFO_NAME} lists no asset files"
    for name, digest in info.asset_files.items():
        path = out / ASSETS_DIR / name
        if not path.is_file() or sha256_file(path) != digest:
            return False, f"its asset {name} is missing or was changed"
    if not (out / "gradlew").is_file():
        return False, "its gradlew is missing"
    return True, f"{out} was made from these models with these settings"


def guard_out(p: AppPlan, stale_reason: str) -> None:
    """Refuse to replace ``--out`` when that would lose something; see the module docstring."""
    out = p.out
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory", remedy="choose another --out directory")
    inputs = [p.manifest_path, *(f.path for f in p.model_files().values()), Layout(p.settings.build_dir).logs,
              p.checked.runtime.aar]
    check_not_inputs(out, inputs, "--out")  # even with --force
    refuse_another_owner(out, "make-app")  # never into the results, the models or another task's directory
    if not out.exists() or not any(out.iterdir()) or p.settings.force:
        return
    if records.AppInfo.exists(out) or is_owned(out):
        raise UsageError(f"{out} holds an app torchdroid made from other inputs: {stale_reason}",
                         cause="regenerating replaces the whole project, with any edits you made in it",
                         remedy="pass --force to regenerate it (files you added, local.properties among them, stay; a file "
                                "you edited is kept beside the new one as <name>.yours), or choose another --out")
    shown = ", ".join(foreign_files(out)[:5])
    raise UsageError(f"{out} already exists and holds files torchdroid did not write: {shown}",
                     cause=f"there is no {records.APP_INFO_NAME} in it, so it is not a project make-app made",
                     remedy="choose a new or empty --out directory, or pass --force to replace it")


def check_space(p: AppPlan) -> None:
    """Enough free space beside ``--out`` for the models (wrapped quant_full ones are as large) and the rest."""
    need = sum(f.size for f in p.model_files().values()) + SPACE_MARGIN
    ensure_space(p.out.parent, need, f"the app project {p.out.name}")


# --------------------------------------------------------------------------- execute and record


def _context(p: AppPlan) -> Dict[str, Any]:
    c, cpu = p.checked, p.cpu
    mean, std = assets.normalization(p.conversion)
    return {
        "project_dir": "project",
        "app_name": c.app_name,
        "gradle_project_name": validate.gradle_project_name(c.app_name),
        "application_id": c.application_id,
        "package_dir": c.application_id.replace(".", "/"),
        "variant": c.variant,
        "input_mode": "uint8_lut" if p.uint8 else "float32",
        "input_size": int(cpu.input.shape[-1]),
        "mean": ",".join(repr(float(x)) for x in mean),
        "std": ",".join(repr(float(x)) for x in std),
        "num_classes": int(cpu.output.shape[-1]),
        "min_sdk": c.min_sdk,
        "target_sdk": c.target_sdk,
        "compile_sdk": c.lane.compile_sdk,
        "nnapi_min_sdk": pins.NNAPI_MIN_SDK,
        "abi_filters": ",".join(c.abi_filters),
        "gradle_version": c.lane.gradle,
        "agp_version": c.lane.android_gradle_plugin,
        "use_namespace": "yes" if _agp_has_namespace(c.lane.android_gradle_plugin) else "no",
        "runtime_source": c.runtime.source,
        "pytorch_android": c.runtime.pytorch_android or "",
        "aar_file": c.runtime.aar_name,
        "runtime_library": c.runtime.library,
        "executorch_android": c.runtime.executorch_android or "",
        "executorch_fbjni_version": pins.EXECUTORCH_ANDROID_FBJNI,
        "executorch_nativeloader_version": pins.EXECUTORCH_ANDROID_NATIVELOADER,
        "default_backend": "cpu" if c.program else "nnapi",
        "camerax_version": pins.CAMERAX_VERSION,
        "activity_version": pins.ANDROIDX_ACTIVITY_VERSION,
        "fbjni_version": pins.FBJNI_VERSION,
        "soloader_version": pins.SOLOADER_VERSION,
        "model_cpu_asset": p.asset_name("cpu"),
        "model_nnapi_asset": p.asset_name("nnapi") if p.nnapi else "",
        "labels_asset": LABELS_ASSET,
        "sample_asset": SAMPLE_ASSET,
        "lut_asset": LUT_ASSET if p.uint8 else "",
        "bench_tag": records.APP_BENCH_TAG,
        "bench_prefix": records.APP_BENCH_PREFIX,
        "bench_meta": validate.meta_data_name(records.APP_BENCH_META),
        "bench_contract": str(records.APP_BENCH_CONTRACT),
    }


def render(p: AppPlan, tmp: Path, work: Path) -> None:
    """The cookiecutter template, rendered into ``tmp`` (the project's temporary directory)."""
    with tempfile.TemporaryDirectory(prefix=".render-", dir=tmp) as render_dir:
        rendered = p.template.render(_context(p), Path(render_dir), work)
        for child in rendered.iterdir():
            os.replace(child, tmp / child.name)
    for script in ("gradlew", "gradlew.bat"):
        path = tmp / script
        if path.exists():
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def package_models(p: AppPlan, asset_dir: Path) -> Dict[str, Dict[str, Any]]:
    """Copy (float variants) or wrap (quant_full: uint8 input) each model into the assets; their records."""
    out: Dict[str, Dict[str, Any]] = {}
    size = int(p.cpu.input.shape[-1])
    for backend, f in p.model_files().items():
        name = p.asset_name(backend)
        if p.uint8:
            from .app_model import wrap_uint8_input  # imports torch

            wrap_uint8_input(f.path, asset_dir / name, f.input.scale, f.input.zero_point)
        else:
            atomic_copy(f.path, asset_dir / name)
        if p.checked.program:
            out[name] = _program_asset(f, asset_dir / name)
            continue
        out[name] = {"backend": backend, "source": f.file, "source_sha256": f.sha256,
                     "sha256": sha256_file(asset_dir / name),
                     "input": {"shape": [1, size, size, 3], "dtype": "uint8", "layout": "NHWC",
                               "through": LUT_ASSET} if p.uint8 else f.input.to_dict(),
                     "wrapped": "appgen.app_model.Uint8Input" if p.uint8 else None}
    return out


def _program_asset(pte: PteFile, copied: Path) -> Dict[str, Any]:
    """The asset record of a copied .pte; the copy must still be the manifest's program."""
    digest = sha256_file(copied)
    if digest != pte.sha256:
        raise RecordError(f"{pte.path} changed while make-app copied it (sha256 {digest[:12]}… != {pte.sha256[:12]}…)",
                          cause="another process wrote the program during this run",
                          remedy="wait for it to finish (or run `invoke convert --format executorch` again), then "
                                 "make-app again")
    return {"backend": "cpu", "source": pte.file, "source_sha256": pte.sha256, "sha256": digest,
            "input": pte.input.to_dict(), "wrapped": None, "format": "executorch", "delegate": pte.delegate,
            "precision": pte.precision, "baseline": pte.baseline}


def package_extras(p: AppPlan, asset_dir: Path, notes: List[str]) -> Dict[str, Any]:
    """Labels, the sample image, the quant_full lookup table and a local AAR; what the app-info says of them."""
    labels, labels_source = assets.labels_for(int(p.cpu.output.shape[-1]))
    atomic_write_text(asset_dir / LABELS_ASSET, "\n".join(labels) + "\n")
    atomic_copy(assets.sample_image(), asset_dir / SAMPLE_ASSET)
    lut = None
    if p.uint8:
        mean, std = assets.normalization(p.cpu.conversion)
        scale, zp = p.cpu.input.scale, p.cpu.input.zero_point
        atomic_write_bytes(asset_dir / LUT_ASSET, assets.input_lut(mean, std, scale, zp))
        lut = {"file": LUT_ASSET, "sha256": sha256_file(asset_dir / LUT_ASSET)}
        notes.append(f"quant_full: the app maps pixels through {LUT_ASSET} (normalisation + quantization, "
                     f"scale {scale:.6g}, zero point {zp}) into a uint8 NHWC tensor; "
                     "the packaged models take it and quantize inside TorchScript")
    aar = p.checked.runtime.aar
    if aar:
        atomic_copy(aar, asset_dir.parents[2] / "libs" / aar.name)  # app/libs/
    return {"labels": {"file": LABELS_ASSET, "count": len(labels), "source": labels_source},
            "sample": {"file": SAMPLE_ASSET, "source": f"matplotlib {assets.SAMPLE_IMAGE}"}, "lut": lut}


def add_wrapper_jar(p: AppPlan, tmp: Path, work: Path, notes: List[str]) -> bool:
    gradle_version = p.checked.lane.gradle
    if p.gradle is not None:
        p.gradle.write_wrapper_jar(tmp, gradle_version, work / "gradle-wrapper.log")
        notes.append(f"wrapper jar written by the local Gradle {p.gradle.version} ({p.gradle.executable}); "
                     f"it runs Gradle {gradle_version}")
        return True
    notes.append(f"no {WRAPPER_JAR} (no Gradle installed here): " + wrapper_jar_howto(p.out, gradle_version, p.checked.variant))
    return False


def record(p: AppPlan, project: Path, asset_records: Dict[str, Dict[str, Any]], extras: Dict[str, Any],
           has_jar: bool) -> records.AppInfo:
    """The app-info of the new project (written into ``project``, the temporary directory)."""
    c = p.checked
    info = records.AppInfo(
        dir=project, application_id=c.application_id, activity=".MainActivity", app_name=c.app_name,
        variant=c.variant, qualified_variant=p.qualified_variant,
        input_mode="uint8_lut" if p.uint8 else "float32",
        models={name: a["source_sha256"] for name, a in asset_records.items()}, assets=asset_records,
        abi_filters=c.abi_filters, min_sdk=c.min_sdk, target_sdk=c.target_sdk,
        pins={**c.lane.to_dict(), "camerax": pins.CAMERAX_VERSION, "androidx_activity": pins.ANDROIDX_ACTIVITY_VERSION},
        runtime=c.runtime.to_dict(), wrapper_jar=has_jar, torchdroid=TORCHDROID_VERSION, request=p.request,
        asset_files={f.name: sha256_file(f) for f in sorted((project / ASSETS_DIR).iterdir()) if f.is_file()},
        extra={**extras,
               "manifest": {"path": str(p.manifest_path.resolve()), "sha256": sha256_file(p.manifest_path)},
               "converter_torch": p.conversion.get("torch") if not c.program else dict(p.cpu.torch),
               **({"converter_executorch": dict(p.cpu.executorch)} if c.program else {}),
               "bench": {"tag": records.APP_BENCH_TAG, "prefix": records.APP_BENCH_PREFIX,
                         "meta_data": {records.APP_BENCH_META: records.APP_BENCH_CONTRACT},
                         "extras": {"benchmark": "bool", "iters": "int", "warmup": "int", "backend": "cpu|nnapi"}}},
    )
    info.write()
    return info


def execute(p: AppPlan) -> MakeAppResult:
    """Write the project into a temporary directory and give it its final name when complete."""
    notes, warnings = list(p.notes), list(p.warnings)
    work = Layout(p.settings.build_dir).make_app_work
    work.mkdir(parents=True, exist_ok=True)
    with progress(f"make-app {p.qualified_variant}", total=4) as bar, \
            atomic_dir(p.out, force=True, stage="make-app") as tmp:
        bar.describe("rendering the Gradle project")
        render(p, tmp, work)
        bar.advance()
        bar.describe("packaging models, labels and the sample image")
        asset_dir = tmp / ASSETS_DIR
        asset_dir.mkdir(parents=True, exist_ok=True)
        asset_records = package_models(p, asset_dir)
        extras = package_extras(p, asset_dir, notes)
        bar.advance()
        bar.describe("gradle wrapper jar")
        has_jar = add_wrapper_jar(p, tmp, work, notes)
        bar.advance()
        bar.describe("app-info record")
        record(p, tmp, asset_records, extras, has_jar)
        bar.advance()
        sizes = {f.name: f.stat().st_size for f in sorted(asset_dir.iterdir())}
    log.debug("wrote the Gradle project %s", p.out)  # the task prints the project's path
    return MakeAppResult(p.out, records.app_info_path(p.out), p.qualified_variant, p.checked.application_id,
                         sizes, p.checked.runtime, has_jar, notes, warnings)


def make_app(settings: AppSettings) -> MakeAppResult:
    """plan -> up to date? -> may we write? -> execute (and record)."""
    p = plan(settings)
    current, why = up_to_date(p)
    if current and not settings.force:
        info = records.AppInfo.load(p.out)
        sizes = {name: (p.out / ASSETS_DIR / name).stat().st_size for name in sorted(info.asset_files)}
        return MakeAppResult(p.out, info.path, p.qualified_variant, info.application_id, sizes, p.checked.runtime,
                             info.wrapper_jar, [f"up to date: {why}"], list(p.warnings), up_to_date=True)
    if p.out.is_symlink() or (p.out.is_dir() and any(p.out.iterdir())):  # before its lock is written beside it
        check_removable(p.out, "make-app --out", named=True, verb="replace")
    with output_lock(p.out, "make-app"):
        guard_out(p, why)
        check_space(p)
        return execute(p)


def _agp_has_namespace(agp: str) -> bool:
    """``namespace`` in build.gradle exists from AGP 7.0; before, the manifest's package attribute names it."""
    try:
        return int(agp.split(".")[0]) >= 7
    except ValueError:
        return True
