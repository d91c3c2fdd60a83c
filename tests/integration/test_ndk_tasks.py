"""The three tasks through the real `invoke` CLI (exit codes and what they print), and the doctor's rows."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path


from workflow.doctor import DoctorSettings, problems, run_doctor
from tests import cli
from tests.ndk_support import git_test_env, make_fake_ndk, make_fake_sdk
from tests.ndk_support.fixtures import *  # noqa: F403 (pytest fixtures: fake_pytorch, fake_ndk)
from tests.ndk_support.models import make_models_and_manifest
from tests.virtual_device.harness import held_dead_port
from toolchain.tools.programs import CMake

ROOT = Path(__file__).resolve().parents[2]


def invoke(args, build_dir: Path, extra_env=None, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
    env.update(git_test_env())
    env.update({"INVOKE_BUILD_DIR": str(build_dir), "CI": "1", "ANDROID_ADB_SERVER_PORT": str(held_dead_port())})
    env.update(extra_env or {})
    return cli.invoke(ROOT, *args, env=env, timeout=timeout)


def test_build_android_task_builds_then_is_up_to_date(tmp_path, fake_pytorch, fake_ndk):
    args = ["build-android", "--abi", "x86_64", "--ndk", str(fake_ndk), "--repo-url", fake_pytorch.url,
            "--commit", fake_pytorch.pinned, "--max-jobs", "2", "--api-level", "28"]
    first = invoke(args, tmp_path / "b")
    assert first.returncode == 0, first.stderr
    info_path = tmp_path / "b" / "android" / "x86_64" / "build-info.json"
    assert f"build-info: {info_path}" in first.stdout
    assert "speed_benchmark_torch" in first.stdout
    assert "verified: machine Advanced Micro Devices X86-64, API level 28" in first.stdout
    assert "custom commit" in first.stdout + first.stderr  # said once: when the build met it (the run's log line)
    assert json.loads(info_path.read_text())["api_level"] == 28
    # progress from the build's [n/N] lines: every step in the run log, on the console (a pipe) a line with its clock
    # once the build has taken a few seconds, then one per 30 s; the build's full output is only in build.log
    run_log = "".join(p.read_text() for p in (tmp_path / "b" / "logs").glob("build-android-*.log"))
    assert re.search(r"\[\d+/\d+\] x86_64: Linking CXX executable speed_benchmark_torch", run_log)
    steps = [line for line in first.stderr.splitlines() if re.match(r"\[\d+/\d+", line)]
    assert all(re.match(r"\[\d+/\d+ \d+:\d\d:\d\d(, about .+ left)?\] x86_64: ", line) for line in steps), steps
    assert "-- Configuring done" not in first.stderr + first.stdout
    assert "-- Configuring done" in (info_path.parent / "build.log").read_text()
    assert "nearest preset lane 'current'" in first.stdout + first.stderr
    # --lane on the command line: a custom commit takes that lane's facts (same inputs: nothing rebuilt)
    second = invoke([*args, "--lane", "current"], tmp_path / "b")
    assert second.returncode == 0 and "up to date" in second.stdout
    said = second.stdout + second.stderr
    assert "facts come from lane 'current' (v2.8.0)" in said and "nearest" not in said


def test_build_android_task_without_ndk_exits_3_with_the_fix(tmp_path, fake_pytorch):
    res = invoke(["build-android", "--repo-url", fake_pytorch.url], tmp_path / "b")
    assert res.returncode == 3
    assert "torchdroid build-android: missing tool: no Android NDK found" in res.stderr
    assert "set ANDROID_NDK=/path/to/it" in res.stderr
    assert "Traceback" not in res.stderr


def test_doctor_task_reports_and_strict_fails(tmp_path, fake_ndk):
    ok = invoke(["doctor", "--ndk", str(fake_ndk)], tmp_path / "b",  # COLUMNS: the found column whole (in a pipe a
                {"ANDROID_HOME": str(make_fake_sdk(tmp_path / "sdk")), "COLUMNS": "400"})  # long tmp path drops it)
    assert ok.returncode == 0, ok.stderr
    assert "r21e (21.4.7075529)" in ok.stdout and "torchdroid doctor" in ok.stdout
    lax = invoke(["doctor"], tmp_path / "b")
    assert lax.returncode == 0 and "no Android NDK found" in lax.stdout
    strict = invoke(["doctor", "--strict"], tmp_path / "b")
    assert strict.returncode == 1 and "Android NDK" in strict.stderr and "problem(s)" in strict.stderr


def test_check_compat_task_exit_code(tmp_path):
    models = make_models_and_manifest(tmp_path / "models")
    from toolchain.records import BUILD_INFO_KIND, BUILD_INFO_SCHEMA, write_record
    from tests.ndk_support import FIXTURE_TREE

    bi = write_record(tmp_path / "bi" / "build-info.json", BUILD_INFO_KIND, BUILD_INFO_SCHEMA,
                      {"lane": "seed-2020", "commit": "c19eb4ad73ebf16c7dc73229729ed95692472f6e", "abi": "arm64-v8a",
                       "source_dir": str(FIXTURE_TREE), "artefacts": []})
    res = invoke(["check-compat", "--models", str(models.parent), "--build-info", str(bi)], tmp_path / "b")
    assert res.returncode == 9, res.stderr
    assert "missing: tiny-quant_none-nnapi.pt: nnapi-method _nnapi.Compilation.init2" in res.stdout
    assert "torchdroid check-compat: compatibility:" in res.stderr


def test_doctor_rows_follow_the_environment(tmp_path):
    old = make_fake_ndk(tmp_path / "ndk18", "18.1.5063045")
    rows = {c.name: c for c in run_doctor(DoctorSettings(env={"ANDROID_NDK": str(old)}, adb_port=held_dead_port()))}
    assert rows["Android NDK"].status == "warn" and "r18b" in rows["Android NDK"].found
    assert "install NDK r26d" in rows["Android NDK"].fix
    cmake = CMake.locate().version or ()  # 3.18-3.25 builds the PyTorch lanes, not ExecuTorch for arm64 (TC1)
    assert rows["git"].status == "ok" and rows["cmake"].status == ("info" if (3, 18) <= cmake < (3, 26) else "ok")
    assert rows["devices"].status == "info" and "not started by doctor" in rows["devices"].found
    assert {c.name for c in problems(list(rows.values()))} >= {"Android NDK", "Android SDK"}
    good = make_fake_ndk(tmp_path / "ndk26", "26.3.11579264")
    rows = {c.name: c for c in run_doctor(DoctorSettings(env={"ANDROID_NDK": str(good)}, adb_port=held_dead_port()))}
    assert rows["Android NDK"].status == "ok"
    seed = {c.name: c for c in run_doctor(DoctorSettings(lane="seed-2020", env={}, adb_port=held_dead_port()))}
    assert seed["host Python for lane seed-2020"].status == "warn"
    assert "pytorch.python" in seed["host Python for lane seed-2020"].fix


def test_build_android_task_reads_its_config_keys_and_resolves_a_tag(tmp_path, fake_pytorch, fake_ndk):
    """pytorch.commit (a tag), pytorch.repo_url, ndk.path, android.abi/api_level/max_jobs from a config file."""
    cfg = tmp_path / "torchdroid.yaml"
    cfg.write_text(f"pytorch:\n  commit: {fake_pytorch.tag}\n  repo_url: {fake_pytorch.url}\n"
                   f"ndk:\n  path: {fake_ndk}\nandroid:\n  abi: x86_64\n  api_level: 27\n  max_jobs: 1\n")
    res = invoke(["-f", str(cfg), "build-android"], tmp_path / "b")
    assert res.returncode == 0, res.stderr
    info = json.loads((tmp_path / "b" / "android" / "x86_64" / "build-info.json").read_text())
    assert info["commit"] == fake_pytorch.pinned and info["requested_ref"] == "refs/tags/v0.1.0"
    assert info["repo_url"] == fake_pytorch.url
    assert info["ndk"]["found_by"] == "config ndk.path"
    assert info["api_level"] == 27 and info["verification"]["api_level"] == 27
    assert info["env"]["MAX_JOBS"] == "1"
    # an unknown tag is a usage error (exit 2) naming the repository
    cfg.write_text(cfg.read_text().replace(fake_pytorch.tag, "v9.9.9"))
    bad = invoke(["-f", str(cfg), "build-android"], tmp_path / "b")
    assert bad.returncode == 2, bad.stderr
    assert "has no tag or branch 'v9.9.9'" in bad.stderr and "Traceback" not in bad.stderr


def test_doctor_lists_attached_devices_and_says_which_are_not_ready(tmp_path):
    """A real adb server with virtual devices speaking the adb protocol."""
    from tests.virtual_device.harness import adb_with_devices

    with adb_with_devices(tmp_path, {"ready": {}, "locked": {"authorized": False}}) as (server, devs):
        ready, locked = devs["ready"].serial, devs["locked"].serial
        row = {c.name: c for c in run_doctor(DoctorSettings(env={}, adb_port=server.port))}["devices"]
        assert row.status == "ok"  # one ready phone is enough
        assert f"{ready} (device)" in row.found and f"{locked} (unauthorized)" in row.found
        assert row.fix.startswith(f"{locked}: unlock the phone and accept the USB debugging prompt")
        server.disconnect(ready)
        rows = {c.name: c for c in run_doctor(DoctorSettings(env={}, adb_port=server.port))}
        assert rows["devices"].status == "warn" and rows["devices"].found == f"{locked} (unauthorized)"
        assert rows["devices"] in problems(list(rows.values())) and rows["adb"].status == "ok"


def test_config_lane_is_used(tmp_path, fake_ndk):
    """pytorch.lane from a config file reaches the checks (seed-2020 refuses this host's Python before fetching)."""
    cfg = tmp_path / "torchdroid.yaml"
    cfg.write_text(f"pytorch:\n  lane: seed-2020\nndk:\n  path: {fake_ndk}\n")
    res = invoke(["-f", str(cfg), "build-android"], tmp_path / "b")
    assert res.returncode == 3, res.stderr
    assert "newer than lane 'seed-2020' accepts (3.6 to 3.8)" in res.stderr
    assert not (tmp_path / "b" / "src").exists()


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_sigterm_to_build_android_stops_every_child_before_it_exits(tmp_path, fake_pytorch, fake_ndk):
    """Issue 34 item 5: SIGTERM while the build script runs a long child: when `invoke build-android` has exited
    (its build lock released with the process), neither the script nor its child is running."""
    import signal
    import subprocess
    import time

    pids_file = tmp_path / "build-pids"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
    env.update(git_test_env())
    env.update({"INVOKE_BUILD_DIR": str(tmp_path / "b"), "CI": "1", "ANDROID_ADB_SERVER_PORT": str(held_dead_port()),
                "TORCHDROID_FIXTURE_LONG_CHILD": str(pids_file)})
    args = ["build-android", "--abi", "x86_64", "--ndk", str(fake_ndk), "--repo-url", fake_pytorch.url,
            "--commit", fake_pytorch.pinned, "--max-jobs", "2", "--api-level", "28"]
    proc = subprocess.Popen([cli.INVOKE, "--search-root", str(ROOT), *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids = []
    try:
        deadline = time.monotonic() + 240
        while not pids_file.is_file():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
            time.sleep(0.2)
        pids = [int(p) for p in pids_file.read_text().split()]
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        left = [p for p in pids if _running(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in pids:  # never leave a test's sleep behind, whatever happened
            if _running(p):
                os.kill(p, signal.SIGKILL)
    assert proc.returncode == 143, (proc.returncode, out[-3000:])
    assert "terminated by SIGTERM" in out, out[-3000:]
    assert left == [], f"still running after the task ended: {left}"
