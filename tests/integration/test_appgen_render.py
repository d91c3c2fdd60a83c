"""make-app renders every variant into a complete Gradle project, and the generated Java compiles with javac."""

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from appgen import AppSettings, make_app
from appgen.template import TEMPLATE_DIR, AppTemplate
from tests.appgen_support.javac import compile_app
from tests.appgen_support.models import scratch, tiny_models
from toolchain import pins, records
from toolchain.errors import RecordError, ToolFailed, UsageError
from toolchain.stats import percentile

ANDROID = "{http://schemas.android.com/apk/res/android}"
APP_NAME = "Tom's <tiny> & \"co\""
APP_ID = "com.example.tiny_app"


@pytest.fixture(scope="module")
def models() -> Path:
    return tiny_models()


def _make(models, variant, **kw):
    out = scratch(f"app-{variant}") / "project"
    settings = {"model": variant, "models": models, "out": out, "app_name": APP_NAME, "application_id": APP_ID,
                "abi_filters": ("arm64-v8a", "x86_64"), "min_sdk": 23, "target_sdk": 33,
                "build_dir": out.parent / "build"}
    settings.update(kw)
    return make_app(AppSettings(**settings))


@pytest.fixture(scope="module")
def rendered(models):
    return {v: _make(models, f"quant_{v}") for v in ("none", "core", "full")}


@pytest.mark.parametrize("mode", ["none", "core", "full"])
def test_every_variant_is_a_complete_project(rendered, models, mode):
    res = rendered[mode]
    root = res.out
    # every XML file parses; the app name survives escaping
    xml_files = sorted(root.rglob("*.xml"))
    assert len(xml_files) == 3
    for f in xml_files:
        ET.parse(f)
    strings = ET.parse(root / "app/src/main/res/values/strings.xml").getroot()
    app_name = strings.find("string[@name='app_name']").text
    assert re.sub(r"\\(.)", r"\1", app_name) == APP_NAME
    manifest = ET.parse(root / "app/src/main/AndroidManifest.xml").getroot()
    activity = manifest.find("application/activity")
    assert activity.get(f"{ANDROID}name") == ".MainActivity"
    assert {p.get(f"{ANDROID}name") for p in manifest.findall("uses-permission")} == {"android.permission.CAMERA"}
    assert manifest.get("package") is None  # AGP 8: the namespace is in build.gradle

    gradle = (root / "app/build.gradle").read_text()
    assert f'implementation "org.pytorch:pytorch_android:{pins.PYTORCH_ANDROID_DEFAULT}"' in gradle
    assert f'implementation "androidx.camera:camera-lifecycle:{pins.CAMERAX_VERSION}"' in gradle
    assert "abiFilters 'arm64-v8a', 'x86_64'" in gradle
    assert re.search(r"^\s+minSdkVersion 23$", gradle, re.MULTILINE) and re.search(r"^\s+targetSdkVersion 33$", gradle, re.MULTILINE)
    assert f'applicationId "{APP_ID}"' in gradle and f'namespace "{APP_ID}"' in gradle
    assert "compileSdkVersion 34" in gradle
    lane = pins.LANES[pins.DEFAULT_LANE]
    assert f"com.android.tools.build:gradle:{lane.android_gradle_plugin}" in (root / "build.gradle").read_text()
    props = (root / "gradle/wrapper/gradle-wrapper.properties").read_text()
    assert f"distributionUrl=https\\://services.gradle.org/distributions/gradle-{lane.gradle}-bin.zip" in props
    assert "rootProject.name = 'Tom-s-tiny-co'" in (root / "settings.gradle").read_text()
    for script in ("gradlew", "gradlew.bat"):
        assert os.access(root / script, os.X_OK), script
    assert (root / "gradlew.bat").read_bytes().count(b"\r\n") > 5

    # assets: both models, labels, sample; the lookup table only for full
    man = records.ConvertManifest.load(models)
    files = man.find(f"quant_{mode}")
    asset_dir = root / "app/src/main/assets"
    labels = (asset_dir / "labels.txt").read_text().splitlines()
    assert len(labels) == 1000 and labels[0] == "tench"
    assert (asset_dir / "sample.jpg").read_bytes()[:3] == b"\xff\xd8\xff"
    suffix = "-uint8" if mode == "full" else ""
    cpu_asset = asset_dir / f"tiny_net-quant_{mode}-cpu{suffix}.pt"
    nnapi_asset = asset_dir / f"tiny_net-quant_{mode}-nnapi{suffix}.pt"
    assert zipfile.is_zipfile(cpu_asset) and zipfile.is_zipfile(nnapi_asset)
    assert (asset_dir / "input_lut.bin").exists() == (mode == "full")
    if mode == "full":
        assert (asset_dir / "input_lut.bin").stat().st_size == 768
    else:  # float variants ship the converted files unchanged
        assert cpu_asset.read_bytes() == files["cpu"].path.read_bytes()

    config = (root / "app/src/main/java/com/example/tiny_app/AppConfig.java").read_text()
    assert f'INPUT_MODE = "{"uint8_lut" if mode == "full" else "float32"}";' in config
    assert f'MODEL_NNAPI_ASSET = "{nnapi_asset.name}";' in config
    assert 'BENCH_PREFIX = "TORCHDROID_BENCH ";' in config

    # app-info: what deploy reads
    info = records.read_record(root / records.APP_INFO_NAME, records.APP_INFO_KIND, records.APP_INFO_SCHEMA, "")
    assert info["application_id"] == APP_ID and info["activity"] == ".MainActivity"
    assert info["variant"] == f"quant_{mode}"
    assert info["models"] == {cpu_asset.name: files["cpu"].sha256, nnapi_asset.name: files["nnapi"].sha256}
    assert info["runtime"]["matches_converter"] is False and info["runtime"]["warnings"]
    assert info["pins"]["gradle"] == lane.gradle and info["apk"] is None
    assert res.warnings and "may fail to load on the phone" in res.warnings[0]


