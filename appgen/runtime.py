"""Which PyTorch Android runtime the app links: the lane's, a local AAR, or the fallback (with a warning)."""

from __future__ import annotations

import re
import shlex
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from toolchain import pins
from toolchain.errors import TorchdroidError, UsageError
from toolchain.fsutil import sha256_file



@dataclass(frozen=True)
class Runtime:
    source: str  # "aar" (a local pytorch_android AAR) | "maven" (org.pytorch:pytorch_android)
    pytorch_android: Optional[str]  # the Maven version, None for an AAR
    aar: Optional[Path]
    lane: str
    matches_converter: Optional[bool]  # None: cannot tell (a local AAR of unknown origin)
    warnings: Tuple[str, ...] = field(default_factory=tuple)
    # "pytorch_android" (TorchScript models) | "executorch" (a .pte program, org.pytorch:executorch-android)
    library: str = "pytorch_android"
    executorch_android: Optional[str] = None  # the Maven version of org.pytorch:executorch-android

    @property
    def aar_name(self) -> str:
        return self.aar.name if self.aar else ""

    @property
    def label(self) -> str:
        """What the app links, in one phrase: ``maven org.pytorch:executorch-android:1.5.1``, ``aar x.aar``."""
        if self.aar:
            return f"aar {self.aar.name}"
        if self.library == "executorch":
            return f"maven org.pytorch:executorch-android:{self.executorch_android}"
        return f"maven {self.pytorch_android}"

    def to_dict(self) -> Dict[str, Any]:
        out = {
            "source": self.source,
            "pytorch_android": self.pytorch_android,
            "aar": {"file": f"app/libs/{self.aar.name}", "source": str(self.aar), "sha256": sha256_file(self.aar)}
            if self.aar else None,
            "lane": self.lane,
            "matches_converter": self.matches_converter,
            "warnings": list(self.warnings),
        }
        if self.library != "pytorch_android":  # the legacy record stays exactly as it was
            out.update(library=self.library, executorch_android=self.executorch_android)
        return out


_AAR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\.aar$")


def check_aar(path: Path, option: str = "--aar", remedy: Optional[str] = None,
              plain_name: str = "pytorch_android.aar") -> Path:
    """An existing ``.aar`` zip with a manifest and classes.jar, whose name can go into build.gradle."""
    path = Path(path).expanduser()
    remedy = remedy or ("pass the pytorch_android AAR `invoke build-android --aar` wrote "
                        "(android/pytorch_android/build/outputs/aar/*.aar)")
    if not path.is_file():
        raise UsageError(f"{option} {path} does not exist", remedy=remedy)
    if path.suffix != ".aar":
        raise UsageError(f"{option} {path} is not an .aar file", remedy=remedy)
    if not _AAR_NAME.match(path.name):
        raise UsageError(f"{option} file name {path.name!r} cannot go into build.gradle",
                         cause="the name is written into a Gradle string: only letters, digits and . _ + - are allowed",
                         remedy=f"copy it to a plain name, e.g. cp {shlex.quote(str(path))} /tmp/{plain_name}, "
                                "and pass that")
    names = aar_entries(path, option, remedy)
    missing = [n for n in ("AndroidManifest.xml", "classes.jar") if n not in names]
    if missing:
        raise UsageError(f"{option} {path} is not an Android library: it has no {', '.join(missing)}", remedy=remedy)
    return path.resolve()


def aar_entries(path: Path, option: str, remedy: str) -> List[str]:
    try:
        with zipfile.ZipFile(path) as z:
            return z.namelist()
    except zipfile.BadZipFile as e:
        raise UsageError(f"{option} {path} is not a valid AAR (not a zip archive)", cause=str(e), remedy=remedy) from e


def _refuse_unavailable(version: str, lane: pins.Lane, given: bool) -> None:
    """A runtime no Maven repository serves any more (the lane's, or any -SNAPSHOT): make-app needs --aar."""
    if not given and not lane.app_runtime_available:
        where, cause = f"lane {lane.name}'s runtime {version}", lane.app_runtime_unavailable_reason
    elif version.endswith("-SNAPSHOT"):
        where = f"--pytorch-android {version}"
        cause = (f"-SNAPSHOT versions of org.pytorch:pytorch_android were only published to the OSSRH snapshot "
                 f"repository, which Sonatype shut down on {pins.OSSRH_SHUTDOWN}; no Maven repository serves them")
    else:
        return
    if lane.aar_gradle_wrapper:
        remedy = (f"build the lane's runtime with `invoke build-android --lane {lane.name} --aar` and pass the AAR: "
                  f"`invoke make-app --lane {lane.name} --aar PATH`")
    else:  # build-android refuses --aar for this lane: its commit has no android/gradlew (docs/facts.md)
        remedy = (f"build the AAR at the lane's commit yourself (upstream's scripts/build_pytorch_android.sh with a "
                  f"system Gradle on PATH) and pass it: `invoke make-app --lane {lane.name} --aar PATH`; or use "
                  "`--lane current`")
    raise UsageError(f"{where} cannot be downloaded: make-app for this lane needs --aar", cause=cause, remedy=remedy)


