"""build-app: the missing-tool message, and a build through the generated gradlew.

There is no Gradle or Android SDK here: a substitute wrapper jar (tests/appgen_support/fake_gradle, a
real Java program started by the real gradlew script) stands in for Gradle at that boundary.
"""

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from appgen import AppSettings, BuildAppSettings, build_app, make_app
from tests.appgen_support.models import scratch, tiny_models
from tests.cli import invoke
from toolchain import pins, records
from toolchain.errors import RecordError, ToolFailed, ToolNotFound

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests/appgen_support/fake_gradle"


@pytest.fixture()
def project():
    out = scratch("build-app") / "project"
    make_app(AppSettings(model="quant_none", models=tiny_models(), out=out, build_dir=out.parent / "build"))
    return out


@pytest.fixture(scope="module")
def fake_wrapper_jar(tmp_path_factory):
    work = tmp_path_factory.mktemp("fake-gradle")
    subprocess.run(["javac", "-d", work / "classes", FAKE / "org/gradle/wrapper/GradleWrapperMain.java"], check=True)
    jar = work / "gradle-wrapper.jar"
    subprocess.run(["jar", "cf", jar, "-C", work / "classes", "."], check=True)
    return jar


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("ANDROID_HOME", "ANDROID_SDK_ROOT", "FAKE_GRADLE_FAIL")}
    env.update(extra)
    return env


def test_missing_sdk_and_wrapper_jar_are_named_with_the_fix(project):
    with pytest.raises(ToolNotFound) as ei:
        build_app(BuildAppSettings(project=project, build_dir=project.parent / "build"), env=_env())
    msg = str(ei.value)
    assert "missing the Android SDK and the Gradle wrapper jar" in msg
    assert "neither ANDROID_HOME nor ANDROID_SDK_ROOT is set" in msg and "sdk.dir" in msg
    assert 'sdkmanager "platform-tools" "platforms;android-34"' in msg and "export ANDROID_HOME=" in msg
    assert "gradle wrapper --gradle-version 8.7" in msg
    assert ei.value.exit_code == 3


def test_an_sdk_path_that_is_not_an_sdk(project, tmp_path, fake_wrapper_jar):
    (project / "gradle/wrapper/gradle-wrapper.jar").write_bytes(fake_wrapper_jar.read_bytes())
    (project / "local.properties").write_text(f"sdk.dir={tmp_path}\n")
    with pytest.raises(ToolNotFound) as ei:
        build_app(BuildAppSettings(project=project, build_dir=project.parent / "build"), env=_env())
    assert "does not look like an Android SDK" in str(ei.value) and "wrapper jar" not in str(ei.value)


def test_build_through_gradlew_records_the_apk(project, tmp_path, fake_wrapper_jar):
    (project / "gradle/wrapper/gradle-wrapper.jar").write_bytes(fake_wrapper_jar.read_bytes())
    sdk = tmp_path / "sdk"
    (sdk / "platforms").mkdir(parents=True)
    res = build_app(BuildAppSettings(project=project, build_dir=project.parent / "build"),
                    env=_env(ANDROID_HOME=str(sdk)))
    assert res.apk == project / "app/build/outputs/apk/debug/app-debug.apk"
    with zipfile.ZipFile(res.apk) as z:
        names = set(z.namelist())
    assert {"AndroidManifest.xml", "assets/labels.txt", "assets/tiny_net-quant_none-cpu.pt"} <= names
    info = records.read_record(project / records.APP_INFO_NAME, records.APP_INFO_KIND, records.APP_INFO_SCHEMA, "")
    assert info["apk"]["path"] == "app/build/outputs/apk/debug/app-debug.apk"
    assert info["apk"]["sha256"] == res.sha256 and info["apk"]["size"] == res.apk.stat().st_size
    assert info["application_id"] == "org.torchdroid.demo"  # the rest of the record is kept
    assert "BUILD SUCCESSFUL" in res.log_path.read_text()


def test_gradle_failure_carries_log_and_hint(project, tmp_path, fake_wrapper_jar):
    (project / "gradle/wrapper/gradle-wrapper.jar").write_bytes(fake_wrapper_jar.read_bytes())
    sdk = tmp_path / "sdk"
    (sdk / "build-tools").mkdir(parents=True)
    with pytest.raises(ToolFailed) as ei:
        build_app(BuildAppSettings(project=project, build_dir=project.parent / "build"),
                  env=_env(ANDROID_SDK_ROOT=str(sdk), FAKE_GRADLE_FAIL="1"))
    msg = str(ei.value)
    assert "`./gradlew assembleDebug` failed with exit code 1" in msg
    assert "SDK location not found" in msg and "fix: set ANDROID_HOME" in msg and "full log:" in msg


