"""Every pin torchdroid depends on, in one place.

A *lane* is one consistent set of pins: the PyTorch commit the Android runtime
is built from, the NDK revisions and host Python that commit builds with, the
torch that must convert models for it, the pytorch_android runtime the app
uses and the Gradle / Android Gradle Plugin versions.  Every artefact records
the lane and pins it was made with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from .errors import UsageError

PYTORCH_REPO_URL = "https://github.com/pytorch/pytorch.git"

DEFAULT_ABI = "arm64-v8a"
DEFAULT_API_LEVEL = 29  # NNAPI as torch uses it needs Android 10 (API 29)
NNAPI_MIN_SDK = 29
ABIS = ("arm64-v8a", "armeabi-v7a", "x86_64", "x86")
ABI_ELF_MACHINE = {  # what `readelf -h` / e_machine says for each ABI
    "arm64-v8a": "AArch64",
    "armeabi-v7a": "ARM",
    "x86_64": "Advanced Micro Devices X86-64",
    "x86": "Intel 80386",
}


@dataclass(frozen=True)
class Lane:
    name: str
    description: str
    pytorch_commit: str  # a full SHA
    pytorch_ref: str  # the tag or date the SHA stands for (documentation only)
    torchvision_commit: Optional[str]
    ndk_min: str  # inclusive, as in source.properties Pkg.Revision
    ndk_max: str  # inclusive upper bound (major.minor.build)
    ndk_recommended: str  # the revision to tell users to install (e.g. "r21e")
    host_python_min: Tuple[int, int]
    host_python_max: Tuple[int, int]  # inclusive
    converter_torch: str  # the torch that must convert models for this runtime
    pytorch_android: Optional[str]  # Maven version of org.pytorch:pytorch_android, None: build the AAR
    gradle: str
    android_gradle_plugin: str
    compile_sdk: int
    notes: Tuple[str, ...] = field(default_factory=tuple)
    # Added for ndk_build (additive, with defaults):
    pytorch_date: str = ""  # commit date (ISO), used to pick the nearest preset for a custom --commit
    build_env: Tuple[Tuple[str, str], ...] = ()  # extra environment for scripts/build_android.sh
    verified: Tuple[str, ...] = ()  # which pins were checked against public sources, and how
    unverified: Tuple[str, ...] = ()  # which pins were NOT verified (say so in reports)
    # Added for the real upstream (issue 9; sources in docs/facts.md):
    ndk_recommended_revision: str = ""  # Pkg.Revision of ndk_recommended: what `sdkmanager 'ndk;REV'` installs
    vulkan_default_on: bool = False  # CMakeLists.txt turns USE_VULKAN on for ANDROID (needs the NDK's vulkan_wrapper)
    aar_gradle: str = ""  # the Gradle version android/gradle/wrapper of this commit runs (--aar)
    aar_android_gradle_plugin: str = ""  # the AGP android/build.gradle of this commit applies (--aar)
    app_runtime_available: bool = True  # False: make-app must use --aar (the repository or version is gone)
    app_runtime_unavailable_reason: str = ""
    # Issue 20: android/gradlew exists at this lane's commit (pytorch/pytorch#51067 added it in 2021-02); without it
    # upstream's AAR script needs a system Gradle torchdroid cannot pin, so build-android refuses --aar.
    aar_gradle_wrapper: bool = True

    def to_dict(self) -> Dict[str, object]:
        return {
            "name": self.name,
            "pytorch_commit": self.pytorch_commit,
            "pytorch_ref": self.pytorch_ref,
            "torchvision_commit": self.torchvision_commit,
            "ndk_range": [self.ndk_min, self.ndk_max],
            "ndk_recommended": self.ndk_recommended,
            "host_python_range": [".".join(map(str, self.host_python_min)), ".".join(map(str, self.host_python_max))],
            "converter_torch": self.converter_torch,
            "pytorch_android": self.pytorch_android,
            "gradle": self.gradle,
            "android_gradle_plugin": self.android_gradle_plugin,
            "compile_sdk": self.compile_sdk,
            "pytorch_date": self.pytorch_date,
            "build_env": dict(self.build_env),
            "unverified": list(self.unverified),
            "ndk_recommended_revision": self.ndk_recommended_revision,
            "vulkan_default_on": self.vulkan_default_on,
            "aar_gradle": self.aar_gradle,
            "aar_android_gradle_plugin": self.aar_android_gradle_plugin,
            "app_runtime_available": self.app_runtime_available,
            "aar_gradle_wrapper": self.aar_gradle_wrapper,
        }


LANES: Dict[str, Lane] = {
    "seed-2020": Lane(
        name="seed-2020",
        description="exactly the Nov 2020 PyTorch Mobile + NNAPI tutorials' setup",
        pytorch_commit="c19eb4ad73ebf16c7dc73229729ed95692472f6e",
        pytorch_ref="2020-11-06 nightly",
        torchvision_commit="052edcecef3eb0ae9fe9e4b256fa2a488f9f395b",
        ndk_min="19.2.5345600",  # r19c
        ndk_max="21.4.7075529",  # r21e
        ndk_recommended="r21e (21.4.7075529)",
        host_python_min=(3, 6),
        host_python_max=(3, 8),
        converter_torch="torch built from c19eb4ad73ebf16c7dc73229729ed95692472f6e (1.8.0.dev20201106)",
        pytorch_android="1.8.0-SNAPSHOT",
        gradle="6.7.1",
        android_gradle_plugin="4.1.3",
        compile_sdk=30,
        notes=("models converted by torch 2.x call Compilation.init2, which this runtime lacks",),
        pytorch_date="2020-11-06",
        verified=(
            "scripts/build_android.sh of this era overwrites ANDROID_NATIVE_API_LEVEL with 21 and passes "
            "-DBUILD_BINARY=OFF before the user's CMake arguments (read from pytorch/pytorch history)",
        ),
        unverified=(
            "the commit SHA, torchvision SHA and NDK r19c-r21e range are taken from the tutorials as given in "
            "issue 3; the script was not read at exactly c19eb4ad (not in the searchable index)",
        ),
        ndk_recommended_revision="21.4.7075529",
        vulkan_default_on=False,  # USE_VULKAN became ON-for-Android in Jan 2021 (pytorch/pytorch#51291)
        # no aar_gradle / aar_android_gradle_plugin: android/gradlew does not exist at this commit (added 2021-02,
        # pytorch/pytorch#51067), so build-android refuses --aar for this lane and no Gradle of upstream's applies
        app_runtime_available=False,
        aar_gradle_wrapper=False,
        app_runtime_unavailable_reason=(
            "pytorch_android 1.8.0-SNAPSHOT was only ever published to the OSSRH snapshot repository "
            "(oss.sonatype.org/content/repositories/snapshots), which Sonatype shut down on 2025-06-30; "
            "no release of that version exists on Maven Central"),
    ),
    "current": Lane(
        name="current",
        description="the newest PyTorch release that still ships scripts/build_android.sh (v2.8.x)",
        pytorch_commit="ba56102387ef21a3b04b357e5b183d48f0afefc7",
        pytorch_ref="v2.8.0",
        torchvision_commit=None,
        ndk_min="21.4.7075529",  # r21e
        ndk_max="28.99.99999999",
        ndk_recommended="r26d (26.3.11579264)",
        host_python_min=(3, 9),
        host_python_max=(3, 13),
        converter_torch="torch==2.8.0",
        pytorch_android=None,
        gradle="8.7",
        android_gradle_plugin="8.5.2",
        compile_sdk=34,
        notes=(
            "no pytorch_android of this version is published on Maven: build the AAR with `invoke build-android --aar`",
            "BUILD_LITE_INTERPRETER=0: the full JIT, so speed_benchmark_torch and the AAR load TorchScript (.pt) models",
        ),
        pytorch_date="2025-08-06",
        build_env=(("BUILD_LITE_INTERPRETER", "0"),),
        ndk_recommended_revision="26.3.11579264",
        vulkan_default_on=True,
        aar_gradle="6.8.3",
        aar_android_gradle_plugin="4.1.2",
        verified=(
            "v2.8.0 is ba56102387ef21a3b04b357e5b183d48f0afefc7 (release commit list and several pinned permalinks)",
            "its scripts/build_android.sh still overwrites ANDROID_NATIVE_API_LEVEL with 21, defaults "
            "BUILD_LITE_INTERPRETER to ON and BUILD_BINARY to OFF; user CMake arguments go last",
        ),
        unverified=(
            "NDK range: r21e is what PyTorch's own Android CI installed; the upper bound (r28) is an estimate, "
            "not a tested build",
            "pytorch_date is the v2.8.0 release date, not the commit date",
            "aar_gradle/aar_android_gradle_plugin: read from stored versions of android/ (AGP 4.1.2 in "
            "android/build.gradle; Gradle 6.8.3 since pytorch/pytorch#53567, but one stored wrapper names 8.1.1); "
            "build-android --aar reads the checkout's own files before choosing a JDK",
        ),
    ),
}
DEFAULT_LANE = "current"

# The app template's runtime when no lane AAR is used: the newest org.pytorch:pytorch_android on Maven Central
# (2.1.0, Oct 2023; pytorch/pytorch#154449 names it as the version users have).  See docs/facts.md.
PYTORCH_ANDROID_DEFAULT = "2.1.0"
# Flexible (16 KB) page sizes: the NDK's CMake toolchain option from r27 on, a linker flag before.
NDK_FLEXIBLE_PAGE_SIZES_MIN_MAJOR = 27
FLEXIBLE_PAGE_SIZES_ARG = "-DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON"
MAX_PAGE_SIZE_16K_LDFLAG = "-Wl,-z,max-page-size=16384"
# NNAPI is deprecated from Android 15 (API 35): the NDK marks its functions __NNAPI_DEPRECATED_IN(35).
NNAPI_DEPRECATED_SDK = 35
# Upstream build scripts need this much space: a full PyTorch checkout with submodules (~3 GB) plus one ABI's
# build tree (~5 GB).  Checked before fetching.
CHECKOUT_BYTES = 3 * 1024 ** 3
BUILD_TREE_BYTES = 5 * 1024 ** 3
CAMERAX_VERSION = "1.3.4"
# The generated app's other libraries (make-app): androidx.activity (ComponentActivity, a LifecycleOwner for
# CameraX) and, when the app links a local pytorch_android AAR, the runtime's own dependencies, which a
# file dependency does not bring in (the versions pytorch_android 1.13's POM names).
ANDROIDX_ACTIVITY_VERSION = "1.8.2"
FBJNI_VERSION = "0.2.2"
SOLOADER_VERSION = "0.10.5"
# `-SNAPSHOT` runtimes came from the OSSRH snapshot repository, which shut down on this date (docs/facts.md):
# make-app refuses them and asks for a locally built AAR.
OSSRH_SHUTDOWN = "2025-06-30"
# Every org.pytorch:pytorch_android on Maven Central (newest 2.1.0) links its .so files for 4 KB pages.
MAVEN_RUNTIME_PAGE_ALIGNMENT_SOURCE = "pytorch/pytorch#154449"


def lane(name: str) -> Lane:
    try:
        return LANES[name]
    except KeyError:
        raise UsageError(
            f"unknown lane {name!r}",
            remedy=f"use one of: {', '.join(LANES)} (--lane or config pytorch.lane)",
        ) from None


def maven_version(value: str, option: str = "--pytorch-android", example: str = "1.13.1") -> str:
    """A Maven version as given by a user (``1.13.1``, ``2.1.0-SNAPSHOT``): digits first, no spaces or quotes."""
    if not re.match(r"^[0-9][0-9A-Za-z.+_-]*$", value or ""):
        raise UsageError(f"{option} {value!r} is not a Maven version", remedy=f"pass e.g. {example}")
    return value


# --------------------------------------------------------------------------- how far each pin was checked

PINS_CHECKED_ON = "2026-11-26"
NEWEST = f"newest known on {PINS_CHECKED_ON}"  # needs at least two independent sources (docs/facts.md)
UNVERIFIED = "unverified"  # fewer than two sources: never called the newest
MATCHES = "matches"  # deliberately equal to another pin or upstream file (no claim that it is the newest)


@dataclass(frozen=True)
class PinNote:
    """What torchdroid knows about one pin: ``NEWEST`` (two or more independent sources), ``MATCHES`` (what it is
    kept equal to) or ``UNVERIFIED``; ``facts`` are the docs/facts.md rows that hold the sources."""

    status: str
    facts: Tuple[str, ...] = ()
    sources: Tuple[str, ...] = ()
    why: str = ""

    def describe(self) -> str:
        refs = f" (docs/facts.md {', '.join(self.facts)})" if self.facts else ""
        return f"{self.status}{': ' + self.why if self.why else ''}{refs}"


# Every version pin of this module: the module constant's name, or LANES.<lane>.<field>.
PIN_NOTES: Dict[str, PinNote] = {
    "PYTORCH_ANDROID_DEFAULT": PinNote(NEWEST, ("F18", "PN1"), (
        "pytorch/pytorch#154449 names 2.1.0 as the version users have",
        "public build files depend on org.pytorch:pytorch_android:2.1.0; none on 2.2+ (find_string)")),
    "CAMERAX_VERSION": PinNote(UNVERIFIED, ("PN1",), why="a CameraX the template compiles with; public builds use "
                                                         "newer ones (1.4.1), so not the newest"),
    "ANDROIDX_ACTIVITY_VERSION": PinNote(UNVERIFIED, ("PN1",), why="compiles with the template; not the newest"),
    "FBJNI_VERSION": PinNote(UNVERIFIED, ("PN1",), why="what pytorch_android 1.13's POM names (POM not re-read)"),
    "SOLOADER_VERSION": PinNote(UNVERIFIED, ("PN1",), why="what pytorch_android 1.13's POM names (POM not re-read)"),
    "LANES.seed-2020.pytorch_commit": PinNote(MATCHES, ("PN1",), why="the Nov 2020 tutorials' nightly (issue 3)"),
    "LANES.seed-2020.ndk_recommended": PinNote(MATCHES, ("PN1",), why="the tutorials' NDK range (not re-read)"),
    "LANES.seed-2020.converter_torch": PinNote(MATCHES, ("PN1",), why="the runtime's own commit"),
    "LANES.seed-2020.pytorch_android": PinNote(MATCHES, ("F19",), why="android/gradle.properties VERSION_NAME"),
    "LANES.seed-2020.gradle": PinNote(UNVERIFIED, ("PN1",)),
    "LANES.seed-2020.android_gradle_plugin": PinNote(UNVERIFIED, ("PN1",)),
    "LANES.current.pytorch_commit": PinNote(NEWEST, ("F17", "PN1"), (
        "pytorch/pytorch#167186 quotes the commit that deleted scripts/build_android.sh before v2.9.0",
        "pytorch/pytorch#158475"), why="the newest release that still ships scripts/build_android.sh (v2.8.0)"),
    "LANES.current.ndk_recommended": PinNote(UNVERIFIED, ("PN1",), why="r26d is torchdroid's choice: no upstream source "
                                                                     "recommends an NDK for v2.8.0 (PyTorch's own CI "
                                                                     "installed r21e)"),
    "LANES.current.converter_torch": PinNote(MATCHES, ("PN1",), why="the runtime's release"),
    "LANES.current.gradle": PinNote(UNVERIFIED, ("PN1",)),
    "LANES.current.android_gradle_plugin": PinNote(UNVERIFIED, ("PN1",)),
    "LANES.current.aar_gradle": PinNote(UNVERIFIED, ("F12",), why="two stored wrappers disagree (6.8.3, 8.1.1)"),
    "LANES.current.aar_android_gradle_plugin": PinNote(UNVERIFIED, ("F12",)),
}
LANE_PIN_FIELDS = ("pytorch_commit", "ndk_recommended", "converter_torch", "pytorch_android", "gradle",
                   "android_gradle_plugin", "aar_gradle", "aar_android_gradle_plugin")