def choose_runtime(lane_name: str, pytorch_android: Optional[str], aar: Optional[Path],
                   made_with: Optional[str] = None) -> Runtime:
    """The app's runtime; ``made_with``: the torch version that converted the models (their manifest), named in
    the warnings when known (else they speak of the lane's converter)."""
    lane = pins.lane(lane_name)

    def models(may: str) -> str:
        if made_with:
            return (f"these models were converted with torch {made_with} (their manifest), not lane {lane.name}'s "
                    f"converter {lane.converter_torch}, and {may}")
        return f"models of lane {lane.name}'s converter {lane.converter_torch} {may}"

    if aar and pytorch_android:
        raise UsageError("--aar and --pytorch-android both given",
                         remedy="pass one: --aar for a locally built runtime, --pytorch-android for a Maven version")
    if not aar:
        _refuse_unavailable(pytorch_android or lane.pytorch_android or "", lane, bool(pytorch_android))
    if aar:
        path = check_aar(aar)
        note = (f"the app links the local AAR {path.name}; make sure it was built from the lane's PyTorch "
                f"({lane.pytorch_ref}, {lane.pytorch_commit[:12]}) so it runs models from {lane.converter_torch}")
        return Runtime("aar", None, path, lane.name, None, (note,))
    if pytorch_android:
        version = pins.maven_version(pytorch_android)
        matches = version == lane.pytorch_android
        note = (f"org.pytorch:pytorch_android:{version} is not lane {lane.name}'s runtime "
                f"({lane.pytorch_android or 'none published'}); {models('may not load in another runtime')}")
        return Runtime("maven", version, None, lane.name, matches, () if matches else (note,))
    if lane.pytorch_android:
        return Runtime("maven", lane.pytorch_android, None, lane.name, True)
    note = (f"lane {lane.name} has no published pytorch_android, so the app uses "
            f"org.pytorch:pytorch_android:{pins.PYTORCH_ANDROID_DEFAULT}, which runs models of torch "
            f"{pins.PYTORCH_ANDROID_DEFAULT}: {models('may fail to load on the phone')}. For a matching runtime "
            "build the lane's AAR with `invoke build-android --aar` and pass it with `invoke make-app --aar PATH`")
    return Runtime("maven", pins.PYTORCH_ANDROID_DEFAULT, None, lane.name, False, (note,))


def _aar_libraries_below(aar: Path, abis: Sequence[str], page_size: int) -> List[str]:
    """``jni/<abi>/lib*.so`` entries of the AAR whose LOAD segments are aligned below ``page_size``."""
    from toolchain.elf import read_elf

    low = []
    with zipfile.ZipFile(aar) as z, tempfile.TemporaryDirectory(prefix="torchdroid-aar-") as tmp:
        for name in sorted(z.namelist()):
            parts = name.split("/")
            if len(parts) != 3 or parts[0] != "jni" or parts[1] not in abis or not parts[2].endswith(".so"):
                continue
            target = Path(tmp) / f"{parts[1]}-{parts[2]}"
            target.write_bytes(z.read(name))
            try:
                elf = read_elf(target)
            except TorchdroidError:
                low.append(f"{name} (not an ELF file)")
                continue
            if elf.load_alignment < page_size:
                low.append(f"{name} ({elf.load_alignment} B)")
    return low


def page_size_warnings(runtime: Runtime, abis: Sequence[str]) -> List[str]:
    """A warning when the runtime's native libraries cannot load on devices with 16 KB pages (Android 15+)."""
    from toolchain.elf import ABIS_16K, PAGE_16K

    abis_16k = [a for a in abis if a in ABIS_16K]
    if not abis_16k:
        return []
    if runtime.aar:
        low = _aar_libraries_below(runtime.aar, abis_16k, PAGE_16K)
        if not low:
            return []
        rebuild = ("`invoke build-android --aar` (it links with 16 KB alignment)" if runtime.library == "pytorch_android"
                   else "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,-z,max-page-size=16384 (NDK r27+ does it by default)")
        return [f"the AAR's native libraries are 4 KB aligned: {', '.join(low[:4])}{' …' if len(low) > 4 else ''}. "
                f"They do not load on Android 15+ devices with 16 KB pages; rebuild the AAR with {rebuild} and pass that"]
    if runtime.library != "pytorch_android":
        return []  # the published executorch-android's alignment is not known here (docs/facts.md EA7)
    return [f"org.pytorch:pytorch_android:{runtime.pytorch_android} from Maven Central has 4 KB aligned native "
            f"libraries ({pins.MAVEN_RUNTIME_PAGE_ALIGNMENT_SOURCE}): the app does not load on Android 15+ devices "
            "with 16 KB pages. For those, build the runtime with `invoke build-android --aar` and pass it with --aar"]
