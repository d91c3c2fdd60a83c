"""``invoke build-app``: ./gradlew assembleDebug in a project make-app wrote, and the APK into app-info."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

from toolchain import records
from toolchain.errors import ToolNotFound, VerificationError
from toolchain.fsutil import sha256_file
from toolchain.runner import run

from .gradle import WRAPPER_JAR, AndroidSdk, gradle_hint, wrapper_jar_howto

log = logging.getLogger(__name__)

APK_DEBUG = Path("app/build/outputs/apk/debug/app-debug.apk")
APP_INFO_REMEDY = "run `invoke make-app` first (or point --out at a project it wrote)"


@dataclass(frozen=True)
class BuildAppSettings:
    project: Path = Path("build/app")
    build_dir: Path = Path("build")
    timeout: Optional[float] = 3600.0


@dataclass
class BuildAppResult:
    apk: Path
    sha256: str
    size: int
    seconds: float
    log_path: Path
    sdk: Path


def missing_tools(project: Path, env: Optional[Mapping[str, str]] = None) -> List[Tuple[str, str, str]]:
    """Everything ``./gradlew assembleDebug`` needs that is not here: (what, detail, how to get it)."""
    env = os.environ if env is None else env
    info = records.read_record(project / records.APP_INFO_NAME, records.APP_INFO_KIND, records.APP_INFO_SCHEMA,
                               APP_INFO_REMEDY)
    gradle_version = (info.get("pins") or {}).get("gradle", "8.7")
    compile_sdk = (info.get("pins") or {}).get("compile_sdk", 34)
    props = project / "local.properties"
    sdk_fix = AndroidSdk.REMEDY.format(api=compile_sdk, props=props)
    problems = []
    sdk = AndroidSdk.locate(project, env)
    if sdk is None:
        problems.append(("the Android SDK", f"neither ANDROID_HOME nor ANDROID_SDK_ROOT is set and {props} has no sdk.dir",
                         sdk_fix))
    elif sdk.problem():
        problems.append(("the Android SDK", sdk.problem(), sdk_fix))
    if not (project / WRAPPER_JAR).is_file():
        problems.append(("the Gradle wrapper jar", f"{project / WRAPPER_JAR} does not exist",
                         wrapper_jar_howto(project, gradle_version)))
    gradlew = project / "gradlew"
    if not gradlew.is_file():
        problems.append(("gradlew", f"{gradlew} does not exist", "regenerate the project with `invoke make-app --force`"))
    elif not os.access(gradlew, os.X_OK):
        problems.append(("an executable gradlew", f"{gradlew} is not executable", f"chmod +x {gradlew}"))
    return problems


def build_app(settings: BuildAppSettings, env: Optional[Mapping[str, str]] = None) -> BuildAppResult:
    project = Path(settings.project).resolve()
    env = dict(os.environ if env is None else env)
    problems = missing_tools(project, env)
    if problems:
        raise ToolNotFound(
            f"cannot build the app in {project}: missing {' and '.join(p[0] for p in problems)}",
            cause="; ".join(p[1] for p in problems),
            remedy="".join(f"\n    - {p[2]}" for p in problems) + f"\n    then run `invoke build-app --out {settings.project}` again",
        )
    sdk = AndroidSdk.locate(project, env)
    log_path = Path(settings.build_dir) / "logs" / f"gradle-assembleDebug-{time.strftime('%Y%m%d-%H%M%S')}.log"
    log.info("building %s with ./gradlew assembleDebug (SDK %s from %s; full output in %s)",
             project, sdk.root, sdk.source, log_path)
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
    info_path = project / records.APP_INFO_NAME
    info = records.read_record(info_path, records.APP_INFO_KIND, records.APP_INFO_SCHEMA, APP_INFO_REMEDY)
    body = {k: v for k, v in info.items() if k not in ("kind", "schema", "written")}
    body["apk"] = {"path": str(APK_DEBUG), "sha256": digest, "size": apk.stat().st_size, "built": records.now_iso()}
    records.write_record(info_path, records.APP_INFO_KIND, records.APP_INFO_SCHEMA, body)
    return BuildAppResult(apk, digest, apk.stat().st_size, seconds, log_path, sdk.root)
