"""`build-android --aar`: the pytorch_android AAR through upstream's own scripts, made to work on a real machine.

Upstream facts (docs/facts.md): ``scripts/build_pytorch_android.sh`` sources ``android/common.sh``, whose
``build_android`` runs ``scripts/build_android.sh`` for each ABI with ``BUILD_ROOT=$BUILD_ROOT/build_android_<abi>``
and no way to pass CMake arguments, then runs ``android/gradlew`` (Gradle 6.8.3, AGP 4.1 in the v2.8 era).

Two consequences and what torchdroid does about them:

* **Vulkan.** v2.8's CMakeLists.txt switches USE_VULKAN on for Android, and nothing in the AAR path can switch it
  off.  But its option is only defined ``if(NOT DEFINED USE_VULKAN)``: a value already in the CMake cache wins.  So
  torchdroid points ``BUILD_ROOT`` at ``<out>/aar`` and seeds ``<out>/aar/build_android_<abi>/CMakeCache.txt`` with
  ``USE_VULKAN:BOOL=OFF`` (and the 16 KB page settings) before the script configures that tree.
* **JDK.** Gradle runs only on the Java versions its compatibility matrix names (6.8.3: Java 8 to 15, so not
  JDK 17).  torchdroid reads the checkout's Gradle wrapper and AGP versions, picks a JDK that suits both (or takes
  ``--java-home``) *before any build*, and runs the script with that ``JAVA_HOME``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from toolchain import pins
from toolchain.elf import ABIS_16K, PAGE_16K, read_elf
from toolchain.errors import ToolFailed, ToolNotFound, UsageError, VerificationError
from toolchain.fsutil import atomic_copy
from toolchain.runner import run
from toolchain.tools.jdk import Jdk, agp_min_java, gradle_java_range
from toolchain.tools.sdk import AndroidSdk

log = logging.getLogger(__name__)

AAR_SCRIPT = Path("scripts") / "build_pytorch_android.sh"
AAR_OUTPUT = Path("android") / "pytorch_android" / "build" / "outputs" / "aar" / "pytorch_android-release.aar"
AAR_NAME = "pytorch_android-release.aar"
AAR_ROOT = "aar"  # <out>/aar is BUILD_ROOT for android/common.sh, which builds in $BUILD_ROOT/build_android_<abi>
WRAPPER = Path("android") / "gradlew"
WRAPPER_PROPS = Path("android") / "gradle" / "wrapper" / "gradle-wrapper.properties"
# docs/facts.md F32
NO_WRAPPER_CAUSE = ("android/gradlew arrived with pytorch/pytorch#51067 (2021-02); before it upstream's "
                    "scripts/build_pytorch_android.sh runs a system Gradle (`gradle` on PATH or $GRADLE_HOME), "
                    "whose version (and so the JDK and Android Gradle Plugin it works with) torchdroid cannot pin "
                    "or check")
ROOT_GRADLE = Path("android") / "build.gradle"
SEED_MARK = "# torchdroid seed"


@dataclass(frozen=True)
class GradlePins:
    gradle: str
    agp: str
    source: str  # where the versions were read

    @classmethod
    def from_lane(cls, lane: pins.Lane) -> "GradlePins":
        return cls(lane.aar_gradle or lane.gradle, lane.aar_android_gradle_plugin or lane.android_gradle_plugin,
                   f"lane {lane.name} pins")

    @classmethod
    def from_checkout(cls, source: Path, lane: pins.Lane) -> "GradlePins":
        """The checkout's own versions (android/gradle/wrapper, android/build.gradle); the lane's where absent."""
        fallback = cls.from_lane(lane)
        gradle, agp = fallback.gradle, fallback.agp
        props, build = Path(source) / WRAPPER_PROPS, Path(source) / ROOT_GRADLE
        if props.is_file():
            m = re.search(r"gradle-([0-9][0-9.]*[0-9])-(?:bin|all)\.zip", props.read_text(errors="replace"))
            gradle = m.group(1) if m else gradle
        if build.is_file():
            m = re.search(r"com\.android\.tools\.build:gradle:([0-9][0-9.]*)", build.read_text(errors="replace"))
            agp = m.group(1) if m else agp
        return cls(gradle, agp, f"{WRAPPER_PROPS} and {ROOT_GRADLE} of the checkout")


def choose_jdk(gp: GradlePins, java_home: Optional[str], env: Mapping[str, str]) -> Jdk:
    """A JDK that runs Gradle ``gp.gradle`` with AGP ``gp.agp``: --java-home if given (checked), else one found."""
    why = f"--aar runs upstream's Gradle {gp.gradle} / Android Gradle Plugin {gp.agp} ({gp.source})"
    if not java_home:
        return Jdk.for_gradle(gp.gradle, gp.agp, env, why=why)
    jdk = Jdk.from_home(Path(java_home), "--java-home")
    if jdk is None:
        raise ToolNotFound(f"--java-home {java_home} is not a JDK (no bin/javac and release file)",
                           remedy="pass the JDK's home directory, e.g. /usr/lib/jvm/temurin-11-jdk-amd64")
    low, high = gradle_java_range(gp.gradle)
    low = max(low, agp_min_java(gp.agp))
    if not low <= jdk.major <= high:
        raise ToolNotFound(f"the JDK at {jdk.home} is Java {jdk.major}; {why} and needs Java {low} to {high}",
                           cause="Gradle refuses to run on a Java newer than its compatibility matrix names "
                                 "(\"Unsupported class file major version\")",
                           remedy=f"pass --java-home pointing at a JDK {11 if low <= 11 <= high else low}")
    return jdk


def seed_cache(tree: Path, entries: Dict[str, Tuple[str, str]]) -> None:
    """Make ``tree``'s CMake cache start with ``entries`` (name -> (type, value)); a tree seeded otherwise is
    started over, a tree without our seed is left alone only if it already has the same values."""
    cache = tree / "CMakeCache.txt"
    lines = [f"{name}:{typ}={value}" for name, (typ, value) in sorted(entries.items())]
    if cache.is_file():
        text = cache.read_text(encoding="utf-8", errors="replace")
        if all(line in text.splitlines() for line in lines):
            return
        log.info("the AAR's CMake tree %s was configured with other settings; starting it over", tree)
        shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True, exist_ok=True)
    cache.write_text("\n".join([SEED_MARK, *lines]) + "\n")


def cache_entries(plan: Any, vulkan: bool) -> Dict[str, Tuple[str, str]]:
    """What the AAR's CMake cache is seeded with: Vulkan off unless asked for, the NDK's page-size flags
    (``plan``: build.BuildPlan)."""
    entries: Dict[str, Tuple[str, str]] = {}
    if not vulkan:
        entries["USE_VULKAN"] = ("BOOL", "OFF")
    for arg in plan.tools.ndk.page_size_args():
        name, value = arg[2:].split("=", 1)
        entries[name] = ("BOOL" if value in ("ON", "OFF") else "STRING", value)
    return entries


@dataclass(frozen=True)
class AarResult:
    path: Path
    alignment: Dict[str, int]  # "pytorch_android.aar:jni/<abi>/lib.so" -> LOAD alignment
    warnings: Tuple[str, ...]
    ndk: Dict[str, str]  # how the NDK was forced on AGP (ndk_settings)


INIT_SCRIPT = "torchdroid-ndk.gradle"
GRADLE_USER_HOME = "gradle-user-home"  # <build>/android/gradle-user-home: torchdroid's own, shared by the ABIs


def _agp_at_least(agp: str, want: Tuple[int, int]) -> bool:
    parts = [int(x) for x in re.findall(r"\d+", agp)[:2]] + [0, 0]
    return (parts[0], parts[1]) >= want


def ndk_settings(ndk_path: Path, ndk_revision: str, agp: str) -> Dict[str, str]:
    """What makes AGP ``agp`` build with this NDK instead of its own default (docs/facts.md F33): ``ndkVersion``
    (AGP 3.5+) and ``ndkPath`` (AGP 4.1+); older AGPs read ``ANDROID_NDK_HOME`` (removed in 4.1)."""
    out = {"agp": agp, "ANDROID_NDK_HOME": str(ndk_path)}
    if _agp_at_least(agp, (3, 5)):
        out["ndkVersion"] = ndk_revision
    if _agp_at_least(agp, (4, 1)):
        out["ndkPath"] = str(ndk_path)
    return out


def write_ndk_init_script(gradle_user_home: Path, settings: Dict[str, str]) -> Path:
    """A Gradle init script that sets ``android.ndkVersion`` / ``android.ndkPath`` on every Android module as soon as
    its plugin is applied (upstream's build.gradle sets neither, so nothing overrides them)."""
    lines = [f'        p.android.{key} = "{settings[key]}"' for key in ("ndkVersion", "ndkPath") if key in settings]
    text = ("// Written by torchdroid (build-android --aar): build pytorch_android's JNI code with the NDK torchdroid\n"
            "// was given, not the Android Gradle Plugin's default NDK (docs/facts.md F33).\n"
            "gradle.beforeProject { p ->\n"
            "    ['com.android.library', 'com.android.application'].each { id ->\n"
            "        p.plugins.withId(id) {\n" + "".join(f"    {line}\n" for line in lines) +
            "        }\n    }\n}\n")
    path = gradle_user_home / "init.d" / INIT_SCRIPT
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def aar_alignment(aar: Path, abi: str) -> Tuple[Dict[str, int], List[str]]:
    """LOAD alignment of every ``jni/<abi>/*.so`` in the AAR; warnings for 4 KB ones on a 16 KB-page ABI."""
    aligns: Dict[str, int] = {}
    with zipfile.ZipFile(aar) as z, tempfile.TemporaryDirectory(prefix="torchdroid-aar-") as tmp:
        for name in z.namelist():
            if name.startswith(f"jni/{abi}/") and name.endswith(".so"):
                so = Path(tmp) / Path(name).name
                so.write_bytes(z.read(name))
                try:
                    aligns[f"{AAR_NAME}:{name}"] = read_elf(so).load_alignment
                except VerificationError:
                    aligns[f"{AAR_NAME}:{name}"] = 0
    short = sorted(n for n, a in aligns.items() if a < PAGE_16K)
    warnings = []
    if short and abi in ABIS_16K:
        warnings.append(f"the AAR's native libraries are not 16 KB aligned ({', '.join(short)}): apps using it will "
                        "not load on Android 15+ devices with 16 KB pages (its Gradle build links the JNI library "
                        "itself; NDK r28+ aligns by default)")
    return aligns, warnings


def build_aar(plan: Any, sdk: AndroidSdk, jdk: Optional[Jdk]) -> AarResult:
    """Run upstream's AAR script for ``plan`` (build.BuildPlan, which calls this: typed loosely, no import cycle)."""
    t = plan.target
    script = plan.source / AAR_SCRIPT
    if not script.is_file():
        raise UsageError(f"{AAR_SCRIPT} does not exist at this commit", remedy="drop --aar for this commit")
    aar_root = t.out_dir / AAR_ROOT
    seed_cache(aar_root / f"build_android_{t.abi}", cache_entries(plan, "-DUSE_VULKAN=OFF" not in plan.cmake_args))
    env = dict(plan.env, ANDROID_HOME=str(sdk.path), ANDROID_SDK_ROOT=str(sdk.path), BUILD_ROOT=str(aar_root))
    agp = plan.gradle.agp if plan.gradle else GradlePins.from_lane(t.lane).agp
    ndk = ndk_settings(plan.tools.ndk.path, plan.tools.ndk.revision, agp)
    guh = t.out_dir.parent / GRADLE_USER_HOME
    ndk["init_script"] = str(write_ndk_init_script(guh, ndk))
    env.update(GRADLE_USER_HOME=str(guh), ANDROID_NDK_HOME=ndk["ANDROID_NDK_HOME"])
    log.info("the AAR's JNI build uses NDK %s (%s) through %s", plan.tools.ndk.revision, plan.tools.ndk.path,
             ndk["init_script"])
    if jdk is not None:
        env.update(JAVA_HOME=str(jdk.home), PATH=f"{jdk.home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    log.info("building the pytorch_android AAR for %s with the SDK at %s and JDK %s", t.abi, sdk.path,
             jdk.major if jdk else "?")
    run(["bash", str(script), t.abi], cwd=plan.source, env=env, log_path=t.log_path,
        what="scripts/build_pytorch_android.sh", hint=aar_hint, keep_output=False)
    produced = plan.source / AAR_OUTPUT
    if not produced.is_file():
        raise ToolFailed(f"build_pytorch_android.sh finished but {AAR_OUTPUT} is missing",
                         log_path=t.log_path, remedy="look at the end of the log")
    path = atomic_copy(produced, t.out_dir / AAR_NAME)
    aligns, warnings = aar_alignment(path, t.abi)
    return AarResult(path, aligns, tuple(warnings), ndk)


def aar_hint(output: str) -> Optional[str]:
    if re.search(r"Unsupported class file major version|Could not determine java version|requires Java", output):
        return ("Gradle runs on the wrong JDK: pass --java-home with a JDK that upstream's Gradle accepts "
                "(`invoke doctor` lists the JDKs found; Gradle 6.8.3 needs Java 8 to 15)")
    if "Could not resolve" in output or "jcenter" in output.lower() and "Could not" in output:
        return ("Gradle could not download a dependency: the AAR build needs the network (google(), mavenCentral(), "
                "jcenter()); jcenter is read-only and may miss artefacts")
    if "vulkan_wrapper" in output:
        return "the AAR's CMake tree has USE_VULKAN on: run `invoke build-android --aar --clean`"
    return None
