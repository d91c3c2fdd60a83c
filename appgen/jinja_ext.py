"""The template's filters: every value is escaped for the language it lands in.

The template itself only fills values (``{{ cookiecutter.app_name | android_string }}``);
the escaping rules live here, where they are tested.
"""

from __future__ import annotations

import json
import math
from xml.sax.saxutils import escape as _xml_escape

from jinja2.ext import Extension


def xml_text(value) -> str:
    """Escape for XML character data and attribute values."""
    return _xml_escape(str(value), {'"': "&quot;", "'": "&apos;"})


def android_string(value) -> str:
    """A ``<string>`` resource: Android's own escapes (\\ ' " newline, leading @ ?) then XML's."""
    s = str(value).replace("\\", "\\\\").replace("'", "\\'").replace('"', '\\"').replace("\n", "\\n")
    if s.startswith(("@", "?")):
        s = "\\" + s
    return _xml_escape(s)


def java_string(value) -> str:
    """A Java string literal (JSON escapes are a subset of Java's; no raw CR/LF can appear)."""
    return json.dumps(str(value), ensure_ascii=True)


def gradle_string(value) -> str:
    """A single-quoted Groovy string (no interpolation)."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _items(csv) -> list:
    if isinstance(csv, (list, tuple)):
        return [str(x) for x in csv]
    return [p.strip() for p in str(csv).split(",") if p.strip()]


def gradle_string_list(csv) -> str:
    return ", ".join(gradle_string(x) for x in _items(csv))


def java_int(value) -> str:
    return str(int(str(value)))


def java_float_array(csv) -> str:
    values = [float(x) for x in _items(csv)]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"non-finite value in {csv!r}")
    return "{" + ", ".join(f"{v!r}f" for v in values) + "}"


FILTERS = {
    "xml_text": xml_text,
    "android_string": android_string,
    "java_string": java_string,
    "gradle_string": gradle_string,
    "gradle_string_list": gradle_string_list,
    "java_int": java_int,
    "java_float_array": java_float_array,
}


class AppgenExtension(Extension):
    """Registered in cookiecutter.json ``_extensions``."""

    def __init__(self, environment):
        super().__init__(environment)
        environment.filters.update(FILTERS)
