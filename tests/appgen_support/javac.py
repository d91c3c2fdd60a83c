"""Compile a generated app's Java with the JDK's javac against tests/java_stubs.

aapt would generate ``R.java`` from the resources; here :func:`write_r_java` does the same for the
layout, id and string names the resources declare, so a Java reference to a resource that does not exist
fails to compile just as it would in Gradle.
"""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import List

from toolchain.runner import run

STUBS = Path(__file__).resolve().parent.parent / "java_stubs"
ANDROID_NS = "{http://schemas.android.com/apk/res/android}"


def javac() -> str:
    exe = shutil.which("javac")
    if not exe:
        raise RuntimeError("javac is not installed (apt-get install openjdk-17-jdk-headless)")
    return exe


def write_r_java(project: Path, package: str, dest: Path) -> Path:
    res = project / "app/src/main/res"
    layouts = sorted(p.stem for p in (res / "layout").glob("*.xml"))
    ids: List[str] = []
    for p in (res / "layout").glob("*.xml"):
        for el in ET.parse(p).iter():
            value = el.get(f"{ANDROID_NS}id")
            if value and value.startswith("@+id/") and value[5:] not in ids:
                ids.append(value[5:])
    strings = [el.get("name") for el in ET.parse(res / "values/strings.xml").getroot().iter("string")]
    n = [0x7F000000]

    def block(kind: str, names: List[str]) -> str:
        lines = []
        for name in names:
            n[0] += 1
            lines.append(f"        public static final int {name} = 0x{n[0]:08x};")
        return f"    public static final class {kind} {{\n" + "\n".join(lines) + "\n    }\n"

    body = f"package {package};\n\npublic final class R {{\n" + block("layout", layouts) + block("id", ids) \
        + block("string", strings) + "}\n"
    out = dest / "R.java"
    out.write_text(body)
    return out


def compile_app(project: Path, package: str, work: Path) -> List[Path]:
    """javac every generated source (plus R.java) against the stubs; returns the .class files."""
    sources = sorted((project / "app/src/main/java").rglob("*.java"))
    gen = work / "gen"
    gen.mkdir(parents=True, exist_ok=True)
    sources.append(write_r_java(project, package, gen))
    classes = work / "classes"
    stub_classes = work / "stub-classes"
    stub_sources = sorted(STUBS.rglob("*.java"))
    run([javac(), "-d", stub_classes, "-nowarn", *stub_sources], what="javac (stubs)")
    run([javac(), "-Xlint:all", "-Werror", "-Xlint:-options", "-source", "8", "-target", "8",
         "-d", classes, "-cp", stub_classes, *sources], what="javac (generated app)")
    return sorted(classes.rglob("*.class"))


def package_of(java_file: Path) -> str:
    m = re.search(r"^package\s+([\w.]+);", java_file.read_text(), re.MULTILINE)
    return m.group(1) if m else ""
