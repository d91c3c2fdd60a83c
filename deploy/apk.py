"""What an APK says about itself: package name, launchable activity, minSdk, native ABIs, and whether an activity
declares torchdroid's in-app benchmark contract (``<meta-data android:name="org.torchdroid.benchmark">``).

Read from the APK's own ``AndroidManifest.xml``, in Python: an APK built by aapt/aapt2 (every
Gradle build) stores it as Android's binary XML ("AXML": a ``RES_XML_TYPE`` chunk holding a
string pool, a resource-id map and start/end element nodes, see
frameworks/base/libs/androidfw/include/androidfw/ResourceTypes.h).  No aapt is needed on the
user's machine.  A plain-text manifest (a zip made by hand) is read too.
"""

from __future__ import annotations

import re
import struct
import zipfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from toolchain.errors import UsageError
from toolchain.records import APP_BENCH_META

# chunk types (ResourceTypes.h)
RES_STRING_POOL_TYPE = 0x0001
RES_XML_TYPE = 0x0003
RES_XML_START_ELEMENT_TYPE = 0x0102
RES_XML_END_ELEMENT_TYPE = 0x0103
RES_XML_RESOURCE_MAP_TYPE = 0x0180
UTF8_FLAG = 1 << 8
TYPE_REFERENCE, TYPE_STRING, TYPE_INT_BOOLEAN = 0x01, 0x03, 0x12
NO_INDEX = 0xFFFFFFFF
# android:* attribute resource ids (frameworks/base/core/res/res/values/public.xml); aapt2 may leave
# the attribute's name string empty and keep only the id
ATTR_IDS = {0x01010003: "name", 0x0101020C: "minSdkVersion", 0x01010270: "targetSdkVersion",
            0x0101000E: "enabled", 0x01010202: "targetActivity", 0x01010024: "value"}
MAIN_ACTION = "android.intent.action.MAIN"
LAUNCHER_CATEGORY = "android.intent.category.LAUNCHER"
PACKAGE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$")
CLASS_RE = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)*$")


class ManifestError(ValueError):
    """The manifest bytes are not a readable Android manifest."""


@dataclass
class Element:
    tag: str
    attrs: Dict[str, str]
    children: List["Element"] = field(default_factory=list)


@dataclass(frozen=True)
class ApkFacts:
    path: Path
    package: str
    activity: Optional[str]  # fully qualified launchable activity (MAIN + LAUNCHER), None if there is none
    min_sdk: Optional[int]
    abis: Tuple[str, ...]
    binary_manifest: bool
    bench_activity: Optional[str] = None  # the activity that declares the in-app benchmark contract, if one does
    bench_contract: Optional[str] = None  # the contract version it declares (its meta-data's android:value)

    @property
    def component(self) -> str:
        return f"{self.package}/{self.activity}"


# --------------------------------------------------------------------------- binary XML


def _string_pool(buf: bytes, start: int) -> List[str]:
    _t, header_size, _size, count, _styles, flags, strings_start, _ = struct.unpack_from("<HHIIIIII", buf, start)
    offsets = struct.unpack_from(f"<{count}I", buf, start + header_size)
    base = start + strings_start
    utf8 = bool(flags & UTF8_FLAG)
    return [_pool_string(buf, base + off, utf8) for off in offsets]


def _pool_length(buf: bytes, pos: int, utf8: bool) -> Tuple[int, int]:
    if utf8:
        n = buf[pos]
        return ((n & 0x7F) << 8 | buf[pos + 1], pos + 2) if n & 0x80 else (n, pos + 1)
    (n,) = struct.unpack_from("<H", buf, pos)
    if n & 0x8000:
        (low,) = struct.unpack_from("<H", buf, pos + 2)
        return (n & 0x7FFF) << 16 | low, pos + 4
    return n, pos + 2


def _pool_string(buf: bytes, pos: int, utf8: bool) -> str:
    if utf8:
        _chars, pos = _pool_length(buf, pos, True)  # length in UTF-16 units, then in bytes
        nbytes, pos = _pool_length(buf, pos, True)
        return buf[pos:pos + nbytes].decode("utf-8", "replace")
    nchars, pos = _pool_length(buf, pos, False)
    return buf[pos:pos + 2 * nchars].decode("utf-16-le", "replace")


def _attr_value(strings: List[str], raw: int, dtype: int, data: int) -> str:
    if raw != NO_INDEX and raw < len(strings):
        return strings[raw]
    if dtype == TYPE_STRING and data < len(strings):
        return strings[data]
    if dtype == TYPE_INT_BOOLEAN:
        return "true" if data else "false"
    if dtype == TYPE_REFERENCE:
        return f"@{data:08x}"
    return str(data if data < 0x80000000 else data - (1 << 32))


def _start_element(buf: bytes, pos: int, header_size: int, strings: List[str], ids: List[int]) -> Element:
    ext = pos + header_size
    _ns, name, attr_start, attr_size, attr_count = struct.unpack_from("<IIHHH", buf, ext)
    attrs: Dict[str, str] = {}
    for k in range(attr_count):
        a = ext + attr_start + k * attr_size
        _ans, aname, raw, _vsize, _res0, dtype, data = struct.unpack_from("<IIIHBBI", buf, a)
        key = strings[aname] if aname < len(strings) else ""
        if aname < len(ids) and ids[aname] in ATTR_IDS:
            key = ATTR_IDS[ids[aname]]
        attrs[key] = _attr_value(strings, raw, dtype, data)
    return Element(strings[name], attrs)


