"""``invoke build-app``: ./gradlew assembleDebug in a project make-app wrote, and the APK into app-info."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

from toolchain import records
from toolchain.errors import ToolNotFound, VerificationError, command
from toolchain.fsutil import TREE, record_written, sha256_file
from toolchain.layout import Layout
from toolchain.runner import run

from toolchain.tools.sdk import INSTALL as SDK_INSTALL
from toolchain.tools.sdk import AndroidSdk
from toolchain.settings import default

from .gradle import WRAPPER_JAR, gradle_hint, wrapper_jar_howto

log = logging.getLogger(__name__)

APK_DEBUG = Path("app/build/outputs/apk/debug/app-debug.apk")
GRADLE_OUTPUTS = ("build", "app/build", ".gradle", "app/.cxx", ".kotlin")  # what ./gradlew assembleDebug writes into the project


@dataclass(frozen=True)
class BuildAppSettings:
    project: Path = Path(default("app.out"))
    build_dir: Path = Path(default("build_dir"))
    timeout: Optional[float] = default("app.gradle_timeout")
    sdk: Optional[str] = None  # config android.sdk: wins over ANDROID_HOME / ANDROID_SDK_ROOT / local.properties


@dataclass
class BuildAppResult:
    apk: Path
    sha256: str
    size: int
    seconds: float
    log_path: Path
    sdk: Path


def missing_tools(project: Path, env: Optional[Mapping[str, str]] = None,
                  configured_sdk: Optional[str] = None) -> List[Tuple[str, str, str]]:
    """Everything ``./gradlew assembleDebug`` needs that is not here: (what, detail, how to get it)."""
    env = os.environ if env is None else env
    info = records.AppInfo.load(project)
    gradle_version = info.pins.get("gradle", "8.7")
    compile_sdk = info.pins.get("compile_sdk", 34)
    props = project / "local.properties"
    sdk_fix = SDK_INSTALL.format(api=compile_sdk) + f" or sdk.dir=/path/to/sdk in {props}"
    problems = []
    if AndroidSdk.find(configured_sdk, env, project) is None:
        refused = [AndroidSdk(path, source).problem() for source, path in
                   AndroidSdk.candidates(configured_sdk, env, project)]
        cause = "; ".join(r for r in refused if r) or (
            f"config android.sdk is not set, neither ANDROID_HOME nor ANDROID_SDK_ROOT is set and {props} has no sdk.dir")
        problems.append(("the Android SDK", cause, sdk_fix))
    if not (project / WRAPPER_JAR).is_file():
        problems.append(("the Gradle wrapper jar", f"{project / WRAPPER_JAR} does not exist",
                         wrapper_jar_howto(project, gradle_version, info.variant)))
    gradlew = project / "gradlew"
    if not gradlew.is_file():
        problems.append(("gradlew", f"{gradlew} does not exist", f"regenerate the project with `{records.remake_app_command(project, info.variant)}`"))
    elif not os.access(gradlew, os.X_OK):
        problems.append(("an executable gradlew", f"{gradlew} is not executable", f"chmod +x {gradlew}"))
    return problems


def build_app(settings: BuildAppSettings, env: Optional[Mapping[str, str]] = None) -> BuildAppResult:
    project = Path(settings.project).resolve()
    env = dict(os.environ if env is None else env)
    problems = missing_tools(project, env, settings.sdk)
    if problems:
        raise ToolNotFound(
            f"cannot build the app in {project}: missing {' and '.join(p[0] for p in problems)}",
            cause="; ".join(p[1] for p in problems),
            remedy="".join(f"\n    - {p[2]}" for p in problems) + f"\n    then run `{command('invoke', 'build-app', '--out', settings.project)}` again",
        )
    sdk = AndroidSdk.find(settings.sdk, env, project)
    log_path = Layout(settings.build_dir).logs / f"gradle-assembleDebug-{time.strftime('%Y%m%d-%H%M%S')}.log"
    log.info("building %s with ./gradlew assembleDebug (SDK %s from %s; full output in %s)",
             project, sdk.root, sdk.source, log_path)
    for tree in GRADLE_OUTPUTS:  # what Gradle writes into the project is torchdroid's to remove (clean, --force)
        record_written(project / tree, kind=TREE)
    started = time.monotonic()
    run([project / "gradlew", "assembleDebug", "--console=plain"], cwd=project,
        env={**env, "ANDROID_HOME": str(sdk.root), "ANDROID_SDK_ROOT": str(sdk.root)}, replace_env=True,
        log_path=log_path,
        timeout=settings.timeout, what="`./gradlew assembleDebug`", hint=gradle_hint,
        on_line=lambda line: log.debug("gradle: %s", line))
    seconds = time.monotonic() - started
    apk = project / APK_DEBUG
    if not apk.is_file():
        raise VerificationError(f"./gradlew assembleDebug succeeded but wrote no {APK_DEBUG}",
                                log_path=log_path, remedy="look at the Gradle log for where the APK went")
    digest = sha256_file(apk)
    info = records.AppInfo.load(project)
    apk_record = records.AppApk(APK_DEBUG.as_posix(), digest, apk.stat().st_size, records.now_iso())
    dataclasses.replace(info, apk=apk_record).write()
    return BuildAppResult(apk, digest, apk.stat().st_size, seconds, log_path, sdk.root)
