"""make-app and build-app as a careless or unlucky user runs them (real `invoke`, fresh directory, defaults).

Each case starts in an empty working directory whose ``build/models`` holds a real convert output
(the tiny network, converted once per session), so the defaults (relative ``build/``) are what runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.adversarial.harness import adversarial, assert_clean, run_invoke, snapshot
from tests.appgen_support.models import tiny_models

MODELS = Path("build/models")


@pytest.fixture()
def user(tmp_path) -> Path:
    """A working directory with `invoke convert`'s output in build/models (the default --models)."""
    shutil.copytree(tiny_models(), tmp_path / MODELS)
    return tmp_path


def _models_kept(user: Path):
    return snapshot([user / MODELS])


# --------------------------------------------------------------------------- records (never convert)


@pytest.mark.slow
@adversarial("make-app", "missing record")
def test_no_manifest_names_the_convert_command(tmp_path):
    out = run_invoke(["make-app"], tmp_path)
    assert_clean(out, "record", mentions=["no converted models in build/models",
                                          "invoke convert --quant full --out build/models"], root=tmp_path)
    assert not (tmp_path / "build/app").exists() and not (tmp_path / "build/models").exists()


@adversarial("make-app", "tampered record")
def test_unreadable_manifest_is_not_replaced(user):
    (user / MODELS / "manifest.json").write_text("{ not json")
    kept = _models_kept(user)
    out = run_invoke(["make-app"], user)
    assert_clean(out, "record", mentions=["cannot be used", "invoke convert --quant full"], kept=kept, root=user)
    assert not (user / "build/app").exists()


@adversarial("make-app", "missing record")
def test_variant_not_converted_is_not_converted_for_you(user):
    kept = _models_kept(user)
    out = run_invoke(["make-app", "--model", "resnet18-quant_core"], user)
    assert_clean(out, "record", mentions=["resnet18-quant_core is not converted", "invoke convert",
                                          "--quant core"], kept=kept, root=user)
    assert not (user / "build/app").exists()


@adversarial("make-app", "tampered record")
def test_model_file_changed_after_convert(user):
    model = next((user / MODELS).glob("*-quant_full-cpu.pt"))
    model.write_bytes(model.read_bytes() + b"tampered")
    out = run_invoke(["make-app"], user)
    assert_clean(out, "record", mentions=["does not match its manifest entry"], root=user)


# --------------------------------------------------------------------------- other people's files, --force


@adversarial("make-app", "force deletes inputs")
@pytest.mark.parametrize("out_dir", ["build/models", "build", "."])
def test_force_never_deletes_the_models(user, out_dir):
    kept = _models_kept(user)
    out = run_invoke(["make-app", "--force", "--out", out_dir], user)
    mentions = (["it is the working directory", "--force never applies to it"] if out_dir == "." else
                ["an input of this command", "--force never deletes inputs"])
    assert_clean(out, "usage", mentions=mentions, kept=kept, root=user)


@adversarial("make-app", "foreign files")
def test_a_directory_with_someone_elses_files(user):
    mine = user / "build/app"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("my notes")
    kept = snapshot([mine])
    out = run_invoke(["make-app"], user)
    assert_clean(out, "usage", mentions=["torchdroid did not write", "notes.txt", "--force"], kept=kept, root=user)


@adversarial("make-app", "foreign files")
def test_out_is_a_file(user):
    (user / "build/app").write_text("a file")
    kept = snapshot([user / "build/app"])
    out = run_invoke(["make-app"], user)
    assert_clean(out, "usage", mentions=["not a directory"], kept=kept, root=user)


@adversarial("make-app", "tampered record")
def test_tampered_app_info_needs_force(user):
    assert run_invoke(["make-app", "--model", "quant_none", "--out", "build/app"], user).code == 0
    info = user / "build/app/torchdroid-app.json"
    info.write_text("{ tampered")
    kept = snapshot([user / "build/app"])
    out = run_invoke(["make-app", "--model", "quant_none", "--out", "build/app"], user)
    assert_clean(out, "usage", mentions=["cannot be read", "--force"], kept=kept, root=user)


@adversarial("make-app", "stale output")
def test_edited_asset_and_other_variant_need_force_then_force_keeps_local_properties(user):
    assert run_invoke(["make-app", "--model", "quant_none", "--out", "build/app"], user).code == 0
    app = user / "build/app"
    (app / "local.properties").write_text("sdk.dir=/opt/my-sdk\n")
    (app / "app/src/main/assets/labels.txt").write_text("my labels\n")
    kept = snapshot([app])
    out = run_invoke(["make-app", "--model", "quant_none", "--out", "build/app"], user)
    assert_clean(out, "usage", mentions=["labels.txt is missing or was changed", "--force"], kept=kept, root=user)
    out = run_invoke(["make-app", "--model", "quant_core", "--out", "build/app"], user)
    assert_clean(out, "usage", mentions=["made from other inputs", "variant"], kept=kept, root=user)
    out = run_invoke(["make-app", "--model", "quant_core", "--out", "build/app", "--force"], user)
    assert_clean(out, "ok", root=user)
    assert (app / "local.properties").read_text() == "sdk.dir=/opt/my-sdk\n"
    assert json.loads((app / "torchdroid-app.json").read_text())["variant"] == "quant_core"


@adversarial("make-app", "rerun")
def test_rerun_is_up_to_date_and_ends_with_the_next_command(user):
    assert run_invoke(["make-app"], user).code == 0
    kept = snapshot([user / "build/app"])
    out = run_invoke(["make-app", "--model", "quant_full"], user)
    assert_clean(out, "ok", mentions=["up to date", "next: invoke build-app --out build/app"], kept=kept, root=user)


