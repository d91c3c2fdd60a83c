"""Link a generated app's manifest and resources with Android's real resource compiler (Debian's aapt).

AGP 8 takes the package from ``namespace`` in build.gradle and writes it into the merged manifest as
``package``; the source manifest has none.  :func:`link` does the same in a temporary copy, then runs
``aapt package`` against Android 10's framework resources (Debian's android-framework-res), so what
Android's resource compiler rejects (a string with several non-positional ``%s``/``%d``, a character
XML cannot hold, an unknown attribute or a missing ``@string``) fails here, not in Android Studio.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest

FRAMEWORK_RES = Path("/usr/share/android-framework-res/framework-res.apk")
NEEDS_AAPT = pytest.mark.skipif(
    shutil.which("aapt") is None or not FRAMEWORK_RES.is_file(),
    reason="needs Debian's aapt and android-framework-res (./run test installs them: "
           "apt-get install aapt android-framework-res)",
)


def merged_manifest(project: Path, work: Path) -> Path:
    """The app manifest as AGP 8 merges it: ``package`` from build.gradle's namespace when the source has none."""
    src = (project / "app/src/main/AndroidManifest.xml").read_text(encoding="utf-8")
    gradle = (project / "app/build.gradle").read_text(encoding="utf-8")
    m = re.search(r'^\s*namespace\s+"([^"]+)"', gradle, re.MULTILINE)
    if "package=" not in src:
        assert m, "neither a package attribute in the manifest nor a namespace in app/build.gradle"
        src = src.replace("<manifest ", f'<manifest package="{m.group(1)}" ', 1)
    out = work / "AndroidManifest.xml"
    out.write_text(src, encoding="utf-8")
    return out


def link(project: Path, work: Path, res: Optional[Path] = None) -> subprocess.CompletedProcess:
    """``aapt package``: compile and link the resources and the manifest into a resources APK (and R.java)."""
    (work / "gen").mkdir(parents=True, exist_ok=True)
    manifest = merged_manifest(project, work)
    res = res or project / "app/src/main/res"
    return subprocess.run(
        ["aapt", "package", "-f", "-m", "-M", str(manifest), "-S", str(res), "-I", str(FRAMEWORK_RES),
         "-J", str(work / "gen"), "-F", str(work / "resources.ap_")],
        capture_output=True, text=True, timeout=120, check=False)
