"""The Android SDK (only needed for --aar): located from --sdk / android.sdk, ANDROID_HOME, ANDROID_SDK_ROOT."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from toolchain.errors import ToolNotFound

MARKERS = ("platforms", "build-tools", "cmdline-tools", "platform-tools")


@dataclass(frozen=True)
class AndroidSdk:
    path: Path
    found_by: str

    @classmethod
    def find(cls, configured: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Optional["AndroidSdk"]:
        env = os.environ if env is None else env
        candidates = []
        if configured:
            candidates.append(("android.sdk", configured))
        for var in ("ANDROID_HOME", "ANDROID_SDK_ROOT"):
            if env.get(var):
                candidates.append((var, env[var]))
        for source, raw in candidates:
            p = Path(raw).expanduser()
            if p.is_dir() and any((p / m).is_dir() for m in MARKERS):
                return cls(p.resolve(), source)
        return None

    @classmethod
    def locate(cls, configured: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
               why: str = "--aar builds the pytorch_android AAR with Gradle") -> "AndroidSdk":
        sdk = cls.find(configured, env)
        if sdk is None:
            raise ToolNotFound(
                f"no Android SDK found ({why})",
                cause="ANDROID_HOME / ANDROID_SDK_ROOT (or config android.sdk) do not point at an SDK "
                      "with platforms/ or cmdline-tools/",
                remedy="install the Android command-line tools (https://developer.android.com/studio#command-tools), "
                       "run `sdkmanager 'platforms;android-34' 'build-tools;34.0.0'` and set ANDROID_HOME to the SDK "
                       "directory; or drop --aar and use a published pytorch_android",
            )
        return sdk