# --------------------------------------------------------------------------- bad values from every source


@adversarial("make-app", "bad value")
@pytest.mark.parametrize("args,env,mentions", [
    (["--application-id", "org.native.app"], {}, ["'native' is a Java keyword"]),
    (["--application-id", "demo"], {}, ["at least two segments"]),
    ([], {"INVOKE_APP_APPLICATION_ID": "org.my-app.x"}, ["'my-app' must start with a letter"]),
    ([], {"INVOKE_APP_NAME": "tab\there"}, ["characters it cannot have"]),
    (["--app-name", "{{ cookiecutter.x }}"], {}, ["characters it cannot have"]),
    (["--app-name", "bad \ufffe"], {}, ["characters it cannot have"]),
    (["--app-name", "x" * 80], {}, ["at most 64"]),
    (["--min-sdk", "twenty"], {}, ["--min-sdk", "'twenty' is not a whole number"]),
    (["--min-sdk", "19"], {}, ["below 21"]),
    (["--target-sdk", "99"], {}, ["above the lane's compileSdk"]),
    (["--abi-filters", "arm64"], {}, ["unknown ABI 'arm64'"]),
    (["--model", "quant_half"], {}, ["not a converted variant name"]),
    (["--lane", "seed-2020"], {}, ["needs --aar", "2025-06-30", "system Gradle", "--lane current"]),
    (["--pytorch-android", "1.9.0-SNAPSHOT"], {}, ["cannot be downloaded"]),
    (["--pytorch-android", "latest!"], {}, ["not a Maven version"]),
])
def test_bad_values_are_refused_before_anything_is_written(user, args, env, mentions):
    kept = _models_kept(user)
    out = run_invoke(["make-app", *args], user, env=env)
    assert_clean(out, "usage", mentions=mentions, kept=kept, root=user)
    assert not (user / "build/app").exists()


@adversarial("make-app", "bad value")
@pytest.mark.parametrize("name,content,mentions", [
    ("pytorch_android.aar", b"not a zip", ["not a zip archive"]),
    ('evil"${x}.aar', b"PK", ["cannot go into build.gradle"]),
    ("missing.aar", None, ["does not exist"]),
])
def test_bad_aar(user, name, content, mentions):
    aar = user / name
    if content is not None:
        aar.write_bytes(content)
    out = run_invoke(["make-app", "--aar", str(aar)], user)
    assert_clean(out, "usage", mentions=mentions, root=user)
    assert not (user / "build/app").exists()


# --------------------------------------------------------------------------- concurrency and a full disk


@adversarial("make-app", "concurrent run")
def test_another_run_writing_the_same_app(user):
    lock = user / "build/.app.torchdroid.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        out = run_invoke(["make-app"], user)
    assert_clean(out, "usage", mentions=["busy"], root=user)
    assert not (user / "build/app").exists()


@pytest.fixture()
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True,
                         check=False)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {res.stderr.decode(errors='replace').strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@adversarial("make-app", "full disk")
def test_full_disk_is_a_clean_error_without_partial_files(user, small_disk):
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (2 << 20))  # leave about 1 MB: less than the models need
    out = run_invoke(["make-app", "--model", "quant_full", "--out", str(small_disk / "app")], user)
    assert_clean(out, "usage", mentions=["not enough disk space"], root=small_disk)
    assert not (small_disk / "app").exists()


# --------------------------------------------------------------------------- build-app


@adversarial("build-app", "missing record")
def test_build_app_without_a_project(tmp_path):
    out = run_invoke(["build-app"], tmp_path)
    assert_clean(out, "record", mentions=["invoke make-app"], root=tmp_path)


@adversarial("build-app", "tool missing")
def test_build_app_without_sdk_names_everything_missing(user):
    assert run_invoke(["make-app", "--model", "quant_none", "--out", "build/app"], user).code == 0
    out = run_invoke(["build-app"], user)
    assert_clean(out, "tool", mentions=["the Android SDK", "wrapper jar", "sdkmanager"], root=user)


@adversarial("build-app", "bad value")
def test_build_app_honours_the_configured_sdk(user):
    assert run_invoke(["make-app", "--model", "quant_none", "--out", "build/app"], user).code == 0
    out = run_invoke(["build-app"], user, env={"INVOKE_ANDROID_SDK": str(user / "no-sdk"),
                                               "ANDROID_HOME": "/somewhere/else"})
    assert_clean(out, "tool", mentions=[f"{user / 'no-sdk'} (from android.sdk) does not exist"], root=user)


@adversarial("build-app", "tampered record")
def test_build_app_with_a_tampered_app_info(user):
    assert run_invoke(["make-app", "--model", "quant_none", "--out", "build/app"], user).code == 0
    info = user / "build/app/torchdroid-app.json"
    data = json.loads(info.read_text())
    del data["application_id"]
    info.write_text(json.dumps(data))
    out = run_invoke(["build-app"], user)
    assert_clean(out, "record", mentions=["incomplete or malformed", "make-app --model quant_none --out", "--force"], root=user)
    assert os.path.exists(info)


@adversarial("make-app", "printed command not shell-quoted: an --out with a space and a quote")
def test_the_next_command_printed_is_shell_quoted(user):
    import shlex

    out_dir = "my app's dir"
    out = run_invoke(["make-app", "--model", "quant_none", "--out", out_dir], user)
    assert_clean(out, "ok", root=user)
    line = next(x for x in out.out.splitlines() if x.startswith("next: invoke build-app"))
    command = line[len("next: "):].split("  (", 1)[0]
    assert shlex.split(command) == ["invoke", "build-app", "--out", out_dir], line
