"""Android SDK / Gradle location, Gradle failure hints, the input lookup table, needs_convert."""

import numpy as np

from appgen import assets
from appgen.gradle import Gradle, gradle_hint
from tests.appgen_support import app_input
from toolchain.tools import AndroidSdk
from toolchain.errors import RecordError
from appgen.make import convert_command, find_variant


def test_sdk_location_order(tmp_path):
    """build-app uses the one AndroidSdk of toolchain.tools: android.sdk, ANDROID_HOME, ANDROID_SDK_ROOT, sdk.dir."""
    project = tmp_path / "p"
    project.mkdir()
    assert AndroidSdk.find(None, {}, project) is None
    props_sdk = tmp_path / "props-sdk"
    (props_sdk / "platforms").mkdir(parents=True)
    (project / "local.properties").write_text(f"# comment\nsdk.dir={props_sdk}\n")
    assert AndroidSdk.find(None, {}, project).root == props_sdk.resolve()
    env_sdk = tmp_path / "env-sdk"
    (env_sdk / "build-tools").mkdir(parents=True)
    assert AndroidSdk.find(None, {"ANDROID_SDK_ROOT": str(env_sdk)}, project).source == "ANDROID_SDK_ROOT"
    # the configured one wins, and when it is not an SDK nothing else is silently used instead
    assert AndroidSdk.find(str(tmp_path / "cfg"), {"ANDROID_HOME": str(env_sdk)}, project) is None
    assert "does not exist" in AndroidSdk(tmp_path / "cfg", "android.sdk").problem()


def test_no_gradle_on_an_empty_path(tmp_path):
    assert Gradle.locate(env={"PATH": str(tmp_path)}) is None


def test_gradle_hints():
    assert "ANDROID_HOME" in gradle_hint("SDK location not found. Define a valid SDK location")
    assert "sdkmanager --licenses" in gradle_hint("Failed to install: licences not accepted")
    assert "network" in gradle_hint("Could not resolve com.android.tools.build:gradle:8.5.2")
    assert "JDK 17" in gradle_hint("Android Gradle plugin requires Java 17 to run")
    assert gradle_hint("BUILD SUCCESSFUL") is None


def test_input_lut_matches_the_formula():
    mean, std, scale, zp = assets.IMAGENET_MEAN, assets.IMAGENET_STD, 0.018649335950613022, 114
    lut = assets.input_lut(mean, std, scale, zp)
    assert len(lut) == 768
    table = np.frombuffer(lut, dtype=np.uint8).reshape(3, 256).astype(int)
    p = np.arange(256)
    for c in range(3):
        exact = np.clip(np.round(((p / 255 - mean[c]) / std[c]) / scale + zp), 0, 255)
        assert np.abs(table[c] - exact).max() <= 1  # float32 vs float64 at .5 ties only
        assert (table[c] == exact).mean() > 0.97
        assert np.all(np.diff(table[c]) >= 0)  # monotonic
    pixels = np.array([[[0, 128, 255]]], dtype=np.uint8)
    out = app_input.apply_lut(pixels, lut)
    assert out.shape == (1, 1, 1, 3)
    assert list(out[0, 0, 0]) == [table[0][0], table[1][128], table[2][255]]


def test_normalization_from_the_conversion_record():
    assert assets.normalization({}) == (assets.IMAGENET_MEAN, assets.IMAGENET_STD)
    conv = {"normalization": {"mean": [0.5, 0.5, 0.5], "std": [0.25, 0.25, 0.25]}}
    assert assets.normalization(conv) == ((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))


def test_labels_for_other_class_counts():
    labels, source = assets.labels_for(10)
    assert labels[3] == "class 3" and "10 classes" in source


def test_missing_models_are_a_record_error_with_the_exact_convert_command(tmp_path):
    """make-app never converts by itself: it names what is missing and the command (exit 5)."""
    models = tmp_path / "my models"
    models.mkdir()
    cmd = "invoke convert --quant full --out " + f"'{models}'"
    assert convert_command(models, "quant_full") == cmd
    cases = [
        (None, f"no converted models in {models}"),
        ("{broken", "cannot be used"),
        ('{"kind": "torchdroid.convert-manifest", "schema": 1, "conversions": {}, "files": []}',
         f"quant_full is not converted in {models}"),
    ]
    for text, what in cases:
        if text is not None:
            (models / "manifest.json").write_text(text)
        try:
            find_variant(models, "quant_full")
        except RecordError as e:
            assert what in e.what and cmd in e.remedy and e.exit_code == 5
        else:
            raise AssertionError(f"no RecordError for {what}")
    assert "--model MODEL" in convert_command(models, "resnet18-quant_core")


def test_app_info_is_one_typed_record(tmp_path):
    """One reader, one writer, one path helper; a tampered record or APK is a record error (exit 5)."""
    import dataclasses
    import json

    import pytest

    from toolchain import records

    info = records.AppInfo(dir=tmp_path, application_id="org.example.app", activity=".MainActivity", app_name="A",
                           variant="quant_full", qualified_variant="m-quant_full", input_mode="uint8_lut",
                           models={"m.pt": "a" * 64}, assets={}, abi_filters=("arm64-v8a",), min_sdk=21,
                           target_sdk=34, pins={"gradle": "8.7"}, runtime={}, wrapper_jar=False, torchdroid="0",
                           request={"variant": "m-quant_full"}, asset_files={"m.pt": "b" * 64},
                           extra={"labels": {"count": 3}})
    assert info.write() == records.app_info_path(tmp_path) == tmp_path / records.APP_INFO_NAME
    back = records.AppInfo.load(tmp_path)
    assert back == info and back.apk is None and back.apk_file is None
    apk = tmp_path / "app.apk"
    apk.write_bytes(b"apk")
    from toolchain.fsutil import sha256_file

    dataclasses.replace(info, apk=records.AppApk("app.apk", sha256_file(apk), 3)).write()
    assert records.AppInfo.load(tmp_path).check_apk() == apk.resolve()
    apk.write_bytes(b"rebuilt elsewhere")
    with pytest.raises(RecordError, match="does not match its app-info record"):
        records.AppInfo.load(tmp_path).check_apk()
    data = json.loads(info.path.read_text())
    del data["application_id"]
    info.path.write_text(json.dumps(data))
    with pytest.raises(RecordError, match="incomplete or malformed") as ei:
        records.AppInfo.load(tmp_path)
    assert ei.value.exit_code == 5 and f"make-app --model quant_full --out {tmp_path} --force" in ei.value.remedy