@pytest.mark.parametrize("mode", ["none", "core", "full"])
def test_generated_java_compiles_against_the_stubs(rendered, mode, tmp_path):
    classes = compile_app(rendered[mode].out, APP_ID, tmp_path)
    names = {p.name for p in classes}
    assert {"MainActivity.class", "Classifier.class", "ModelRunner.class", "AssetCache.class", "TopK.class", "BenchStats.class", "AppConfig.class"} <= names


def test_benchmark_line_is_the_deploy_contract(rendered, tmp_path):
    """Run the generated BenchStats on the JVM and parse its logcat line the way deploy will."""
    root = rendered["core"].out
    pkg_dir = tmp_path / "src" / "com" / "example" / "tiny_app"
    pkg_dir.mkdir(parents=True)
    java_dir = root / "app/src/main/java/com/example/tiny_app"
    for name in ("BenchStats.java", "AppConfig.java"):
        shutil.copy(java_dir / name, pkg_dir / name)
    (pkg_dir / "Probe.java").write_text(
        "package com.example.tiny_app;\n"
        "public class Probe { public static void main(String[] a) {\n"
        "  long[] t = {5000000L, 1000000L, 3000000L, 2000000L, 4000000L, 10000000L, 6000000L, 7000000L, 8000000L, 9000000L};\n"
        "  System.out.println(BenchStats.line(AppConfig.VARIANT, \"cpu\", \"nnapi\", true, \"API 28 < 29 \\\"old\\\"\\n\", 10, 2,"
        " BenchStats.summarize(t), null));\n"
        "  System.out.println(BenchStats.line(AppConfig.VARIANT, \"nnapi\", \"nnapi\", false, null, 5, 1, null, \"boom\"));\n"
        "}}\n")
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", classes, *sorted(pkg_dir.glob("*.java"))], check=True)
    out = subprocess.run(["java", "-cp", classes, "com.example.tiny_app.Probe"], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    assert all(line.startswith(records.APP_BENCH_PREFIX) for line in out)
    ok = json.loads(out[0][len(records.APP_BENCH_PREFIX):])
    assert ok["variant"] == "quant_core" and ok["backend"] == "cpu" and ok["fell_back"] is True
    assert ok["fallback_reason"] == 'API 28 < 29 "old"\n'
    assert (ok["median_ms"], ok["p90_ms"], ok["min_ms"], ok["mean_ms"]) == (5.5, 9.0, 1.0, 5.5)
    assert ok["p90_ms"] == percentile([5, 1, 3, 2, 4, 10, 6, 7, 8, 9], 90)  # the phone's p90 is the host's
    assert ok["iters"] == 10 and ok["warmup"] == 2 and ok["error"] is None
    failed = json.loads(out[1][len(records.APP_BENCH_PREFIX):])
    assert failed["median_ms"] is None and failed["error"] == "boom"
    contract = {"variant", "backend", "fell_back", "iters", "warmup", "median_ms", "p90_ms", "min_ms", "mean_ms", "error"}
    assert contract <= set(ok)


def _shared_library(path: Path, page_size: int) -> bytes:
    """A real x86_64 shared library linked for ``page_size`` pages (its LOAD alignment)."""
    src = path.with_suffix(".c")
    src.write_text("int torchdroid_probe(void) { return 42; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-z,max-page-size={page_size}", "-o", path, src], check=True)
    return path.read_bytes()


