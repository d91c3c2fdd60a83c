"""The Android SDK: one class for build-android (--aar), build-app and doctor.

Where it is looked for, in order: the ``android.sdk`` setting (or --sdk), ``ANDROID_HOME``,
``ANDROID_SDK_ROOT``, then ``sdk.dir`` in a Gradle project's ``local.properties``.  A directory counts as
an SDK when it has one of ``platforms/``, ``build-tools/``, ``cmdline-tools/`` or ``platform-tools/``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

from toolchain.errors import ToolNotFound

MARKERS = ("platforms", "build-tools", "cmdline-tools", "platform-tools")
INSTALL = ("install the Android SDK command-line tools (https://developer.android.com/studio#command-tools), then "
           "`sdkmanager \"platform-tools\" \"platforms;android-{api}\" \"build-tools;{api}.0.0\"` and "
           "`export ANDROID_HOME=/path/to/sdk` (or set android.sdk in invoke.yaml)")


def _local_properties_sdk(project: Path) -> Optional[str]:
    props = Path(project) / "local.properties"
    if not props.is_file():
        return None
    for line in props.read_text(encoding="utf-8", errors="replace").splitlines():
        m = re.match(r"^\s*sdk\.dir\s*=\s*(.+?)\s*$", line)
        if m:
            return m.group(1).replace("\\:", ":").replace("\\\\", "\\")
    return None


@dataclass(frozen=True)
class AndroidSdk:
    path: Path
    found_by: str  # "android.sdk", "ANDROID_HOME", "ANDROID_SDK_ROOT" or "sdk.dir in .../local.properties"

    # the names appgen used
    @property
    def root(self) -> Path:
        return self.path

    @property
    def source(self) -> str:
        return self.found_by

    @staticmethod
    def candidates(configured: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                   project: Optional[Path] = None) -> List[Tuple[str, Path]]:
        env = os.environ if env is None else env
        out: List[Tuple[str, Path]] = []
        if configured:
            out.append(("android.sdk", Path(str(configured)).expanduser()))
        for var in ("ANDROID_HOME", "ANDROID_SDK_ROOT"):
            if env.get(var):
                out.append((var, Path(env[var]).expanduser()))
        if project is not None:
            value = _local_properties_sdk(Path(project))
            if value:
                out.append((f"sdk.dir in {Path(project) / 'local.properties'}", Path(value).expanduser()))
        return out

    def problem(self) -> Optional[str]:
        """Why this directory cannot be used as the SDK, or None."""
        if not self.path.is_dir():
            return f"the Android SDK directory {self.path} (from {self.found_by}) does not exist"
        if not any((self.path / m).is_dir() for m in MARKERS):
            return (f"{self.path} (from {self.found_by}) does not look like an Android SDK "
                    f"(no {', '.join(m + '/' for m in MARKERS)})")
        return None

    @classmethod
    def find(cls, configured: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
             project: Optional[Path] = None) -> Optional["AndroidSdk"]:
        """The first candidate that is an SDK; an explicit ``android.sdk`` that is not one is never skipped."""
        for source, path in cls.candidates(configured, env, project):
            sdk = cls(path.resolve() if path.exists() else path, source)
            if sdk.problem() is None:
                return sdk
            if source == "android.sdk":
                return None
        return None

    @classmethod
    def require(cls, configured: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                project: Optional[Path] = None, why: str = "", api: int = 34) -> "AndroidSdk":
        """The SDK, or ToolNotFound naming every place looked at and why each was refused."""
        found = cls.find(configured, env, project)
        if found is not None:
            return found
        refused = [cls(p, s).problem() for s, p in cls.candidates(configured, env, project)]
        cause = "; ".join(r for r in refused if r) or (
            "none of android.sdk, ANDROID_HOME, ANDROID_SDK_ROOT" + (", local.properties sdk.dir" if project else "")
            + " is set")
        raise ToolNotFound(f"no Android SDK found{f' ({why})' if why else ''}", cause=cause,
                           remedy=INSTALL.format(api=api))

    @classmethod
    def locate(cls, configured: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
               why: str = "--aar builds the pytorch_android AAR with Gradle") -> "AndroidSdk":
        """build-android's entry point (kept): :meth:`require` with the --aar reason."""
        try:
            return cls.require(configured, env, why=why)
        except ToolNotFound as e:
            raise ToolNotFound(e.what, cause=e.cause, remedy=f"{e.remedy}; or drop --aar and use a published "
                                                             "pytorch_android") from None
