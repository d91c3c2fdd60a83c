"""`invoke all` on this machine: the host stages run for real, the rest are skipped with reasons.

A small user model keeps it quick; its own adb server port and no NDK/SDK variables make the
machine's state explicit.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.cli import invoke

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "converter_support" / "user_models.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("all")
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANDROID_", "INVOKE_")) and k not in ("ANDROID_HOME",)}
    env.update({
        "INVOKE_BUILD_DIR": str(tmp / "build"),
        "INVOKE_CONVERT_OUT": str(tmp / "models"),
        "INVOKE_CONVERT_MODEL": f"{SUPPORT}:tiny",
        "INVOKE_CONVERT_CALIBRATION_COUNT": "8",
        "INVOKE_APP_OUT": str(tmp / "app"),
        "INVOKE_BENCH_OUT": str(tmp / "bench"),
        "INVOKE_BENCH_ITER": "5",
        "INVOKE_DEPLOY_ADB_PORT": str(port),
        "INVOKE_VERIFY_CACHE": str(tmp / "nnapi-cache"),
        "INVOKE_VERIFY_RANDOM_INPUTS": "1",
    })
    yield tmp, env
    if shutil.which("adb"):
        subprocess.run(["adb", "-P", str(port), "kill-server"], capture_output=True, timeout=30)


def invoke_all(env, *args):
    return invoke(ROOT, "all", *args, env=env, timeout=900)


def stages(tmp: Path) -> dict:
    data = json.loads((tmp / "build" / "all.json").read_text())
    assert data["kind"] == "torchdroid-all"
    return {s["stage"]: s for s in data["stages"]}


@pytest.mark.slow
def test_all_runs_what_this_machine_allows_and_says_why_it_skips_the_rest(machine):
    tmp, env = machine
    r = invoke_all(env, "--weights", "random")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    st = stages(tmp)
    assert [s for s, v in st.items() if v["status"] == "ran"] == ["convert", "verify", "make-app", "bench"]
    assert "NDK" in st["build-android"]["detail"] and st["build-android"]["status"] == "skipped"
    assert "Android SDK" in st["build-app"]["detail"]
    assert "no phone" in st["deploy"]["detail"] and "none attached" in st["deploy"]["detail"]
    assert "build-info" in st["check-compat"]["detail"]
    manifest = json.loads((tmp / "models" / "manifest.json").read_text())
    assert {f["backend"] for f in manifest["files"]} == {"cpu", "nnapi"} and len(manifest["files"]) == 6
    assert all(c["weights"]["origin"] == "random" for c in manifest["conversions"].values())
    assert (tmp / "app" / "torchdroid-app.json").is_file()
    assert (tmp / "bench" / "host-bench.json").is_file()
    assert "│ build-android │ skipped │" in r.stdout and "no usable Android NDK" in r.stdout  # the summary's row
    assert len(list((tmp / "build" / "logs").glob("all-*.log"))) == 1  # one run log of its own per run

    # again: the conversion is reused and the app is current, so nothing is regenerated
    app_info = (tmp / "app" / "torchdroid-app.json").read_bytes()
    r = invoke_all(env, "--weights", "random", "--skip", "verify")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    st = stages(tmp)
    assert st["make-app"]["status"] == "up to date" and st["verify"]["detail"] == "skipped with --skip"
    assert st["bench"]["status"] == "up to date" and "measured these models" in st["bench"]["detail"]
    assert "reused" in r.stdout
    assert (tmp / "app" / "torchdroid-app.json").read_bytes() == app_info


@pytest.mark.slow
def test_a_failing_stage_fails_the_run_but_not_the_others_and_keeps_user_files(machine):
    tmp, env = machine
    env = {**env, "INVOKE_APP_OUT": str(tmp / "mine")}
    (tmp / "mine").mkdir()
    (tmp / "mine" / "notes.txt").write_text("my notes")
    r = invoke_all(env, "--weights", "random", "--skip", "verify")
    assert r.returncode == 1
    st = stages(tmp)
    assert st["make-app"]["status"] == "failed" and "holds files torchdroid did not write" in st["make-app"]["detail"]
    assert st["bench"]["status"] in ("ran", "up to date")  # it went on after the failure
    assert "failed: make-app" in r.stderr
    assert (tmp / "mine" / "notes.txt").read_text() == "my notes"


def test_unknown_stage_is_a_usage_error():
    r = invoke(ROOT, "all", "--skip", "deplyo", timeout=120)
    assert r.returncode == 2 and "unknown stage deplyo" in r.stderr and "convert, verify" in r.stderr


def test_explicit_pretrained_offline_fails_with_the_alternatives(tmp_path):
    if _online():
        pytest.skip("this machine can download pretrained weights")
    env = {**os.environ, "INVOKE_BUILD_DIR": str(tmp_path / "build"), "INVOKE_CONVERT_OUT": str(tmp_path / "m"),
           "TORCH_HOME": str(tmp_path / "torch-home")}
    r = invoke(ROOT, "all", "--weights", "pretrained", "--skip", "verify,make-app,bench", env=env)
    assert r.returncode == 1
    st = stages(tmp_path)
    assert st["convert"]["status"] == "failed" and "--weights random" in st["convert"]["detail"]
    assert all(v["status"] == "skipped" for k, v in st.items() if k != "convert")
    assert not (tmp_path / "m" / "manifest.json").exists()


def _online() -> bool:
    try:
        socket.create_connection(("download.pytorch.org", 443), timeout=3).close()
        return True
    except OSError:
        return False
