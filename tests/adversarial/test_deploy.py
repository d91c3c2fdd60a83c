"""Adversarial cases for deploy and report, run as a user would (`invoke deploy ...` from a fresh directory)
against virtual devices on a private adb server: bad serials, ANDROID_SERIAL, unusable devices, tampered and
foreign records, wrong files, a device another run is writing, am start and logcat failures, a 16 KB device,
no results for the report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.adversarial.harness import adversarial, assert_clean, run_invoke, snapshot
from tests.deploy_support.fixtures import build_standin, make_apk, make_inputs
from tests.virtual_device.harness import adb_with_devices

pytestmark = pytest.mark.skipif(shutil.which("adb") is None or shutil.which("aapt") is None,
                                reason="needs adb and aapt (./run test installs them)")
PAGE_16K = 16384


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    return build_standin(tmp_path_factory.mktemp("standin"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One adb server with a device for each behaviour (cases pick theirs with --serial or ANDROID_SERIAL)."""
    devices = {
        "good": {}, "other": {},
        "locked": {"authorized": False}, "hung": {"silent": True},
        "big-pages": {"page_size": PAGE_16K, "props": {"ro.build.version.sdk": "35", "ro.build.version.release": "15"}},
        "am-broken": {"am_error": "java.lang.SecurityException: Permission Denial: starting Intent { cmp=x } from "
                                  "null (pid=4242, uid=2000) not exported from uid 10123"},
        "no-logcat": {"logcat_fail": "logcat: failed to read from log buffer 'main': Permission denied"},
        "app-hangs": {"app_bench": {"hang": True}},
        "app-crashes": {"app_bench": {"crash": True}},
        "hot": {"thermal_status": [0, 3]},
        "slow": {"env": {"SBT_HOLD_MS": "1500"}},
    }
    with adb_with_devices(tmp_path_factory.mktemp("lab"), devices) as (server, devs):
        yield server, devs


def user(tmp_path: Path, standin: Path, **kw):
    """A user's directory with converted models, a built binary, an app-info and its APK where `invoke` looks for
    them by default (build/models would be convert's; INVOKE_* variables point deploy at these)."""
    return make_inputs(tmp_path / "work", standin=standin, modes=("full",), model_size=2000, **kw)


SETTINGS = {"INVOKE_CONVERT_OUT": "models", "INVOKE_DEPLOY_BUILD_INFO": "build/android/arm64-v8a/build-info.json",
            "INVOKE_DEPLOY_APP_DIR": "app", "INVOKE_DEPLOY_ITER": "5", "INVOKE_DEPLOY_REPEAT": "1",
            "INVOKE_DEPLOY_WARMUP": "1", "INVOKE_DEPLOY_APP_WAIT": "3"}


def env_for(server, **extra):
    return {"ANDROID_ADB_SERVER_PORT": str(server.port), **SETTINGS, **extra}


def deploy(tmp_path, server, *args, env=None):
    return run_invoke(["deploy", *args], tmp_path / "work", env_for(server, **(env or {})), timeout=300)


@adversarial("deploy", "bad value: a serial no adb server knows")
def test_unknown_serial(tmp_path, standin, lab):
    server, _ = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", "no-such-phone")
    assert_clean(out, "device", mentions=["no device no-such-phone", "adb devices"], root=tmp_path)


@adversarial("deploy", "bad value from the environment: ANDROID_SERIAL names no device")
def test_android_serial_unknown(tmp_path, standin, lab):
    server, _ = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, env={"ANDROID_SERIAL": "ghost-42"})
    assert_clean(out, "device", mentions=["no device ghost-42", "ANDROID_SERIAL"], root=tmp_path)


