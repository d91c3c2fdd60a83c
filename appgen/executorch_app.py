"""make-app for an ExecuTorch program: the ``.pte`` from the manifest's executorch section and the runtime that runs it.

The app is the same project as the legacy one (same template, same benchmark protocol); only the model class
and the Gradle dependency differ.  The runtime is ``org.pytorch:executorch-android`` from Maven Central at a pinned
version, or a locally built AAR (``--executorch-aar``).  Everything here only checks and decides; make.py writes.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from toolchain import pins, records, variants
from toolchain.errors import RecordError, UsageError
from toolchain.records import PteFile

from .runtime import Runtime, aar_entries, check_aar

LIBRARY = "executorch"
_STEM = re.compile(r"^[a-z0-9_.]+$")
_AAR_REMEDY = ("build ExecuTorch's AAR at the converter's release (`sh scripts/build_android_library.sh` in an "
               f"executorch v{pins.EXECUTORCH_VERSION} checkout, with ANDROID_HOME and ANDROID_NDK set; it writes "
               "extension/android/executorch_android/build/outputs/aar/executorch_android-debug.aar) and pass that")


def refuse_other_runtime_options(model: str, settings: Any) -> None:
    """--executorch-* only fit an ExecuTorch program; --aar/--pytorch-android only a TorchScript variant."""
    if variants.is_program(model):
        given = [o for o, v in (("--aar", settings.aar), ("--pytorch-android", settings.pytorch_android)) if v]
        if given:
            raise UsageError(f"{' and '.join(given)} given for the ExecuTorch program {model}",
                             cause="those options choose the pytorch_android runtime of TorchScript apps; a .pte "
                                   "program runs on org.pytorch:executorch-android",
                             remedy="use --executorch-aar PATH or --executorch-android VERSION instead (or unset "
                                    "app.aar / app.pytorch_android in your config)")
        return
    given = [o for o, v in (("--executorch-aar", settings.executorch_aar),
                            ("--executorch-android", settings.executorch_android)) if v]
    if given:
        raise UsageError(f"{' and '.join(given)} given for the TorchScript variant {model}",
                         cause="those options choose the runtime of an ExecuTorch program's app",
                         remedy="pass an ExecuTorch program with --model (e.g. fp32-xnnpack), or use --aar / "
                                "--pytorch-android for a TorchScript app (or unset app.executorch_* in your config)")


def check_lane(lane: pins.Lane) -> None:
    if lane.compile_sdk < pins.EXECUTORCH_ANDROID_COMPILE_SDK:
        raise UsageError(f"lane {lane.name} compiles against API {lane.compile_sdk}, but the ExecuTorch AAR is built "
                         f"against API {pins.EXECUTORCH_ANDROID_COMPILE_SDK}",
                         cause="an app must compile against at least its libraries' compileSdk",
                         remedy=f"use --lane {pins.DEFAULT_LANE} for an ExecuTorch program")


def min_sdk(value: Any) -> Any:
    """The app's minSdk for an ExecuTorch app: at least the library's (Gradle's manifest merge refuses less)."""
    try:
        return max(int(value), pins.EXECUTORCH_ANDROID_MIN_SDK)
    except (TypeError, ValueError):
        return value  # validate.sdk_levels names the bad value


def check_executorch_aar(path: Path, abis: Sequence[str]) -> Path:
    """A local ExecuTorch AAR: an Android library with the Java API and libexecutorch.so for every ABI asked for."""
    path = check_aar(path, "--executorch-aar", _AAR_REMEDY, plain_name="executorch.aar")
    names = set(aar_entries(path, "--executorch-aar", _AAR_REMEDY))
    missing = [a for a in abis if f"jni/{a}/{pins.EXECUTORCH_JNI_LIBRARY}" not in names]
    if missing:
        have = sorted({n.split("/")[1] for n in names if n.startswith("jni/") and n.count("/") == 2})
        raise UsageError(f"--executorch-aar {path.name} has no jni/<abi>/{pins.EXECUTORCH_JNI_LIBRARY} for "
                         f"{', '.join(missing)}",
                         cause=f"it carries native code for: {', '.join(have) or 'no ABI'}; the app would crash in "
                               "Module.load on those devices",
                         remedy="pass --abi-filters with the AAR's ABIs, or build the AAR with ANDROID_ABIS set to "
                                "them (scripts/build_android_library.sh)")
    return path


def choose_runtime(lane: pins.Lane, version: Optional[str], aar: Optional[Path], abis: Sequence[str]) -> Runtime:
    """org.pytorch:executorch-android at the pinned (or given) version, or a local AAR."""
    check_lane(lane)
    if aar and version:
        raise UsageError("--executorch-aar and --executorch-android both given",
                         remedy="pass one: --executorch-aar for a locally built runtime, --executorch-android for a "
                                "Maven version")
    if aar:
        return Runtime("aar", None, check_executorch_aar(aar, abis), lane.name, None, (), LIBRARY, None)
    version = pins.maven_version(version or pins.EXECUTORCH_ANDROID_DEFAULT, "--executorch-android", "1.5.1")
    outside = [a for a in abis if a not in pins.EXECUTORCH_ANDROID_ABIS]
    if outside:
        raise UsageError(f"{pins.EXECUTORCH_ANDROID_ARTIFACT} has no native library for {', '.join(outside)}",
                         cause=f"the published AAR carries {' and '.join(pins.EXECUTORCH_ANDROID_ABIS)} only",
                         remedy=f"pass --abi-filters {','.join(pins.EXECUTORCH_ANDROID_ABIS)} (or some of them)")
    return Runtime("maven", None, None, lane.name, None, (), LIBRARY, version)


# --------------------------------------------------------------------------- the program


def convert_command(models: Path, variant: str) -> str:
    """The `invoke convert` command that writes ``variant`` (``[stem-]precision-delegate``) into ``models``: its
    delegate, and the --quant that asks for its precision (none: fp32, full: int8), whatever convert.quant says."""
    precision, delegate = variant.rsplit("-", 2)[-2:]
    argv = ["invoke", "convert", "--format", "executorch", "--delegates", delegate,
            "--quant", variants.MODE_OF_PRECISION[precision],
            "--out", str(models)]
    command = " ".join(shlex.quote(a) for a in argv)
    if variant.count("-") > 1:
        command += " --model MODEL  (MODEL: the one whose files are named " + variant.rsplit("-", 2)[0] + "-*)"
    return command


def find_program(models: Path, variant: str) -> Tuple[PteFile, Dict[str, Any]]:
    """The ``.pte`` entry for ``variant`` (hash checked) and its conversion record; a RecordError naming the command."""
    models = Path(models)
    why = "make-app packages the programs `invoke convert --format executorch` wrote; it converts nothing itself"
    remedy = f"run `{convert_command(models, variant)}`, then make-app again"
    if not records.ConvertManifest.exists(models):
        raise RecordError(f"no converted models in {models} (no {records.MANIFEST_NAME})", cause=why,
                          remedy=remedy + " (or point --models at the directory convert wrote)")
    manifest = records.ConvertManifest.load(models)
    section, programs = manifest.executorch, manifest.programs()
    found = [f for f in programs if variant in (f.variant, f.qualified_variant)]
    known = ", ".join(sorted(f.qualified_variant for f in programs)) or "none"
    if not found:
        _refuse_refused(manifest, variant, known)
        raise RecordError(f"the ExecuTorch program {variant} is not converted in {models}",
                          cause=f"its manifest lists these programs: {known}", remedy=remedy)
    if len(found) > 1:
        raise UsageError(f"--model {variant} is ambiguous in {models}", cause=f"the manifest has: {known}",
                         remedy="name the model too, e.g. --model " + found[0].qualified_variant)
    pte = found[0]
    if not _STEM.match(pte.stem) or pte.file != f"{pte.qualified_variant}.pte":
        raise RecordError(f"the manifest in {models} names the program {pte.file!r} (stem {pte.stem!r}), which is not a "
                          "file name convert writes", cause="the manifest was edited",
                          remedy=f"run `{convert_command(models, variant)} --force`")
    pte.check_hash()
    refuse_non_image_input(pte)
    conversion = dict((section.get("conversions") or {}).get(pte.stem) or {})
    return pte, conversion


def _refuse_refused(manifest: records.ConvertManifest, variant: str, known: str) -> None:
    """A program convert refused (``conversions.<stem>.refused``): its reason, not "run convert" (it would refuse it
    again)."""
    refused = [(k, why) for k, why in manifest.not_made(executorch=True).items() if variant in (k, k.split("-", 1)[1])]
    if len(refused) == 1:
        raise records.RefusedVariant(f"the ExecuTorch program {refused[0][0]} was not made: convert refused it",
                                     cause=refused[0][1], remedy=f"use a program convert made ({known})")


def refuse_non_image_input(pte: PteFile) -> None:
    """A program the app cannot feed (:func:`refuse_non_image`)."""
    inputs = [records.TensorSpec.from_dict(d) for d in pte.extra.get("inputs") or []] or [pte.input]
    refuse_non_image(inputs, pte.qualified_variant, "program",
                     "load the .pte in your own app with ExecuTorch's Module API (Module.load, forward with your "
                     "EValues); `invoke bench-executorch` and `invoke deploy --format executorch` check and time it "
                     "on this machine and the phones")


def refuse_non_image(inputs: Sequence[records.TensorSpec], name: str, what: str, own_app: str) -> None:
    """A UsageError (exit 2) for a model the app cannot feed, in either format: the app gives one camera image,
    ``[1, 3, H, W]`` float32 (quint8 for quant_full, through its lookup table); a model declaring other inputs (token
    ids, audio, several tensors: docs/convert.md) is converted, checked and deployed, but not packaged."""
    shown = ", ".join(f"{t.dtype}{list(t.shape)}" for t in inputs)
    image = (len(inputs) == 1 and inputs[0].dtype in ("float32", "quint8") and len(inputs[0].shape) == 4
             and inputs[0].shape[1] == 3)
    if not image:
        raise UsageError(f"make-app cannot package {name}: the app feeds one camera image, "
                         f"float32[1, 3, H, W], and the {what} takes {shown}",
                         cause="the generated app's input is the camera (or its sample image) through the image "
                               "normalisation; it has no source for other inputs",
                         remedy=own_app)


def check_program(pte: PteFile, runtime: Runtime) -> List[str]:
    """Refuse a program the runtime cannot run; the warnings about one it may not run."""
    if pte.delegate not in pins.EXECUTORCH_ANDROID_DELEGATES and not runtime.aar:
        raise UsageError(f"{pins.EXECUTORCH_ANDROID_ARTIFACT} cannot run the {pte.delegate} program {pte.file}",
                         cause=f"the published AAR links the {' and '.join(pins.EXECUTORCH_ANDROID_DELEGATES)} "
                               f"backends only (scripts/build_android_library.sh builds Vulkan only with "
                               "EXECUTORCH_BUILD_VULKAN=ON)",
                         remedy="pick an XNNPACK or portable program (--model fp32-xnnpack), or build the AAR with "
                                "that backend and pass it with --executorch-aar")
    made_by = str(pte.executorch.get("version") or "unknown")
    warnings = []
    if runtime.aar and pte.delegate not in pins.EXECUTORCH_ANDROID_DELEGATES:
        warnings.append(f"{pte.file} needs the {pte.delegate} backend: the AAR {runtime.aar.name} must be built with "
                        f"it (EXECUTORCH_BUILD_{pte.delegate.upper()}=ON), or Module.load fails on the phone")
    if runtime.aar:
        git = str(pte.executorch.get("git_version") or "")[:12]
        warnings.append(f"the app links the local AAR {runtime.aar.name}; make sure it was built from ExecuTorch "
                        f"{made_by}{f' ({git})' if git else ''}, the release that wrote {pte.file}")
    elif runtime.executorch_android != made_by.split("+")[0]:
        older = made_by != "unknown" and pins.app_runtime_older(str(runtime.executorch_android), made_by)
        why = ("it is older than the exporter, and ExecuTorch promises no forward compatibility (a newer program may "
               "use operators or program features it lacks: Module.load then fails on the phone)" if older else
               "the app would run the program on another runtime than the one it was checked with")
        warnings.append(f"{pins.EXECUTORCH_ANDROID_ARTIFACT}:{runtime.executorch_android} is not the ExecuTorch "
                        f"{made_by} that wrote {pte.file}: {why}. Pass --executorch-android {made_by} (or leave it "
                        f"unset: the default is {pins.EXECUTORCH_ANDROID_DEFAULT}), or build the AAR at v{made_by} "
                        "and pass --executorch-aar PATH")
    return warnings


def matches_converter(pte: PteFile, runtime: Runtime) -> Optional[bool]:
    if runtime.aar:
        return None
    return runtime.executorch_android == str(pte.executorch.get("version") or "").split("+")[0]