def _aar(path: Path, libs=None) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("AndroidManifest.xml", "<manifest/>")
        z.writestr("classes.jar", b"PK")
        for name, data in (libs or {}).items():
            z.writestr(name, data)
    return path


def test_local_aar_and_old_lane(models, tmp_path):
    aligned = _shared_library(tmp_path / "lib16k.so", 16384)
    aar = _aar(tmp_path / "pytorch_android-release.aar", {"jni/x86_64/libpytorch_jni.so": aligned})
    res = _make(models, "quant_none", aar=aar)
    gradle = (res.out / "app/build.gradle").read_text()
    assert 'implementation files("libs/pytorch_android-release.aar")' in gradle
    assert f'implementation "com.facebook.fbjni:fbjni-java-only:{pins.FBJNI_VERSION}"' in gradle
    assert "org.pytorch:pytorch_android:" not in gradle
    assert (res.out / "app/libs/pytorch_android-release.aar").read_bytes() == aar.read_bytes()
    info = json.loads((res.out / records.APP_INFO_NAME).read_text())
    assert info["runtime"]["source"] == "aar" and info["runtime"]["aar"]["file"] == "app/libs/pytorch_android-release.aar"
    assert not any("4 KB aligned" in w for w in res.warnings)

    # seed-2020: its 1.8.0-SNAPSHOT came from the OSSRH snapshot repository (shut down): an AAR is required
    with pytest.raises(UsageError, match="needs --aar"):
        _make(models, "quant_none", lane="seed-2020", target_sdk=None)
    seed = pins.LANES["seed-2020"]
    old = _make(models, "quant_none", lane="seed-2020", target_sdk=None, aar=aar)
    manifest = ET.parse(old.out / "app/src/main/AndroidManifest.xml").getroot()
    assert manifest.get("package") == APP_ID  # AGP 4.1 has no namespace DSL
    gradle = (old.out / "app/build.gradle").read_text()
    assert f"targetSdkVersion {seed.compile_sdk}" in gradle and f"compileSdkVersion {seed.compile_sdk}" in gradle
    assert "namespace" not in gradle and 'implementation files("libs/pytorch_android-release.aar")' in gradle
    assert "oss.sonatype.org" not in (old.out / "build.gradle").read_text()
    assert f"gradle-{seed.gradle}-bin.zip" in (old.out / "gradle/wrapper/gradle-wrapper.properties").read_text()
    assert any("CameraX" in w and "will not build" in w for w in old.warnings)