@adversarial("deploy", "environment: ANDROID_SERIAL picks the one device (adb's convention)")
def test_android_serial_is_honoured(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--no-install", env={"ANDROID_SERIAL": devs["good"].serial})
    assert_clean(out, "ok", root=tmp_path)
    assert devs["good"].serial in out.out and devs["other"].serial not in out.text


@adversarial("deploy", "device state: unauthorized (the USB debugging prompt was never accepted)")
def test_unauthorized_device_is_a_failed_row(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["locked"].serial)
    assert_clean(out, "device", mentions=["unauthorized", "Allow USB debugging"], root=tmp_path)
    data = json.loads((tmp_path / "work" / "build" / "results" / "latest.json").read_text())
    (row,) = data["results"]
    assert row["status"] == "failed" and row["serial"] == devs["locked"].serial and "unauthorized" in row["reason"]


@adversarial("deploy", "device state: offline (adbd does not answer)")
def test_offline_device(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["hung"].serial)
    assert_clean(out, "device", mentions=["offline", "reconnect"], root=tmp_path)


@adversarial("deploy", "tampered record: the binary changed after build-android recorded its hash")
def test_tampered_build_info_is_refused(tmp_path, standin, lab):
    server, devs = lab
    inp = user(tmp_path, standin)
    inp.binary.write_bytes(inp.binary.read_bytes() + b"\0patched")
    kept = snapshot([tmp_path / "work"])
    out = deploy(tmp_path, server, "--serial", devs["good"].serial)
    assert_clean(out, "record", mentions=["no longer matches its build-info", "invoke build-android"], kept=kept,
                 root=tmp_path)
    assert not devs["good"].path("/data/local/tmp/torchdroid/work/speed_benchmark_torch").exists() or \
        devs["good"].path("/data/local/tmp/torchdroid/work/speed_benchmark_torch").read_bytes() != \
        inp.binary.read_bytes()


@adversarial("deploy", "foreign record: build-info.json written by something else")
def test_foreign_build_info(tmp_path, standin, lab):
    server, devs = lab
    inp = user(tmp_path, standin)
    inp.build_info.write_text(json.dumps({"kind": "something-else", "abi": "arm64-v8a"}))
    out = deploy(tmp_path, server, "--serial", devs["good"].serial)
    assert_clean(out, "record", mentions=["is not a torchdroid.build-info record"], root=tmp_path)


@adversarial("deploy", "wrong file: --binary is not an executable")
def test_binary_not_elf(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    (tmp_path / "work" / "notes.txt").write_text("hello")
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--binary", "notes.txt")
    assert_clean(out, "usage", mentions=["is not an ELF executable"], root=tmp_path)


@adversarial("deploy", "wrong file: --apk is not an APK")
def test_apk_not_a_zip(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    (tmp_path / "work" / "photo.apk").write_bytes(b"\x89PNG not an apk")
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--apk", "photo.apk")
    assert_clean(out, "usage", mentions=["is not an APK", "--apk"], root=tmp_path)


@adversarial("deploy", "another app: an APK with no launchable activity installs, with or without --no-app-bench")
def test_apk_without_launcher(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    make_apk(tmp_path / "work" / "service.apk", package="org.example.service", launcher=False, contract=None)
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--apk", "service.apk", "--no-app-bench")
    assert_clean(out, "ok", root=tmp_path)
    assert (devs["good"].state_dir / "packages" / "org.example.service").is_dir()
    assert "--no-app-bench" not in out.text  # no message recommends what was just tried
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--apk", "service.apk")
    assert_clean(out, "ok", mentions=["in-app benchmark skipped", "org.example.service does not declare"],
                 root=tmp_path)
    assert "--no-app-bench" not in out.text


@adversarial("deploy", "another app: a launchable APK not made by make-app is installed, not waited on")
def test_foreign_app_is_installed_and_not_benchmarked(tmp_path, standin, lab):
    """Before: am start with the benchmark extras, then 2 x app_wait (60 s by default) for lines it never logs."""
    server, devs = lab
    user(tmp_path, standin)
    make_apk(tmp_path / "work" / "THEIR.apk", package="com.example.theirs", activity="com.example.theirs.Home",
             contract=None)
    dev = devs["other"]
    t0 = time.monotonic()
    out = deploy(tmp_path, server, "--serial", dev.serial, "--apk", "THEIR.apk",
                 env={"INVOKE_DEPLOY_APP_WAIT": "60"})  # the default: a wait would show as minutes
    took = time.monotonic() - t0
    assert_clean(out, "ok", mentions=["in-app benchmark skipped", "com.example.theirs does not declare",
                                      "org.torchdroid.benchmark"], root=tmp_path)
    assert (dev.state_dir / "packages" / "com.example.theirs").is_dir()
    log = (dev.state_dir / "device.log").read_text()
    assert "pm install" in log  # installed ...
    assert not [ln for ln in log.splitlines() if "am start" in ln and "com.example.theirs" in ln]  # ... not launched
    assert took < 20, f"{took:.0f}s"
    data = json.loads((tmp_path / "work" / "build" / "results" / "latest.json").read_text())
    app_rows = [r for r in data["results"] if r["source"] == "app"]
    assert [(r["status"], r["stem"], r["model_file"]) for r in app_rows] == [
        ("skipped", "com.example.theirs", "com.example.theirs (app)")]
    assert "does not declare" in app_rows[0]["reason"]


@adversarial("deploy", "bad value: --apk that does not exist")
def test_apk_missing(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--apk", "gone.apk")
    assert_clean(out, "usage", mentions=["gone.apk does not exist"], root=tmp_path)


@adversarial("deploy", "another app: --apk of another package is installed and launched as itself")
def test_other_apk_is_launched_by_its_own_names(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    make_apk(tmp_path / "work" / "OTHER.apk", package="com.example.other", activity="com.example.other.Start",
             variant="quant_core")
    out = deploy(tmp_path, server, "--serial", devs["other"].serial, "--apk", "OTHER.apk")
    assert_clean(out, "ok", root=tmp_path)
    assert "installed" in out.out and (devs["other"].state_dir / "packages" / "com.example.other").is_dir()
    log = (devs["other"].state_dir / "device.log").read_text()
    assert "am start -S -W -n com.example.other/com.example.other.Start" in log
    data = json.loads((tmp_path / "work" / "build" / "results" / "latest.json").read_text())
    app_rows = [r for r in data["results"] if r["source"] == "app"]
    assert app_rows and all(r["variant"] == "quant_core" and r["status"] == "ok" for r in app_rows)


@adversarial("deploy", "device fault: am start refuses to start the activity")
def test_am_start_error_ends_the_app_benchmark_at_once(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    t0 = time.monotonic()
    out = deploy(tmp_path, server, "--serial", devs["am-broken"].serial)
    assert_clean(out, "device", mentions=["am start", "SecurityException", "benchmark(s) failed"], root=tmp_path)
    assert time.monotonic() - t0 < 60


@adversarial("deploy", "device fault: logcat cannot be read")
def test_logcat_failure_ends_the_app_benchmark_at_once(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["no-logcat"].serial)
    assert_clean(out, "device", mentions=["logcat", "Permission denied"], root=tmp_path)
    data = json.loads((tmp_path / "work" / "build" / "results" / "latest.json").read_text())
    app = [r for r in data["results"] if r["source"] == "app"]
    assert len(app) == 1 and app[0]["status"] == "failed"  # not retried with the next backend


@pytest.mark.slow
@adversarial("deploy", "app fault: the app stops reporting progress")
def test_app_that_hangs_fails_after_the_scaled_wait(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["app-hangs"].serial, "--no-bench")
    assert_clean(out, "device", mentions=["no progress", "logcat -s torchdroid"], root=tmp_path)


@adversarial("deploy", "app fault: the app crashes during its benchmark")
def test_app_crash_is_named(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["app-crashes"].serial, "--no-bench")
    assert_clean(out, "device", mentions=["the app crashed", "OutOfMemoryError"], root=tmp_path)


@adversarial("deploy", "device: 16 KB pages and a 4 KB-aligned binary")
def test_sixteen_kb_device_refuses_a_4k_binary(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["big-pages"].serial, "--no-install")
    assert_clean(out, "device", mentions=["16 KB memory pages", "max-page-size=16384", "readelf -lW"], root=tmp_path)
    assert not devs["big-pages"].path("/data/local/tmp/torchdroid/work/speed_benchmark_torch").exists()


@adversarial("deploy", "device: 16 KB pages and a binary linked for them")
def test_sixteen_kb_device_runs_an_aligned_binary(tmp_path, standin, lab):
    server, devs = lab
    src = Path(__file__).resolve().parents[1] / "deploy_support" / "speed_benchmark_standin.c"
    aligned = tmp_path / "aligned" / "speed_benchmark_torch"
    aligned.parent.mkdir()
    subprocess.run(["gcc", "-O1", "-Wl,-z,max-page-size=16384", "-o", str(aligned), str(src)], check=True)
    user(tmp_path, aligned)
    out = deploy(tmp_path, server, "--serial", devs["big-pages"].serial, "--no-install")
    assert_clean(out, "ok", root=tmp_path)
    assert "deprecates NNAPI" in out.out  # SDK 35: NNAPI numbers are marked
    data = json.loads((tmp_path / "work" / "build" / "results" / "latest.json").read_text())
    nnapi = [r for r in data["results"] if r["backend"] == "nnapi"]
    assert nnapi and all("nnapi-deprecated" in r["flags"] for r in nnapi)


@adversarial("deploy", "wrong file: an APK that needs a newer Android than the device's")
def test_apk_for_a_newer_android(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    make_apk(tmp_path / "work" / "new.apk", package="org.example.newer", min_sdk=34)
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--apk", "new.apk")
    assert_clean(out, "device", mentions=["INSTALL_FAILED_OLDER_SDK", "min_sdk"], root=tmp_path)
    assert not (devs["good"].state_dir / "packages" / "org.example.newer").exists()


@adversarial("deploy", "app: the launchable activity is another than .MainActivity")
def test_app_with_its_own_activity_name(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    make_apk(tmp_path / "work" / "renamed.apk", package="org.example.renamed", activity="org.example.ui.Launcher")
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--apk", "renamed.apk", "--no-bench")
    assert_clean(out, "ok", root=tmp_path)
    log = (devs["good"].state_dir / "device.log").read_text()
    assert "am start -S -W -n org.example.renamed/org.example.ui.Launcher" in log
    assert "org.example.renamed/.MainActivity" not in log


def test_the_virtual_am_refuses_an_activity_the_apk_does_not_declare(tmp_path, lab):
    """The fixture fails where Android would: a component that is not in the installed APK."""
    server, devs = lab
    apk = make_apk(tmp_path / "a.apk", package="org.example.fixture", activity=".Real")
    assert server.adb("-s", devs["other"].serial, "push", str(apk), "/data/local/tmp/a.apk").returncode == 0
    assert "Success" in server.adb("-s", devs["other"].serial, "shell", "pm install -r /data/local/tmp/a.apk").stdout
    bad = server.adb("-s", devs["other"].serial, "shell", "am start -W -n org.example.fixture/.Missing").stdout
    assert "Error type 3" in bad and "Activity class {org.example.fixture/org.example.fixture.Missing} does not exist" in bad
    good = server.adb("-s", devs["other"].serial, "shell", "am start -W -n org.example.fixture/.Real").stdout
    assert "Status: ok" in good


def test_the_virtual_am_only_brings_a_running_task_to_the_front_without_force_stop(tmp_path, lab):
    """The fixture fails where Android would: a second `am start` of the same component while the app's task
    is alive starts nothing (the new extras are lost) unless -S force-stops the app first (docs/facts.md D8)."""
    server, devs = lab
    serial = devs["other"].serial
    apk = make_apk(tmp_path / "a.apk", package="org.example.task", activity=".Main")
    assert server.adb("-s", serial, "push", str(apk), "/data/local/tmp/t.apk").returncode == 0
    assert "Success" in server.adb("-s", serial, "shell", "pm install -r /data/local/tmp/t.apk").stdout
    start = "am start -W -n org.example.task/.Main --es backend {}"
    assert "Status: ok" in server.adb("-s", serial, "shell", start.format("cpu")).stdout
    again = server.adb("-s", serial, "shell", start.format("nnapi")).stdout
    assert "Warning: Activity not started, its current task has been brought to the front" in again
    assert "Status: ok" not in again
    forced = server.adb("-s", serial, "shell", start.replace("am start", "am start -S").format("nnapi")).stdout
    assert "Status: ok" in forced


@adversarial("deploy", "concurrency: another run holds the device directory")
def test_busy_device_directory(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    holder = subprocess.Popen(["sleep", "120"])
    try:
        lock = devs["good"].path("/data/local/tmp/torchdroid/.work.torchdroid-lock")
        lock.mkdir(parents=True)
        (lock / "owner").write_text(f"{holder.pid} {os.uname().nodename.split('.')[0]} {time.time():.0f} x\n")
        out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--no-install")
        assert_clean(out, "device", mentions=[f"busy: another torchdroid run (pid {holder.pid}", "--project"],
                     root=tmp_path)
        assert lock.is_dir()  # someone else's lock is left alone
    finally:
        holder.kill()
        holder.wait()
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--no-install")  # its owner is gone: stale
    assert_clean(out, "ok", root=tmp_path)
    assert not lock.exists()


@adversarial("deploy", "concurrency: another project's run holds the phone")
def test_another_project_on_the_phone_is_named_and_waited_for(tmp_path, standin, lab):
    """Issue 34 item 4: two projects (two device directories) on one phone: the second refuses, naming the run
    that holds the phone (project, pid, host); once that run is gone its lock is stale and taken over."""
    from deploy.lock import PHONE_LOCK

    server, devs = lab
    user(tmp_path, standin)
    holder = subprocess.Popen(["sleep", "120"])
    lock = devs["other"].path(PHONE_LOCK)
    try:
        lock.mkdir(parents=True)
        (lock / "owner").write_text(f"{holder.pid} {os.uname().nodename.split('.')[0]} {time.time():.0f} x "
                                    "someone-elses\n")
        out = deploy(tmp_path, server, "--serial", devs["other"].serial, "--no-install", "--project", "mine")
        assert_clean(out, "device", mentions=[f"busy: another torchdroid run (project someone-elses, pid {holder.pid}",
                                              "is using the phone", "wait for it"], root=tmp_path)
        assert lock.is_dir()  # someone else's lock is left alone
    finally:
        holder.kill()
        holder.wait()
    out = deploy(tmp_path, server, "--serial", devs["other"].serial, "--no-install", "--project", "mine")
    assert_clean(out, "ok", root=tmp_path)
    assert not lock.exists()


@adversarial("deploy", "phone state: an earlier run's link dropped with a phone setting changed")
def test_a_setting_a_dropped_run_left_changed_is_put_back_first(tmp_path, standin, lab):
    """Issue 34 item 4: what a placement probe cut off without its trap leaves (tests/unit/test_nnapi_log.py): the
    probe's debug.nn.vlog on the phone, the user's value in the saved-settings file.  The next deploy (here one
    that reads no placements at all) puts the user's value back before anything else and says so."""
    from deploy.environment import SAVED_DIR

    server, devs = lab
    user(tmp_path, standin)
    dev = devs["other"]
    props = dev.state_dir / "props.txt"
    kept = props.read_text()
    saved = dev.path(f"{SAVED_DIR}/debug.nn.vlog")
    try:
        props.write_text("".join(line + "\n" for line in kept.splitlines() if "[debug.nn.vlog]" not in line)
                         + "[debug.nn.vlog]: [compilation,manager]\n")
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text("model\n")
        out = deploy(tmp_path, server, "--serial", dev.serial, "--no-install", "--no-hardware")
        assert_clean(out, "ok", root=tmp_path)
        assert "[debug.nn.vlog]: [model]" in props.read_text()
        assert not saved.exists()
        assert "debug.nn.vlog put back to 'model'" in out.text, out.text[-3000:]
    finally:
        props.write_text(kept)


@pytest.mark.slow
@adversarial("deploy", "concurrency: two deploys to one device at once")
def test_two_deploys_at_once_one_is_busy(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    env = {"ANDROID_SERIAL": devs["slow"].serial}
    from tests.adversarial.harness import INVOKE, ROOT, clean_env

    argv = [INVOKE, "--search-root", str(ROOT), "deploy", "--no-install", "--repeat", "1"]
    procs = [subprocess.Popen(argv, cwd=tmp_path / "work", env=clean_env(env_for(server, **env)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outs = [(p.wait(300), p.stdout.read()) for p in procs]
    for p in procs:
        p.stdout.close()
    codes = sorted(c for c, _ in outs)
    text = "".join(o for _, o in outs)
    assert codes == [0, 2], text  # the second is refused at the build directory's lock (issue 34 item 2)
    assert "busy: another torchdroid run (invoke deploy pid" in text and "Traceback" not in text


@adversarial("deploy", "nonsense option: zero iterations")
def test_zero_iterations_never_stores_rows(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--iter", "0")
    assert out.code == 2, out.text
    assert_clean(out, "usage", mentions=["iter"], root=tmp_path)
    assert not (tmp_path / "work" / "build" / "results" / "results.sqlite").exists()


@adversarial("deploy", "nothing to deploy: no binary, no APK, no models")
def test_nothing_to_deploy(tmp_path, lab):
    server, _ = lab
    (tmp_path / "work").mkdir()
    out = deploy(tmp_path, server)
    assert_clean(out, "usage", mentions=["nothing to deploy", "invoke build-android"], root=tmp_path)


@adversarial("deploy", "environment: the device heats up (thermal status severe after the run)")
def test_throttling_is_warned_and_recorded(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["hot"].serial, "--no-install")
    assert_clean(out, "ok", root=tmp_path)
    assert "WARNING: thermal status severe after the benchmark: the device throttled" in out.out
    data = json.loads((tmp_path / "work" / "build" / "results" / "latest.json").read_text())
    assert all("throttled" in r["flags"] for r in data["results"] if r["status"] == "ok")
    (dev,) = data["devices"]
    assert dev["before"]["thermal_status"] == 0 and dev["after"]["thermal_status"] == 3 and dev["throttled"]


@adversarial("report", "no results: report before any deploy")
def test_report_without_results(tmp_path):
    (tmp_path / "work").mkdir()
    out = run_invoke(["report"], tmp_path / "work")
    assert_clean(out, "record", mentions=["no results database", "invoke deploy"], root=tmp_path)


@adversarial("report", "foreign file: results.sqlite is not a database")
def test_report_foreign_database(tmp_path):
    res = tmp_path / "work" / "build" / "results"
    res.mkdir(parents=True)
    (res / "results.sqlite").write_text("my notes, not a database " * 20)
    kept = snapshot([res])
    out = run_invoke(["report"], tmp_path / "work")
    assert_clean(out, "record", mentions=["is not a torchdroid results database"], kept=kept, root=tmp_path)


@adversarial("report", "bad value: a run id that does not exist")
def test_report_unknown_run(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    assert deploy(tmp_path, server, "--serial", devs["good"].serial, "--no-install").code == 0
    out = run_invoke(["report", "--run", "99"], tmp_path / "work")
    assert_clean(out, "record", mentions=["no results for run 99", "pick one of: 1"], root=tmp_path)


@adversarial("report", "only failures: a run where every device failed is drawn with the reasons")
def test_report_of_a_run_that_only_failed(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    assert deploy(tmp_path, server, "--serial", devs["locked"].serial).code == 7
    out = run_invoke(["report"], tmp_path / "work")
    assert_clean(out, "ok", root=tmp_path)
    page = (tmp_path / "work" / "build" / "results" / "report-run-0001.html").read_text()
    assert "Failed and skipped (1)" in page and "unauthorized" in page and devs["locked"].serial in page


@adversarial("report", "bad value: a source with no rows in the run")
def test_report_source_without_rows(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    assert deploy(tmp_path, server, "--serial", devs["good"].serial, "--no-install").code == 0
    out = run_invoke(["report", "--source", "app"], tmp_path / "work")
    assert_clean(out, "record", mentions=["no app benchmarks to draw", "--source binary"], root=tmp_path)


@adversarial("deploy", "bad value: a negative cool-down")
def test_negative_cooldown(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--cooldown", "-1")
    assert_clean(out, "usage", mentions=["--cooldown", "at least 0"], root=tmp_path)


def test_cooldown_waits_between_models(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    t0 = time.monotonic()
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--no-install", "--cooldown", "2")
    assert_clean(out, "ok", root=tmp_path)
    # two models: one pause between them, none before the first (a device's status: in the run log; the console of
    # a pipe shows a device's first status, its outcome and a line per 30 s)
    log = "".join(p.read_text() for p in (tmp_path / "work" / "build" / "logs").glob("deploy-*.log"))
    assert log.count("cooling down 2s") == 1, log[-3000:]
    assert time.monotonic() - t0 >= 2


@adversarial("deploy", "foreign file: a file stands where the device directory should be created")
def test_device_directory_that_cannot_be_created(tmp_path, standin, lab):
    """The lock is taken in the probe's round trip: when its directory cannot be made, the device fails with
    the command and the remedy (as a lock taken on its own did), and the foreign file stays as it was."""
    server, devs = lab
    user(tmp_path, standin)
    blocker = devs["good"].path("/data/local/tmp/td-blocked")
    blocker.write_text("someone else's file\n")
    try:
        out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--no-install",
                     env={"INVOKE_DEPLOY_DEVICE_DIR": "/data/local/tmp/td-blocked/sub"})
        assert_clean(out, "device", mentions=["taking the device directory's lock failed", "ls -ld"], root=tmp_path)
        assert blocker.read_text() == "someone else's file\n"
    finally:
        blocker.unlink()


@adversarial("deploy", "checked too late: a bundled-input index the models do not have (every model bundles one)")
def test_a_bundled_input_index_beyond_the_models_is_refused_before_device_work(tmp_path, standin, lab):
    server, devs = lab
    user(tmp_path, standin)
    before = sorted(p.relative_to(devs["good"].root) for p in devs["good"].root.rglob("*"))
    out = deploy(tmp_path, server, "--serial", devs["good"].serial, "--bundled-input", "3")
    assert_clean(out, "usage", mentions=["--bundled-input", "3", "one bundled input"], root=tmp_path)
    after = sorted(p.relative_to(devs["good"].root) for p in devs["good"].root.rglob("*"))
    assert after == before, "deploy pushed to the phone before refusing the index"
