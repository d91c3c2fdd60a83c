"""A JDK that suits a given Gradle / Android Gradle Plugin pair.

Facts (docs/facts.md): Gradle's compatibility matrix names the first Gradle release that runs on each
Java version (15: 6.7, 16: 7.0, 17: 7.3, ...), so Gradle 6.8.3 -- what PyTorch's ``android/`` uses for
``--aar`` -- runs on Java 8 to 15 and not on JDK 17.  AGP 7.x needs Java 11 and AGP 8.x Java 17.

JDKs are found without running them: ``JAVA_HOME``, the ``javac`` on PATH, then the usual install
places (``/usr/lib/jvm/*``, ``~/.sdkman/candidates/java/*``, ``~/.jdks/*``; ``TORCHDROID_JDK_DIRS``, a
``:``-separated list, replaces them); the version comes from the
JDK's ``release`` file (``JAVA_VERSION="17.0.15"``, ``"1.8.0_392"`` for Java 8).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

from toolchain.errors import ToolNotFound

# Java version -> the first Gradle release that runs on it (Gradle's compatibility matrix).
GRADLE_FIRST_FOR_JAVA = {8: (2, 0), 9: (4, 3), 10: (4, 7), 11: (5, 0), 12: (5, 4), 13: (6, 0), 14: (6, 3),
                         15: (6, 7), 16: (7, 0), 17: (7, 3), 18: (7, 5), 19: (7, 6), 20: (8, 3), 21: (8, 5),
                         22: (8, 8), 23: (8, 10), 24: (8, 14), 25: (9, 1)}
SEARCH_DIRS = ("/usr/lib/jvm", "~/.sdkman/candidates/java", "~/.jdks", "/opt/java", "/Library/Java/JavaVirtualMachines")
INSTALL_HINT = ("install a JDK {major} (e.g. Eclipse Temurin {major} from https://adoptium.net, "
                "`sdk install java {major}-tem` with SDKMAN, or `apt-get install openjdk-{major}-jdk-headless` "
                "where your distribution has it) and set JAVA_HOME to it")


def _version_tuple(text: str) -> Tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def gradle_java_range(gradle: str) -> Tuple[int, int]:
    """(lowest, highest) Java major that runs Gradle ``gradle`` (e.g. "6.8.3" -> (8, 15))."""
    v = _version_tuple(gradle)[:2]
    runs = [java for java, first in GRADLE_FIRST_FOR_JAVA.items() if first <= v]
    low = 17 if v >= (9, 0) else 8
    return low, max(runs) if runs else 8


def agp_min_java(agp: str) -> int:
    """The lowest Java the Android Gradle Plugin ``agp`` runs on (4.x: 8, 7.x: 11, 8.x+: 17)."""
    major = _version_tuple(agp)[0] if agp else 0
    return 17 if major >= 8 else 11 if major >= 7 else 8


def parse_release(text: str) -> Optional[int]:
    """Java major from a JDK ``release`` file's JAVA_VERSION ("1.8.0_392" -> 8, "17.0.15" -> 17)."""
    m = re.search(r'^JAVA_VERSION="?([0-9._]+)', text, re.M)
    if not m:
        return None
    parts = _version_tuple(m.group(1))
    return parts[1] if parts and parts[0] == 1 and len(parts) > 1 else (parts[0] if parts else None)


@dataclass(frozen=True)
class Jdk:
    home: Path
    major: int
    found_by: str  # "JAVA_HOME", "javac on PATH", "/usr/lib/jvm"...

    @property
    def javac(self) -> Path:
        return self.home / "bin" / "javac"

    @classmethod
    def from_home(cls, home: Path, found_by: str) -> Optional["Jdk"]:
        home = Path(home).expanduser()
        release = home / "release"
        if not (home / "bin" / "javac").is_file() or not release.is_file():
            return None
        major = parse_release(release.read_text(encoding="utf-8", errors="replace"))
        return cls(home.resolve(), major, found_by) if major else None

    @staticmethod
    def _homes(env: Mapping[str, str]) -> List[Tuple[str, Path]]:
        out: List[Tuple[str, Path]] = []
        if env.get("JAVA_HOME"):
            out.append(("JAVA_HOME", Path(env["JAVA_HOME"])))
        javac = shutil.which("javac", path=env.get("PATH"))
        if javac:
            out.append(("javac on PATH", Path(javac).resolve().parent.parent))
        dirs = env["TORCHDROID_JDK_DIRS"].split(os.pathsep) if "TORCHDROID_JDK_DIRS" in env else SEARCH_DIRS
        for base in filter(None, dirs):
            d = Path(base).expanduser()
            if d.is_dir():
                for home in sorted(d.iterdir()):
                    out.append((base, home / "Contents" / "Home" if (home / "Contents" / "Home").is_dir() else home))
        return out

    @classmethod
    def all(cls, env: Optional[Mapping[str, str]] = None) -> List["Jdk"]:
        """Every JDK found, in search order, each home once."""
        env = os.environ if env is None else env
        seen, out = set(), []
        for source, home in cls._homes(env):
            jdk = cls.from_home(home, source)
            if jdk and jdk.home not in seen:
                seen.add(jdk.home)
                out.append(jdk)
        return out

    @classmethod
    def find(cls, low: int = 8, high: int = 99, env: Optional[Mapping[str, str]] = None) -> Optional["Jdk"]:
        """The first JDK (JAVA_HOME first) with ``low <= major <= high``."""
        for jdk in cls.all(env):
            if low <= jdk.major <= high:
                return jdk
        return None

    @classmethod
    def for_gradle(cls, gradle: str, agp: str = "", env: Optional[Mapping[str, str]] = None,
                   why: str = "") -> "Jdk":
        """A JDK that runs Gradle ``gradle`` with AGP ``agp``; ToolNotFound naming the JDKs found otherwise."""
        low, high = gradle_java_range(gradle)
        low = max(low, agp_min_java(agp))
        jdk = cls.find(low, high, env)
        if jdk is not None:
            return jdk
        found = ", ".join(f"{j.major} ({j.home}, {j.found_by})" for j in cls.all(env)) or "none"
        want = 11 if low <= 11 <= high else low
        raise ToolNotFound(
            f"no JDK between {low} and {high} found{f' ({why})' if why else ''}",
            cause=f"Gradle {gradle}" + (f" with Android Gradle Plugin {agp}" if agp else "")
                  + f" runs on Java {low} to {high} only; JDKs found: {found}",
            remedy=INSTALL_HINT.format(major=want) + " (torchdroid looks in JAVA_HOME, PATH and /usr/lib/jvm)",
        )