def test_runtime_libraries_for_4k_pages_are_warned_about(models, tmp_path):
    """Android 15+ devices may have 16 KB pages: a runtime linked for 4 KB pages does not load there."""
    unaligned = _shared_library(tmp_path / "lib4k.so", 4096)
    aar = _aar(tmp_path / "pytorch_android-4k.aar", {"jni/x86_64/libpytorch_jni.so": unaligned,
                                                     "jni/armeabi-v7a/libpytorch_jni.so": unaligned})
    res = _make(models, "quant_none", aar=aar)
    warned = [w for w in res.warnings if "4 KB aligned" in w]
    assert len(warned) == 1 and "jni/x86_64/libpytorch_jni.so (4096 B)" in warned[0]
    assert "armeabi-v7a" not in warned[0]  # not packaged (abi filters arm64-v8a, x86_64) and 32-bit anyway
    maven = _make(models, "quant_none")
    assert any("4 KB aligned" in w and "pytorch/pytorch#154449" in w for w in maven.warnings)


def test_out_dir_must_be_new_or_empty_unless_force(models):
    first = _make(models, "quant_none")
    (first.out / "mine.txt").write_text("user file")
    with pytest.raises(UsageError) as ei:
        make_app(AppSettings(model="quant_core", models=models, out=first.out, build_dir=first.out.parent / "b"))
    assert "holds an app torchdroid made from other inputs" in str(ei.value) and "--force" in str(ei.value)
    assert (first.out / "mine.txt").exists()
    again = make_app(AppSettings(model="quant_core", models=models, out=first.out, force=True,
                                 build_dir=first.out.parent / "b"))
    assert (again.out / "mine.txt").read_text() == "user file"  # issue 34: --force keeps what torchdroid did not write
    assert json.loads((again.out / records.APP_INFO_NAME).read_text())["variant"] == "quant_core"
    assert not list(first.out.parent.glob("*.partial"))  # no temporary directories left behind


def test_an_unchanged_request_is_up_to_date_and_writes_nothing(models):
    first = _make(models, "quant_core")
    before = {p: p.stat().st_mtime_ns for p in first.out.rglob("*") if p.is_file()}
    again = _make(models, "quant_core", out=first.out)
    assert again.up_to_date and "made from these models with these settings" in again.notes[0]
    assert {p: p.stat().st_mtime_ns for p in first.out.rglob("*") if p.is_file()} == before
    with pytest.raises(UsageError, match="made from other inputs: it was made with other min_sdk"):
        _make(models, "quant_core", out=first.out, min_sdk=24)
    (first.out / "app/src/main/assets/labels.txt").write_text("tampered\n")
    with pytest.raises(UsageError, match="its asset labels.txt is missing or was changed"):
        _make(models, "quant_core", out=first.out)


def test_force_never_deletes_the_models_it_reads(models, tmp_path):
    """--out equal to --models (or holding them) is refused even with --force; the models stay."""
    own = tmp_path / "models"
    shutil.copytree(models, own)
    before = {p.name: p.read_bytes() for p in own.iterdir() if p.is_file()}
    for out in (own, tmp_path):
        with pytest.raises(UsageError, match="input of this command") as ei:
            make_app(AppSettings(model="quant_none", models=own, out=out, force=True, build_dir=tmp_path / "b"))
        assert "--force never deletes inputs" in str(ei.value)
    assert {p.name: p.read_bytes() for p in own.iterdir() if p.is_file()} == before


def test_a_directory_of_someone_else_is_refused_without_force(models, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="holds files torchdroid did not write: notes.txt"):
        make_app(AppSettings(model="quant_none", models=models, out=out, build_dir=tmp_path / "b"))
    assert (out / "notes.txt").read_text() == "mine" and len(list(out.iterdir())) == 1


