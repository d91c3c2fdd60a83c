"""Validation of every value that ends up in Java, XML, Gradle files or paths."""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable, List, Tuple

from toolchain import pins
from toolchain.errors import UsageError

# Reserved words and literals a Java package segment may not be (JLS 3.9, 3.10.3, 3.10.7).
JAVA_KEYWORDS = frozenset(
    ["abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class", "const", "continue", "default", "do", "double", "else", "enum", "extends", "final", "finally", "float", "for", "goto", "if", "implements", "import", "instanceof", "int", "interface", "long", "native", "new", "package", "private", "protected", "public", "return", "short", "static", "strictfp", "super", "switch", "synchronized", "this", "throw", "throws", "transient", "try", "void", "volatile", "while", "true", "false", "null", "_"]
)
_SEGMENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
MAX_APP_NAME = 64
CAMERAX_MIN_SDK = 21  # CameraX 1.3 supports Android 5.0 (API 21) and up


def application_id(value: str) -> str:
    """A valid Android application id, which must also be a valid Java package (MainActivity lives in it)."""
    value = (value or "").strip()
    remedy = "pass --application-id like org.example.myapp (two or more dot-separated segments, each a letter " \
             "followed by letters, digits or _, no Java keywords)"
    segments = value.split(".")
    if len(segments) < 2:
        raise UsageError(f"application id {value!r} needs at least two segments", remedy=remedy)
    for seg in segments:
        if not _SEGMENT.match(seg):
            raise UsageError(
                f"application id {value!r} is not a valid Java package",
                cause=f"segment {seg!r} must start with a letter and contain only letters, digits and _",
                remedy=remedy,
            )
        if seg in JAVA_KEYWORDS:
            raise UsageError(
                f"application id {value!r} is not a valid Java package",
                cause=f"segment {seg!r} is a Java keyword",
                remedy=remedy,
            )
    return value


def meta_data_name(value: str) -> str:
    """A ``<meta-data android:name>`` the app declares (torchdroid's contract marker): dotted like a package name,
    as Android's own keys are, so it cannot clash with another library's key or break the manifest."""
    segments = (value or "").split(".")
    if len(segments) < 2 or not all(_SEGMENT.match(seg) for seg in segments):
        raise UsageError(f"the meta-data name {value!r} is not a dotted name like org.example.key",
                         cause="the app's manifest marks torchdroid's benchmark contract with it "
                               "(toolchain.records.APP_BENCH_META)",
                         remedy="set APP_BENCH_META to two or more dot-separated segments of letters, digits and _")
    return value


def app_name(value: str) -> str:
    """The user-visible name: any text that fits on a launcher (it is escaped for XML and Gradle later)."""
    value = (value or "").strip()
    if not value:
        raise UsageError("the app name is empty", remedy="pass --app-name 'My app'")
    if len(value) > MAX_APP_NAME:
        raise UsageError(f"the app name is {len(value)} characters long (at most {MAX_APP_NAME})",
                         remedy="pass a shorter --app-name")
    bad = sorted({c for c in value if _unfit_for_a_label(c)})
    if bad:
        raise UsageError(
            f"the app name {value!r} contains characters it cannot have: {', '.join(repr(c) for c in bad)}",
            cause="control characters do not fit on a launcher, XML (so Android's resource compiler) cannot hold "
                  "surrogates or U+FFFE/U+FFFF, and braces would be read as template code",
            remedy="pass an --app-name without them",
        )
    return value


def _unfit_for_a_label(c: str) -> bool:
    """Control characters, braces, and what XML 1.0's Char production excludes (aapt rejects those)."""
    code = ord(c)
    return (code < 0x20 or 0x7F <= code <= 0x9F or c in "{}" or 0xD800 <= code <= 0xDFFF
            or code in (0xFFFE, 0xFFFF) or unicodedata.category(c) == "Cs")


def gradle_project_name(name: str) -> str:
    """rootProject.name: Gradle refuses / \\ : < > \" ? * | in project names."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    return slug or "torchdroid-app"


def abi_filters(values: Iterable[str]) -> Tuple[str, ...]:
    out: List[str] = []
    for v in values:
        v = v.strip()
        if not v:
            continue
        if v not in pins.ABIS:
            raise UsageError(f"unknown ABI {v!r} in --abi-filters", remedy=f"use some of: {', '.join(pins.ABIS)}")
        if v not in out:
            out.append(v)
    if not out:
        raise UsageError("--abi-filters is empty", remedy=f"pass one or more of: {', '.join(pins.ABIS)}")
    return tuple(out)


def sdk_levels(min_sdk, target_sdk, compile_sdk: int) -> Tuple[int, int]:
    try:
        lo, hi = int(min_sdk), int(target_sdk)
    except (TypeError, ValueError):
        raise UsageError(f"SDK levels must be integers (got --min-sdk {min_sdk!r}, --target-sdk {target_sdk!r})",
                         remedy="pass e.g. --min-sdk 21 --target-sdk 34") from None
    if lo < CAMERAX_MIN_SDK:
        raise UsageError(f"--min-sdk {lo} is below {CAMERAX_MIN_SDK}",
                         cause="CameraX (the app's camera input) supports API 21 and up",
                         remedy=f"pass --min-sdk {CAMERAX_MIN_SDK} or higher")
    if hi < lo:
        raise UsageError(f"--target-sdk {hi} is below --min-sdk {lo}", remedy="pass a target SDK >= the minimum SDK")
    if hi > compile_sdk:
        raise UsageError(f"--target-sdk {hi} is above the lane's compileSdk {compile_sdk}",
                         cause="an app cannot target an API level newer than the one it compiles against",
                         remedy=f"pass --target-sdk {compile_sdk} or lower (or pick another --lane)")
    return lo, hi
