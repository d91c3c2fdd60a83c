"""Devices that are not ready or not suitable, crashes, interrupted pushes, install failures, gatord."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from deploy import BenchOptions, DeploySettings, deploy
from tests.deploy_support.fixtures import APP_ID, make_apk, make_inputs, write_app_info
from tests.virtual_device.harness import adb_with_devices
from toolchain.errors import ToolNotFound
from toolchain.fsutil import sha256_file

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

HERE = Path(__file__).resolve().parent
DEVICE_DIR = "/data/local/tmp/torchdroid/t"


def settings(inp, tmp_path, port, **kw) -> DeploySettings:
    base = dict(models=inp.models, results=tmp_path / "results", build_info=inp.build_info, app_dir=inp.app_dir,
                adb_port=port, project="t", options=BenchOptions(iters=20, repeat=2), app_wait=10, timeout=30)
    base.update(kw)
    return DeploySettings(**base)


def by_serial(result):
    return {d.serial: d for d in result.devices}


def test_unsuitable_devices_and_a_crash_do_not_stop_the_others(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin)
    devices = {
        "locked": {"authorized": False},
        "hung": {"silent": True},
        "x86": {"props": {"ro.product.cpu.abilist": "x86_64,x86", "ro.product.model": "Emulator x86_64"}},
        "oreo": {"props": {"ro.build.version.sdk": "28", "ro.build.version.release": "9"}},
        "crashy": {"env": {"SBT_CRASH": "quant_full-nnapi", "SBT_GARBAGE": "quant_none-nnapi"}},
    }
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        result = deploy(settings(inp, tmp_path, server.port))
    got = by_serial(result)

    locked = got[devs["locked"].serial]
    assert len(locked.errors) == 1 and "'unauthorized'" in locked.errors[0]
    assert "Allow USB debugging" in locked.errors[0]

    hung = got[devs["hung"].serial]
    assert "'offline'" in hung.errors[0] and "adb reconnect offline" in hung.errors[0]

    x86 = got[devs["x86"].serial]
    assert "cannot run a arm64-v8a binary" in x86.errors[0]
    assert "x86_64,x86" in x86.errors[0] and "invoke build-android --abi x86_64" in x86.errors[0]
    assert x86.pushed_files == 0 and not devs["x86"].path(DEVICE_DIR).exists()

    # SDK 28: NNAPI models are neither pushed nor run, with the reason; CPU models are benchmarked
    oreo = got[devs["oreo"].serial]
    assert not oreo.errors
    rows = {(r.backend, r.mode, r.source): r for r in oreo.rows}
    assert rows[("cpu", "none", "binary")].status == "ok" and rows[("cpu", "full", "binary")].status == "ok"
    assert rows[("nnapi", "full", "binary")].status == "skipped"
    assert "SDK 28" in rows[("nnapi", "full", "binary")].reason and "Android 10" in rows[("nnapi", "full", "binary")].reason
    assert not devs["oreo"].path(f"{DEVICE_DIR}/mobilenetv2-quant_full-nnapi.pt").exists()
    assert ("nnapi", "full", "app") not in rows and rows[("cpu", "full", "app")].status == "ok"

    # a crash (SIGSEGV) and an unparseable run are recorded with their output; the other models went on
    crashy = got[devs["crashy"].serial]
    rows = {(r.backend, r.mode): r for r in crashy.rows if r.source == "binary"}
    crash = rows[("nnapi", "full")]
    assert crash.status == "failed" and "exit code 139" in crash.reason and "SIGSEGV" in crash.reason
    assert "Main runs." in crash.output_tail
    garbage = rows[("nnapi", "none")]
    assert garbage.status == "failed" and "no latency in the output" in garbage.reason
    assert "nothing measured" in garbage.output_tail
    assert rows[("cpu", "none")].status == "ok" and rows[("cpu", "full")].status == "ok"
    assert rows[("cpu", "full")].samples == 40
    assert not crashy.errors  # a failing benchmark is a result, not a device failure
    assert len(result.failed) == 3
    assert result.run_id == 1


def test_interrupted_push_leaves_no_final_file_and_the_next_deploy_completes_it(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin, model_size=600_000)
    cut = {"match": "quant_full-cpu", "after": 300_000, "times": 1}
    with adb_with_devices(tmp_path / "adb", {"d": {"cut_send": cut}}) as (server, devs):
        dev = devs["d"]
        s = settings(inp, tmp_path, server.port, bench=False, install=False)
        first = deploy(s)
        (rep,) = first.devices
        assert len(rep.errors) == 1 and "was interrupted" in rep.errors[0]
        assert "run `invoke deploy` again" in rep.errors[0]
        d = dev.path(DEVICE_DIR)
        final = d / "mobilenetv2-quant_full-cpu.pt"
        assert not final.exists()
        partial = [p for p in os.listdir(d) if p.startswith(".mobilenetv2-quant_full-cpu.pt.partial-")]
        assert partial and (d / partial[0]).stat().st_size >= 300_000  # the half-written data exists, renamed never
        done_before = sorted(p for p in os.listdir(d) if not p.startswith("."))

        # the transport dropped; the server reconnects a TCP device (or we do), then deploy again
        deadline = time.monotonic() + 20
        while server.states().get(dev.serial) != "device" and time.monotonic() < deadline:
            server.adb("connect", dev.serial)
            time.sleep(0.3)
        second = deploy(s)
        (rep2,) = second.devices
        assert not rep2.errors, rep2.errors
        # four models (--no-bench pushes no binary). A verify+rename the device had already started when the
        # connection dropped may still finish on the device after the first deploy returned (as on a phone):
        # so at least what was final then is skipped, and at least the cut file and the one after it are pushed
        assert rep2.skipped_files + rep2.pushed_files == 4
        assert rep2.skipped_files >= len(done_before) and rep2.pushed_files >= 2
        assert rep2.pushed_bytes == 600_000 * rep2.pushed_files
        for f in inp.models.glob("*.pt"):
            assert sha256_file(d / f.name) == sha256_file(f)
        assert not [p for p in os.listdir(d) if ".partial-" in p]


def test_install_failure_is_mapped_and_nothing_is_uninstalled(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin, modes=("full",))
    with adb_with_devices(tmp_path / "adb", {"d": {}, "full": {"free_kb": 300}}) as (server, devs):
        s = settings(inp, tmp_path, server.port, serials=(devs["d"].serial,), app_bench=False)
        assert not deploy(s).failed
        installed = devs["d"].state_dir / "packages" / APP_ID / "base.apk"
        assert sha256_file(installed) == sha256_file(inp.apk)

        # the same package signed with another key: refused, explained, the installed app left alone
        other = make_apk(tmp_path / "other" / "app-debug.apk", signer=b"someone-else's key")
        write_app_info(inp.app_dir, other)
        (rep,) = deploy(s).devices
        (err,) = rep.errors
        assert "INSTALL_FAILED_UPDATE_INCOMPATIBLE" in err
        assert "signed with another key" in err
        assert f"adb -s {devs['d'].serial} uninstall {APP_ID}" in err and "deletes its data" in err
        assert sha256_file(installed) == sha256_file(inp.apk)
        assert not any("uninstall" in line for line in (devs["d"].state_dir / "device.log").read_text().splitlines())
        assert all(r.status == "ok" for r in rep.rows if r.source == "binary")  # the binary benchmarks still ran
        (app,) = [r for r in rep.rows if r.source == "app"]  # and the app's failure is a row with its reason
        assert app.status == "failed" and "install failed" in app.reason and "UPDATE_INCOMPATIBLE" in app.reason

        # not enough room: stop before pushing anything
        (rep,) = deploy(settings(inp, tmp_path, server.port, serials=(devs["full"].serial,))).devices
        assert "MB free" in rep.errors[0] and "free space on the phone" in rep.errors[0]
        assert not devs["full"].path(DEVICE_DIR).exists()


def test_benchmark_under_gatord(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin, modes=("core",))
    gatord = HERE.parent / "deploy_support" / "gatord_standin.sh"
    opts = BenchOptions(iters=10, repeat=1, gatord=True, caching_allocator=True)
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        result = deploy(settings(inp, tmp_path, server.port, gatord=gatord, options=opts, install=False))
        calls = devs["d"].path(f"{DEVICE_DIR}/gatord-invocations.log").read_text().splitlines()
    assert not result.failed
    assert [r.status for r in result.rows] == ["ok", "ok"]
    # per model: the cold start (--warmup=0 --iter=1+warmup) and the timed run, both under gatord
    assert len(calls) == 4 and all(c.startswith("--app ./speed_benchmark_torch --model=./mobilenetv2-quant_core-")
                                   for c in calls)
    cpu = [c for c in calls if "-cpu.pt" in c]
    assert all("--use_caching_allocator=true" in c for c in cpu) and len(cpu) == 2
    assert not any("--use_caching_allocator" in c for c in calls if "-nnapi.pt" in c)


def test_no_adb_server_says_how_to_start_one(tmp_path, standin):
    from tests.virtual_device.harness import dead_port

    inp = make_inputs(tmp_path / "in", standin=standin, modes=("none",))
    with dead_port() as port, pytest.raises(ToolNotFound) as e:
        deploy(settings(inp, tmp_path, port))
    assert "no adb server answers on 127.0.0.1:" in str(e.value) and "adb start-server" in str(e.value)


def test_changed_or_damaged_files_on_the_device_are_repushed_and_modes_fixed(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin, modes=("none",))
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        s = settings(inp, tmp_path, server.port, install=False, bench=True,
                     options=BenchOptions(iters=5, repeat=1))
        (first,) = deploy(s).devices
        assert first.pushed_files == 3 and not first.errors
        d = devs["d"].path(DEVICE_DIR)
        model = d / "mobilenetv2-quant_none-cpu.pt"
        model.write_bytes(b"someone pushed another file here")  # new size and mtime: the index no longer vouches
        os.chmod(d / "speed_benchmark_torch", 0o600)
        (again,) = deploy(s).devices
        assert not again.errors
        assert (again.pushed_files, again.skipped_files) == (1, 2)
        assert sha256_file(model) == sha256_file(inp.models / model.name)
        assert (d / "speed_benchmark_torch").stat().st_mode & 0o777 == 0o755
        assert all(r.status == "ok" for r in again.rows)