def test_bad_values_fail_before_anything_is_written(models, tmp_path):
    out = tmp_path / "never"
    with pytest.raises(UsageError, match="Java keyword"):
        make_app(AppSettings(model="quant_full", models=models, out=out, application_id="org.native.app"))
    with pytest.raises(RecordError, match="other-quant_full is not converted in") as ei:
        make_app(AppSettings(model="other-quant_full", models=models, out=out, build_dir=tmp_path / "b"))
    assert "invoke convert" in ei.value.remedy and "--quant full" in ei.value.remedy
    assert not out.exists()


def test_template_errors_become_clear_messages(tmp_path):
    broken = tmp_path / "template"
    shutil.copytree(TEMPLATE_DIR, broken)
    gradle = next(broken.glob("*/app/build.gradle"))
    original = gradle.read_text()
    gradle.write_text(original + "\n// {{ cookiecutter.no_such_value }}\n")
    context = {"application_id": "org.example.x", "package_dir": "org/example/x"}
    with pytest.raises(ToolFailed) as ei:
        AppTemplate.locate(broken).render(context, tmp_path / "out1", tmp_path / "work")
    assert "undefined value" in str(ei.value) and "no_such_value" in str(ei.value)
    gradle.write_text(original + "\n{% if %}\n")
    with pytest.raises(ToolFailed) as ei:
        AppTemplate.locate(broken).render(context, tmp_path / "out2", tmp_path / "work")
    assert "syntax error at" in str(ei.value) and "build.gradle" in str(ei.value)
    with pytest.raises(UsageError, match="no variables typo_key"):
        AppTemplate.locate(broken).render({"typo_key": "1"}, tmp_path / "out3", tmp_path / "work")


def test_each_step_alone(models, tmp_path):
    """plan writes nothing; up_to_date and guard_out decide from the plan; execute writes what was planned."""
    from appgen.make import execute, guard_out, plan, up_to_date

    out = tmp_path / "app"
    p = plan(AppSettings(model="quant_core", models=models, out=out, build_dir=tmp_path / "b"))
    assert not out.exists() and not (tmp_path / "b").exists()
    assert p.asset_name("cpu") == "tiny_net-quant_core-cpu.pt" and p.request["variant"] == "tiny_net-quant_core"
    assert up_to_date(p) == (False, "not generated yet")
    guard_out(p, "not generated yet")  # a new directory: allowed
    result = execute(p)
    assert result.out == out and sorted(result.assets) == sorted(records.AppInfo.load(out).asset_files)
    assert up_to_date(p)[0] is True
    other = plan(AppSettings(model="quant_core", models=models, out=out, build_dir=tmp_path / "b", app_name="Other"))
    current, why = up_to_date(other)
    assert not current and why == "it was made with other app_name"
    with pytest.raises(UsageError, match="made from other inputs: it was made with other app_name"):
        guard_out(other, why)


def test_make_app_names_the_torch_that_really_made_the_models(rendered, models):
    """Issue 24 item 9: the models' manifest says which torch converted them; make-app names it when it is not the
    lane's converter (it spoke only of the lane's torch==2.8.0 before)."""
    import torch

    made = torch.__version__.split("+")[0]
    said = " ".join(rendered["full"].warnings)
    if pins.lane("current").converter_torch == f"torch=={made}":
        assert "were converted with torch" not in said
    else:
        assert f"were converted with torch {made} (their manifest)" in said and "torch==2.8.0" in said, said
        # torch==2.8.0 is only ever called the lane's converter, never "the converter" of these models, and the
        # warning about the Maven runtime says which torch made them (it said "does NOT match the converter
        # (torch==2.8.0): models it converted may fail" about models torch 2.14.1 had converted)
        lane = pins.lane("current")
        for w in rendered["full"].warnings:
            for m in re.finditer(re.escape(lane.converter_torch), w):
                assert w[:m.start()].endswith("lane current's converter "), w
        runtime = [w for w in rendered["full"].warnings if f"pytorch_android:{pins.PYTORCH_ANDROID_DEFAULT}," in w]
        assert len(runtime) == 1 and f"torch {made}" in runtime[0], runtime