def parse_binary_xml(buf: bytes) -> Element:
    """The element tree of an Android binary XML document."""
    try:
        kind, _hs, total = struct.unpack_from("<HHI", buf, 0)
        if kind != RES_XML_TYPE:
            raise ManifestError("not Android binary XML (no RES_XML_TYPE header)")
        strings: List[str] = []
        ids: List[int] = []
        stack: List[Element] = [Element("#document", {})]
        pos = 8
        while pos + 8 <= min(total, len(buf)):
            ctype, header_size, size = struct.unpack_from("<HHI", buf, pos)
            if size < 8:
                raise ManifestError(f"a chunk of {size} bytes at offset {pos}")
            if ctype == RES_STRING_POOL_TYPE:
                strings = _string_pool(buf, pos)
            elif ctype == RES_XML_RESOURCE_MAP_TYPE:
                ids = list(struct.unpack_from(f"<{(size - header_size) // 4}I", buf, pos + header_size))
            elif ctype == RES_XML_START_ELEMENT_TYPE:
                el = _start_element(buf, pos, header_size, strings, ids)
                stack[-1].children.append(el)
                stack.append(el)
            elif ctype == RES_XML_END_ELEMENT_TYPE and len(stack) > 1:
                stack.pop()
            pos += size
    except (struct.error, IndexError) as e:
        raise ManifestError(f"truncated or damaged binary XML: {e}") from e
    if not stack[0].children:
        raise ManifestError("no elements in the binary XML")
    return stack[0].children[0]


def parse_text_xml(text: bytes) -> Element:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ManifestError(f"not XML: {e}") from e

    def convert(node) -> Element:
        attrs = {k.rsplit("}", 1)[-1]: v for k, v in node.attrib.items()}
        return Element(node.tag, attrs, [convert(c) for c in node])

    return convert(root)


# --------------------------------------------------------------------------- manifest facts


def _class_name(package: str, name: str) -> str:
    """PackageParser's rule: ".X" and "X" (no dot) are relative to the package."""
    if name.startswith("."):
        return package + name
    return name if "." in name else f"{package}.{name}"


def _is_launcher(el: Element) -> bool:
    for f in (c for c in el.children if c.tag == "intent-filter"):
        actions = {c.attrs.get("name") for c in f.children if c.tag == "action"}
        categories = {c.attrs.get("name") for c in f.children if c.tag == "category"}
        if MAIN_ACTION in actions and LAUNCHER_CATEGORY in categories:
            return True
    return False


def launchable_activity(root: Element, package: str) -> Optional[str]:
    """The first enabled activity (or alias) with a MAIN/LAUNCHER intent filter."""
    for app in (c for c in root.children if c.tag == "application"):
        for el in app.children:
            if el.tag in ("activity", "activity-alias") and el.attrs.get("enabled", "true") != "false" \
                    and el.attrs.get("name") and _is_launcher(el):
                return _class_name(package, el.attrs["name"])
    return None


def benchmark_activity(root: Element, package: str) -> Tuple[Optional[str], Optional[str]]:
    """``(activity, contract version)`` of the first enabled activity (or alias) whose ``<meta-data>`` names
    torchdroid's benchmark contract (toolchain.records.APP_BENCH_META); ``(None, None)`` when none does."""
    for app in (c for c in root.children if c.tag == "application"):
        for el in app.children:
            if el.tag not in ("activity", "activity-alias") or el.attrs.get("enabled", "true") == "false" \
                    or not el.attrs.get("name"):
                continue
            for meta in (c for c in el.children if c.tag == "meta-data"):
                if meta.attrs.get("name") == APP_BENCH_META:
                    return _class_name(package, el.attrs["name"]), meta.attrs.get("value", "")
    return None, None


def _min_sdk(root: Element) -> Optional[int]:
    for el in (c for c in root.children if c.tag == "uses-sdk"):
        value = el.attrs.get("minSdkVersion", "")
        if value.isdigit():
            return int(value)
    return None


def read_apk(path: Path) -> ApkFacts:
    """Package, launchable activity, minSdk and ABIs of an APK; UsageError when it is not a usable APK."""
    path = Path(path)
    remedy = "pass the .apk that `invoke build-app` (or Gradle's assembleDebug) wrote with --apk"
    try:
        with zipfile.ZipFile(path) as z:
            raw = z.read("AndroidManifest.xml")
            names = z.namelist()
    except (OSError, zipfile.BadZipFile, KeyError) as e:
        raise UsageError(f"{path} is not an APK", cause=f"{type(e).__name__}: {e}", remedy=remedy) from e
    binary = raw[:2] == struct.pack("<H", RES_XML_TYPE)
    try:
        root = parse_binary_xml(raw) if binary else parse_text_xml(raw)
    except ManifestError as e:
        raise UsageError(f"the AndroidManifest.xml in {path} cannot be read", cause=str(e), remedy=remedy) from e
    package = root.attrs.get("package", "")
    if root.tag != "manifest" or not PACKAGE_RE.match(package):
        raise UsageError(f"the AndroidManifest.xml in {path} names no valid package (got {package!r})",
                         remedy=remedy)
    activity = launchable_activity(root, package)
    if activity is not None and not CLASS_RE.match(activity):
        raise UsageError(f"the launchable activity {activity!r} in {path} is not a Java class name", remedy=remedy)
    bench_activity, contract = benchmark_activity(root, package)
    if bench_activity is not None and not CLASS_RE.match(bench_activity):
        raise UsageError(f"the benchmark activity {bench_activity!r} in {path} is not a Java class name",
                         remedy=remedy)
    abis = tuple(sorted({n.split("/")[1] for n in names if n.startswith("lib/") and n.count("/") >= 2}))
    return ApkFacts(path, package, activity, _min_sdk(root), abis, binary, bench_activity, contract)
