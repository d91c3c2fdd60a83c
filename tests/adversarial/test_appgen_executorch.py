"""make-app for an ExecuTorch program, run as a careless or unlucky user would (real `invoke`, fresh directory).

Each case starts in an empty working directory whose ``build/models`` holds a real `invoke convert --format
executorch` output (the tiny user model, converted once per session), so the defaults are what runs.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.adversarial.harness import adversarial, assert_clean, run_invoke, snapshot
from tests.appgen_support.models import tiny_models, tiny_programs

pytestmark = pytest.mark.slow  # the tiny model lowered to four ExecuTorch programs (~30 s)

MODELS = Path("build/models")
APP = Path("build/app-fp32-xnnpack")  # make-app --model fp32-xnnpack's default --out


@pytest.fixture()
def user(tmp_path) -> Path:
    shutil.copytree(tiny_programs(), tmp_path / MODELS)
    return tmp_path


def _aar(path: Path, jni=("jni/arm64-v8a/libexecutorch.so",), manifest=True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        if manifest:
            z.writestr("AndroidManifest.xml", "<manifest/>")
            z.writestr("classes.jar", b"PK")
        for name in jni:
            z.writestr(name, b"\x7fELF not really")
    return path


def _nothing_made(user: Path):
    assert not list(user.glob("build/app*"))


@adversarial("make-app (ExecuTorch)", "stage run before its input exists")
def test_a_program_that_was_not_converted_names_the_command(tmp_path):
    shutil.copytree(tiny_models(), tmp_path / MODELS)  # a legacy-only convert output
    kept = snapshot([tmp_path / MODELS])
    out = run_invoke(["make-app", "--model", "fp32-xnnpack"], tmp_path)
    assert_clean(out, "record", mentions=["fp32-xnnpack is not converted",
                                          "invoke convert --format executorch --delegates xnnpack"],
                 kept=kept, root=tmp_path)
    _nothing_made(tmp_path)


@adversarial("make-app (ExecuTorch)", "tampered record")
def test_a_program_changed_after_convert_is_refused(user):
    pte = user / MODELS / "tiny-int8-xnnpack.pte"
    pte.write_bytes(pte.read_bytes()[:-16])
    kept = snapshot([user / MODELS])
    out = run_invoke(["make-app", "--model", "int8-xnnpack"], user)
    assert_clean(out, "record", mentions=["does not match its manifest entry", "--force"], kept=kept, root=user)
    _nothing_made(user)


@adversarial("make-app (ExecuTorch)", "tampered record")
def test_a_manifest_naming_a_path_outside_the_assets_is_refused(user):
    path = user / MODELS / "manifest.json"
    manifest = json.loads(path.read_text())
    for entry in manifest["executorch"]["files"]:
        entry["stem"] = "../../../escaped"
    path.write_text(json.dumps(manifest))
    kept = snapshot([user / MODELS])
    out = run_invoke(["make-app", "--model", "fp32-xnnpack"], user)
    assert_clean(out, "record", mentions=["not a file name convert writes"], kept=kept, root=user)
    _nothing_made(user)
    assert not list(user.rglob("escaped*"))


@adversarial("make-app (ExecuTorch)", "bad value from the command line")
@pytest.mark.parametrize("model, words", [
    ("fp16-xnnpack", ["not a converted variant name", "fp32-xnnpack"]),
    ("fp32-tflite", ["unknown ExecuTorch delegate", "xnnpack, portable, vulkan"]),
    ("fp32-vulkan", ["cannot run the vulkan program", "--executorch-aar"]),
    ("FP32-XNNPACK", ["not a converted variant name"]),
])
def test_unknown_or_unrunnable_programs_are_usage_errors(user, model, words):
    kept = snapshot([user / MODELS])
    out = run_invoke(["make-app", "--model", model], user)
    assert_clean(out, "usage", mentions=words, kept=kept, root=user)
    _nothing_made(user)


@adversarial("make-app (ExecuTorch)", "bad value from an environment variable")
@pytest.mark.parametrize("env, words", [
    ({"INVOKE_APP_EXECUTORCH_ANDROID": "1.0.1; reboot"}, ["is not a Maven version", "--executorch-android"]),
    ({"INVOKE_APP_EXECUTORCH_AAR": "no/such/executorch.aar"}, ["does not exist", "build_android_library.sh"]),
    ({"INVOKE_APP_AAR": "pytorch_android.aar"}, ["--aar given for the ExecuTorch program", "--executorch-aar"]),
    ({"INVOKE_APP_ABI_FILTERS": "armeabi-v7a"}, ["no native library for armeabi-v7a", "--abi-filters"]),
])
def test_bad_values_from_the_environment(user, env, words):
    kept = snapshot([user / MODELS])
    out = run_invoke(["make-app", "--model", "fp32-xnnpack"], user, env=env)
    assert_clean(out, "usage", mentions=words, kept=kept, root=user)
    _nothing_made(user)


@adversarial("make-app (ExecuTorch)", "bad value from a config file")
def test_an_executorch_option_for_a_torchscript_app_in_invoke_yaml(tmp_path):
    shutil.copytree(tiny_models(), tmp_path / MODELS)
    aar = _aar(tmp_path / "executorch.aar")
    (tmp_path / "mine.yaml").write_text(f"app: {{executorch_aar: {aar}}}\n")
    kept = snapshot([tmp_path / MODELS, aar])
    out = run_invoke(["-f", "mine.yaml", "make-app", "--model", "quant_none"], tmp_path)
    assert_clean(out, "usage", mentions=["--executorch-aar given for the TorchScript variant quant_none"], kept=kept,
                 root=tmp_path)
    _nothing_made(tmp_path)


@adversarial("make-app (ExecuTorch)", "foreign file where an input belongs")
@pytest.mark.parametrize("kind, words", [
    ("text", ["not a valid AAR (not a zip archive)"]),
    ("no-manifest", ["is not an Android library"]),
    ("pytorch_android", ["no jni/<abi>/libexecutorch.so for arm64-v8a", "it carries native code for: arm64-v8a"]),
])
def test_a_foreign_file_as_executorch_aar(user, kind, words):
    aar = user / "downloads" / "executorch.aar"
    if kind == "text":
        aar.parent.mkdir()
        aar.write_text("<html>404 Not Found</html>")
    elif kind == "no-manifest":
        _aar(aar, manifest=False)
    else:  # a pytorch_android AAR passed by mistake: its native library is another one
        _aar(aar, jni=("jni/arm64-v8a/libpytorch_jni.so",))
    kept = snapshot([user / MODELS, aar])
    out = run_invoke(["make-app", "--model", "fp32-xnnpack", "--executorch-aar", str(aar)], user)
    assert_clean(out, "usage", mentions=words, kept=kept, root=user)
    _nothing_made(user)


@adversarial("make-app (ExecuTorch)", "hostile name")
def test_an_aar_name_that_would_break_build_gradle(user):
    aar = _aar(user / 'exec"); evil("x.aar')
    kept = snapshot([user / MODELS, aar])
    out = run_invoke(["make-app", "--model", "fp32-xnnpack", "--executorch-aar", str(aar)], user)
    assert_clean(out, "usage", mentions=["cannot go into build.gradle", "executorch.aar"], kept=kept, root=user)
    _nothing_made(user)


@adversarial("make-app (ExecuTorch)", "force deletes inputs")
def test_force_never_deletes_the_programs_or_the_aar(user):
    kept = snapshot([user / MODELS])
    out = run_invoke(["make-app", "--model", "fp32-xnnpack", "--force", "--out", str(MODELS)], user)
    assert_clean(out, "usage", mentions=["an input of this command"], kept=kept, root=user)
    # an AAR inside the old project: --force would replace the project, and with it the AAR
    aar = _aar(user / APP / "executorch.aar", jni=("jni/arm64-v8a/libexecutorch.so",))
    kept = snapshot([user / MODELS, aar])
    out = run_invoke(["make-app", "--model", "fp32-xnnpack", "--force", "--executorch-aar", str(aar)], user)
    assert_clean(out, "usage", mentions=["an input of this command"], kept=kept, root=user)


@adversarial("make-app (ExecuTorch)", "repeated run")
def test_a_second_run_is_up_to_date_and_a_version_change_needs_force(user):
    first = run_invoke(["make-app", "--model", "fp32-xnnpack"], user)
    assert_clean(first, "ok", root=user)
    assert "org.pytorch:executorch-android:1.5.1" in (user / APP / "app/build.gradle").read_text()
    project = snapshot([user / APP])
    again = run_invoke(["make-app", "--model", "fp32-xnnpack"], user)
    assert_clean(again, "ok", mentions=["up to date"], kept=project, root=user)
    other = run_invoke(["make-app", "--model", "fp32-xnnpack", "--executorch-android", "1.3.1"], user)
    assert_clean(other, "usage", mentions=["made with other runtime", "--force"], kept=project, root=user)
