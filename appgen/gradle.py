"""The Gradle side: a local Gradle (to create the wrapper jar) and the hints for ./gradlew failures.

The Android SDK is :class:`toolchain.tools.AndroidSdk` (one class for every stage)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from toolchain.errors import ToolFailed, ToolNotFound
from toolchain.records import remake_app_command
from toolchain.runner import run

log = logging.getLogger(__name__)

WRAPPER_JAR = Path("gradle/wrapper/gradle-wrapper.jar")


def wrapper_jar_howto(project: Path, gradle_version: str, variant: Optional[str] = None) -> str:
    """How to get the wrapper jar into ``project``; ``variant``: the app's model, so that the make-app command
    named rewrites this project (a bare `invoke make-app --force` rewrites the default model's app)."""
    again = remake_app_command(project, variant) if variant else "invoke make-app --force"
    return (f"install Gradle (https://gradle.org/install/, or `sdk install gradle {gradle_version}`) and run "
            f"`gradle wrapper --gradle-version {gradle_version}` in {project}, or open {project} in Android Studio "
            f"(it creates the wrapper jar); `{again}` then adds it by itself")


@dataclass(frozen=True)
class Gradle:
    """A Gradle installed on this machine (only used to write the wrapper jar)."""

    executable: Path
    version: str

    @classmethod
    def locate(cls, env: Optional[Mapping[str, str]] = None) -> Optional["Gradle"]:
        env = os.environ if env is None else env
        candidates = []
        if env.get("GRADLE_HOME"):
            candidates.append(Path(env["GRADLE_HOME"]) / "bin" / "gradle")
        found = shutil.which("gradle", path=env.get("PATH"))
        if found:
            candidates.append(Path(found))
        for exe in candidates:
            if exe.is_file() and os.access(exe, os.X_OK):
                return cls(exe, cls._version(exe))
        return None

    @staticmethod
    def _version(exe: Path) -> str:
        res = run([exe, "--version"], check=False, timeout=300, what="`gradle --version`")
        m = re.search(r"^Gradle\s+(\S+)", res.output, re.MULTILINE)
        if res.returncode != 0 or not m:
            raise ToolNotFound(f"{exe} does not work as Gradle", cause="`gradle --version` printed no version",
                               tail=res.lines[-10:], remedy="fix or remove that Gradle (or unset GRADLE_HOME)")
        return m.group(1)

    def write_wrapper_jar(self, project: Path, gradle_version: str, log_path: Optional[Path] = None) -> Path:
        """Run ``gradle wrapper`` in an empty scratch project and take its jar.

        The scratch project keeps Gradle from evaluating the app's build files (which would need the
        Android Gradle Plugin from the network).  Our own gradlew scripts and properties stay.
        """
        with tempfile.TemporaryDirectory(prefix="torchdroid-wrapper-") as scratch:
            scratch_dir = Path(scratch)
            (scratch_dir / "settings.gradle").write_text("rootProject.name = 'wrapper'\n")
            run([self.executable, "wrapper", "--gradle-version", gradle_version, "--distribution-type", "bin"],
                cwd=scratch_dir, log_path=log_path, timeout=600, what="`gradle wrapper`",
                env={"GRADLE_USER_HOME": os.environ.get("GRADLE_USER_HOME")} if os.environ.get("GRADLE_USER_HOME") else None)
            jar = scratch_dir / WRAPPER_JAR
            if not jar.is_file():
                raise ToolFailed(f"`gradle wrapper` ({self.executable}, Gradle {self.version}) wrote no {WRAPPER_JAR}",
                                 log_path=log_path, remedy=wrapper_jar_howto(project, gradle_version))
            dst = Path(project) / WRAPPER_JAR
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(jar, dst)
        return dst


def gradle_hint(output: str) -> Optional[str]:
    """A remedy for the Gradle failures people meet most."""
    if "SDK location not found" in output:
        return "set ANDROID_HOME to your Android SDK (or sdk.dir in local.properties)"
    if ("licences" in output or "licenses" in output) and "not accepted" in output:
        return "accept the SDK licenses: `sdkmanager --licenses`"
    if "Could not resolve" in output or "Could not GET" in output or "UnknownHostException" in output:
        return "Gradle needs the network (google() and mavenCentral()) for the first build; check proxy/offline settings"
    if "Unsupported class file major version" in output or "requires Java" in output or "Android Gradle plugin requires Java" in output:
        return "the Android Gradle Plugin needs JDK 17: set JAVA_HOME to a JDK 17"
    return None
