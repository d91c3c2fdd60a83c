"""appgen's validation, escaping filters and runtime choice: every value that lands in Java, XML or Gradle."""

import json
import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from appgen import jinja_ext, validate
from appgen.runtime import choose_runtime
from appgen.template import TEMPLATE_DIR
from toolchain import pins
from toolchain.errors import UsageError


@pytest.mark.parametrize("value", ["org.torchdroid.demo", "com.example.app_2", "a.b", "Org.Example.X"])
def test_valid_application_ids(value):
    assert validate.application_id(f"  {value} ") == value


@pytest.mark.parametrize(
    "value,expected",
    [
        ("demo", "needs at least two segments"),
        ("org.class.app", "segment 'class' is a Java keyword"),
        ("org.example.true", "segment 'true' is a Java keyword"),
        ("org.1app", "segment '1app' must start with a letter"),
        ("org.my-app", "segment 'my-app' must start with a letter"),
        ("org..x", "segment '' must start with a letter"),
        ("org._x", "segment '_x' must start with a letter"),
    ],
)
def test_invalid_application_ids_say_why(value, expected):
    with pytest.raises(UsageError) as ei:
        validate.application_id(value)
    msg = str(ei.value)
    assert expected in msg
    assert "--application-id" in msg


def test_app_name_rules():
    assert validate.app_name(" Tom's <app> & \"co\" ") == "Tom's <app> & \"co\""
    with pytest.raises(UsageError, match="is empty"):
        validate.app_name("  ")
    with pytest.raises(UsageError, match="characters it cannot have: '\\{', '\\}'") as ei:
        validate.app_name("{{ cookiecutter.x }}")
    assert "template code" in str(ei.value)
    with pytest.raises(UsageError, match="characters it cannot have"):
        validate.app_name("a\nb")
    with pytest.raises(UsageError, match="at most 64"):
        validate.app_name("x" * 65)
    assert validate.gradle_project_name("Tom's <app>: v2") == "Tom-s-app-v2"
    assert validate.gradle_project_name("???") == "torchdroid-app"


def test_abi_filters_sdk_levels_variant_and_version():
    assert validate.abi_filters(["arm64-v8a", " x86_64", "arm64-v8a", ""]) == ("arm64-v8a", "x86_64")
    with pytest.raises(UsageError, match="unknown ABI 'arm64'") as ei:
        validate.abi_filters(["arm64"])
    assert "armeabi-v7a" in str(ei.value)
    with pytest.raises(UsageError, match="--abi-filters is empty"):
        validate.abi_filters([])
    assert validate.sdk_levels("21", 34, 34) == (21, 34)
    with pytest.raises(UsageError, match="CameraX") as ei:
        validate.sdk_levels(19, 34, 34)
    assert "--min-sdk 21" in str(ei.value)
    with pytest.raises(UsageError, match="--target-sdk 23 is below --min-sdk 24"):
        validate.sdk_levels(24, 23, 34)
    with pytest.raises(UsageError, match="above the lane's compileSdk 34"):
        validate.sdk_levels(21, 35, 34)
    with pytest.raises(UsageError, match="must be integers"):
        validate.sdk_levels("twenty", 34, 34)
    with pytest.raises(UsageError, match="not a Maven version"):
        pins.maven_version("1.13.1; rm -rf /")


def _android_unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append({"n": "\n"}.get(text[i + 1], text[i + 1]))
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


@pytest.mark.parametrize("name", ["Tom's <app> & \"co\"", "@string/evil", "?attr", "back\\slash", "naïve ☕"])
def test_android_string_round_trips_through_xml(name):
    xml = f'<resources><string name="app_name">{jinja_ext.android_string(name)}</string></resources>'
    text = ET.fromstring(xml).find("string").text
    assert _android_unescape(text) == name
    assert not text.startswith(("@", "?"))
    assert "'" not in text.replace("\\'", "")  # every apostrophe escaped (aapt rejects bare ones)


def test_java_and_gradle_filters():
    s = 'a "quote" \\ back\nnew'
    lit = jinja_ext.java_string(s)
    assert "\n" not in lit and json.loads(lit) == s
    assert jinja_ext.gradle_string("it's") == "'it\\'s'"
    assert jinja_ext.gradle_string_list("arm64-v8a, x86_64") == "'arm64-v8a', 'x86_64'"
    assert jinja_ext.java_float_array("0.485,0.456,0.406") == "{0.485f, 0.456f, 0.406f}"
    assert jinja_ext.java_int("224") == "224"
    with pytest.raises(ValueError):
        jinja_ext.java_float_array("nan,1")