def test_build_app_without_a_project(tmp_path):
    with pytest.raises(RecordError, match="run `invoke make-app` first"):
        build_app(BuildAppSettings(project=tmp_path, build_dir=tmp_path / "b"), env=_env())


def test_gradlew_without_jar_says_how_to_add_it(project):
    res = subprocess.run([project / "gradlew", "tasks"], capture_output=True, text=True, env=_env(), check=False)
    assert res.returncode == 1
    assert "gradle-wrapper.jar is missing" in res.stderr and "gradle wrapper --gradle-version 8.7" in res.stderr


def _invoke(*args, env):
    return invoke(ROOT, *args, env=env, timeout=600)


def test_tasks_exit_codes_and_messages(project, tmp_path):
    res = _invoke("build-app", "--out", str(project), env=_env(INVOKE_BUILD_DIR=str(tmp_path / "build")))
    assert res.returncode == 3
    assert "torchdroid build-app: missing tool: cannot build the app" in res.stderr
    res = _invoke("make-app", "--application-id", "org.native.app", "--out", str(tmp_path / "app"),
                  env=_env(INVOKE_BUILD_DIR=str(tmp_path / "build")))
    assert res.returncode == 2
    assert "segment 'native' is a Java keyword" in res.stderr and not (tmp_path / "app").exists()


def test_make_app_task_never_converts_and_says_the_command(tmp_path):
    """Missing models are a record error (exit 5) with the exact convert command; nothing is converted."""
    models, out = tmp_path / "models", tmp_path / "app"
    env = _env(INVOKE_BUILD_DIR=str(tmp_path / "build"))
    res = _invoke("make-app", "--model", "quant_core", "--models", str(models), "--out", str(out), env=env)
    assert res.returncode == 5, res.stderr[-2000:]
    assert f"no converted models in {models}" in res.stderr
    assert f"invoke convert --quant core --out {models}" in res.stderr
    assert not models.exists() and not out.exists()


def test_make_app_task_then_up_to_date(tmp_path):
    models, out = tiny_models(), tmp_path / "app"
    env = _env(INVOKE_BUILD_DIR=str(tmp_path / "build"))
    args = ("make-app", "--model", "quant_core", "--models", str(models), "--out", str(out), "--abi-filters", "x86_64")
    res = _invoke(*args, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (out / "app/src/main/assets/tiny_net-quant_core-cpu.pt").is_file()
    assert "abiFilters 'x86_64'" in (out / "app/build.gradle").read_text()
    assert f"next: invoke build-app --out {out}" in res.stdout
    # make-app runs check-compat against the runtime the app links (a Maven version vs this torch)
    assert f"runtime: pytorch_android {pins.PYTORCH_ANDROID_DEFAULT}" in res.stdout  # one line of check-compat's
    assert "warning: the app's runtime may not run these models (check-compat: " in res.stdout
    again = _invoke(*args, env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"make-app: {out} is up to date" in again.stdout and f"next: invoke build-app --out {out}" in again.stdout


def test_wrapper_jar_from_a_local_gradle(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE}{os.pathsep}{os.environ['PATH']}")
    out = scratch("wrapper") / "project"
    res = make_app(AppSettings(model="quant_none", models=tiny_models(), out=out, build_dir=out.parent / "build"))
    assert res.wrapper_jar is True
    assert (out / "gradle/wrapper/gradle-wrapper.jar").read_text() == "fake wrapper jar for Gradle 8.7\n"
    assert "GradleWrapperMain" in (out / "gradlew").read_text()  # our launcher and properties stay
    assert "gradle-8.7-bin.zip" in (out / "gradle/wrapper/gradle-wrapper.properties").read_text()
    assert any("wrapper jar written by the local Gradle 8.7" in n for n in res.notes)
    assert records.read_record(out / records.APP_INFO_NAME, records.APP_INFO_KIND, records.APP_INFO_SCHEMA,
                               "")["wrapper_jar"] is True


def test_build_app_names_the_make_app_command_of_this_project(project):
    """The project is quant_none's (not the default model's): every make-app command build-app's fix names rewrites
    this project (a bare `invoke make-app --force` rewrote build/app, the default quant_full app)."""
    import re
    import shlex

    (project / "gradlew").unlink()
    with pytest.raises(ToolNotFound) as ei:
        build_app(BuildAppSettings(project=project, build_dir=project.parent / "build"), env=_env())
    made = re.findall(r"`(invoke make-app [^`]*)`", str(ei.value))
    assert len(made) == 2, str(ei.value)  # the wrapper jar's and gradlew's
    for cmd in made:
        argv = shlex.split(cmd)
        assert argv[argv.index("--model") + 1] == "quant_none" and Path(argv[argv.index("--out") + 1]) == project, cmd