def _fake_aar(path, entries=("AndroidManifest.xml", "classes.jar")):
    with zipfile.ZipFile(path, "w") as z:
        for e in entries:
            z.writestr(e, b"x")
    return path


def test_runtime_choice(tmp_path):
    rt = choose_runtime("current", None, None)
    assert rt.source == "maven" and rt.pytorch_android == pins.PYTORCH_ANDROID_DEFAULT
    assert rt.matches_converter is False
    assert "models of lane current's converter torch==2.8.0 may fail" in rt.warnings[0] and "--aar" in rt.warnings[0]

    with pytest.raises(UsageError, match="needs --aar") as ei:  # 1.8.0-SNAPSHOT: OSSRH snapshots shut down
        choose_runtime("seed-2020", None, None)
    assert "2025-06-30" in str(ei.value) and "system Gradle" in str(ei.value) and "--lane current" in str(ei.value)
    with pytest.raises(UsageError, match="cannot be downloaded"):
        choose_runtime("current", "1.9.0-SNAPSHOT", None)
    seed = choose_runtime("seed-2020", None, _fake_aar(tmp_path / "pytorch_android-seed.aar"))
    assert seed.source == "aar" and seed.lane == "seed-2020"

    explicit = choose_runtime("seed-2020", "1.13.1", None)
    assert explicit.matches_converter is False and "is not lane seed-2020's runtime" in explicit.warnings[0]

    aar = choose_runtime("current", None, _fake_aar(tmp_path / "pytorch_android-release.aar"))
    assert aar.source == "aar" and aar.aar_name == "pytorch_android-release.aar"
    assert aar.to_dict()["aar"]["file"] == "app/libs/pytorch_android-release.aar"

    with pytest.raises(UsageError, match="does not exist"):
        choose_runtime("current", None, tmp_path / "missing.aar")
    with pytest.raises(UsageError, match="no classes.jar"):
        choose_runtime("current", None, _fake_aar(tmp_path / "bad.aar", ("AndroidManifest.xml",)))
    (tmp_path / "notzip.aar").write_text("hello")
    with pytest.raises(UsageError, match="not a zip archive"):
        choose_runtime("current", None, tmp_path / "notzip.aar")
    evil = _fake_aar(tmp_path / 'x"${rm}.aar')
    with pytest.raises(UsageError, match="cannot go into build.gradle") as ei:
        choose_runtime("current", None, evil)
    assert "letters, digits and . _ + -" in str(ei.value) and "/tmp/pytorch_android.aar" in str(ei.value)
    with pytest.raises(UsageError, match="both given"):
        choose_runtime("current", "1.13.1", tmp_path / "pytorch_android-release.aar")
    with pytest.raises(UsageError, match="unknown lane"):
        choose_runtime("nope", None, None)


def test_template_jinja_only_fills_values():
    """Every {{ }} is one cookiecutter value (with at most one of our filters); every {% %} only switches
    on a yes/no or source value computed in Python: no loops, no expressions, no logic in the template."""
    value = re.compile(r"^\{\{ cookiecutter\.[a-z_]+(?: \| ([a-z_]+))? \}\}$")
    statement = re.compile(r'^\{%-? (?:if cookiecutter\.[a-z_]+ (?:==|!=) "[a-z]+"|else|endif) %\}$')
    seen = 0
    for path in sorted(Path(TEMPLATE_DIR).rglob("*")):
        if not path.is_file() or path.name in ("cookiecutter.json", "gradlew", "gradlew.bat"):
            continue
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"\{\{.*?\}\}", text):
            hit = value.match(m.group(0))
            assert hit, f"{path.name}: {m.group(0)}"
            assert hit.group(1) is None or hit.group(1) in jinja_ext.FILTERS
            seen += 1
        for m in re.finditer(r"\{%.*?%\}", text):
            assert statement.match(m.group(0)), f"{path.name}: {m.group(0)}"
        assert "{#" not in text
    assert seen > 30
