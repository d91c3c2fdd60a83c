"""`invoke deploy` options and config keys through the CLI: --serial, --variant, --binary, --apk, a config
file with deploy.adb_port/serials/iter, and devices deployed in parallel (overlapping benchmark runs)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.deploy_support.fixtures import APP_ID, make_apk, make_inputs
from tests.deploy_support.fixtures import invoke_cli as invoke
from tests.virtual_device.harness import adb_with_devices, dead_port
from toolchain.fsutil import sha256_file

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

ROOT = Path(__file__).resolve().parents[2]
DEVICE_DIR = "/data/local/tmp/torchdroid/opts"


def test_serial_variant_binary_apk_and_parallel_devices(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin, modes=("none", "core", "full"))
    # --binary: another file than the build-info's (same program, different bytes)
    own_binary = tmp_path / "mine" / "speed_benchmark_torch"
    own_binary.parent.mkdir()
    own_binary.write_bytes(standin.read_bytes() + b"\0" * 64)
    own_apk = make_apk(tmp_path / "mine" / "other.apk", variant="quant_none", abis=("x86_64",), size=50_000)
    traces = {n: tmp_path / f"trace-{n}.txt" for n in ("a", "b")}
    hold = {"SBT_HOLD_MS": "400"}
    # --binary's ABI comes from its ELF header (this host's x86_64): the devices are x86_64 emulators
    x86 = {"ro.product.cpu.abilist": "x86_64,x86", "ro.product.model": "Emulator x86_64"}
    devices = {"a": {"props": x86, "env": {**hold, "SBT_TRACE": str(traces["a"])}},
               "b": {"props": x86, "env": {**hold, "SBT_TRACE": str(traces["b"])}},
               "left-alone": {"props": x86}}
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        a, b = devs["a"].serial, devs["b"].serial
        r = invoke(tmp_path, "deploy", "--serial", a, "--serial", b, "--variant", "quant_none", "--variant",
                   "quant_full", "--models", str(inp.models), "--build-info", str(inp.build_info),
                   "--binary", str(own_binary), "--app", str(inp.app_dir), "--apk", str(own_apk), "--no-app-bench",
                   "--project", "opts", "--iter", "5", "--repeat", "1", "--results", str(tmp_path / "res"),
                   port=server.port)
        assert r.returncode == 0, r.stdout + r.stderr
        # a progress line per device (plain lines when not on a terminal), each ending in "done"
        for serial in (a, b):
            assert f"[{serial}] checking" in r.stderr and f"[{serial}] done" in r.stderr, r.stderr
        # the device not named with --serial was not touched
        assert not devs["left-alone"].path(DEVICE_DIR).exists()
        assert devs["left-alone"].serial not in r.stdout
        for name in ("a", "b"):
            d = devs[name].path(DEVICE_DIR)
            assert sha256_file(d / "speed_benchmark_torch") == sha256_file(own_binary)
            assert sorted(p.name for p in d.glob("*.pt")) == [
                "mobilenetv2-quant_full-cpu.pt", "mobilenetv2-quant_full-nnapi.pt",
                "mobilenetv2-quant_none-cpu.pt", "mobilenetv2-quant_none-nnapi.pt"]
            assert sha256_file(devs[name].state_dir / "packages" / APP_ID / "base.apk") == sha256_file(own_apk)

    # one worker per device: the two devices' benchmark runs overlap in time (serially they could not)
    spans = {n: [tuple(int(x) for x in line.split()[:2]) for line in t.read_text().splitlines()]
             for n, t in traces.items()}
    # per model: one cold start + the timed run; per NNAPI model one more run with NNAPI's placement log on
    assert len(spans["a"]) == len(spans["b"]) == 10
    a_start, a_end = min(s for s, _ in spans["a"]), max(e for _, e in spans["a"])
    b_start, b_end = min(s for s, _ in spans["b"]), max(e for _, e in spans["b"])
    assert a_start < b_end and b_start < a_end, spans

    con = sqlite3.connect(tmp_path / "res" / "results.sqlite")
    rows = con.execute("SELECT serial, mode, backend, status, samples FROM results").fetchall()
    con.close()
    assert sorted({r[0] for r in rows}) == sorted([a, b])
    assert sorted({r[1] for r in rows}) == ["full", "none"]
    assert len(rows) == 8 and all(r[3] == "ok" and r[4] == 5 for r in rows)


def test_config_file_keys_and_an_unknown_serial(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin, modes=("none",))
    with dead_port() as dead:  # ANDROID_ADB_SERVER_PORT points there: nothing answers
        with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
            serial = devs["d"].serial
            cfg = {"deploy": {"adb_port": server.port, "iter": 7, "repeat": 1, "warmup": 2, "serials": ["127.0.0.1:1"],
                              "bundled_input": -1,
                              "results": str(tmp_path / "res"), "project": "opts", "install": False},
                   "convert": {"out": str(inp.models)}}
            (tmp_path / "cfg.json").write_text(json.dumps(cfg))
            base = ["-f", str(tmp_path / "cfg.json"), "deploy", "--build-info", str(inp.build_info)]
            # ANDROID_ADB_SERVER_PORT points nowhere: deploy.adb_port from the config file must win
            r = invoke(tmp_path, *base, port=dead)
            assert r.returncode == 7, r.stdout + r.stderr
            assert f"no device 127.0.0.1:1 on the adb server 127.0.0.1:{server.port}" in r.stderr
            assert f"it knows: {serial}" in r.stderr and "adb devices -l" in r.stderr

            r = invoke(tmp_path, *base, "--serial", serial, port=dead)  # the CLI overrides deploy.serials
            assert r.returncode == 0, r.stdout + r.stderr
            assert devs["d"].path(f"{DEVICE_DIR}/mobilenetv2-quant_none-cpu.pt").is_file()
            calls = [ln for ln in (devs["d"].state_dir / "device.log").read_text().splitlines()
                     if "speed_benchmark_torch --model=" in ln]
            timed = [c for c in calls if "--iter=7" in c and "--warmup=2" in c]
            cold = [c for c in calls if "--iter=3 " in c and "--warmup=0" in c]  # cold start: 1 + warm-up iterations
            placement = [c for c in calls if "nnapi" in c and "--iter=1 " in c and "--warmup=0" in c]
            assert len(calls) == 5 and len(timed) == 2 and len(cold) == 2, calls  # + NNAPI's placement run
            assert len(placement) == 1, calls  # the NNAPI model once more with debug.nn.vlog on (deploy --hardware)
            # deploy.bundled_input = -1: the input comes from the manifest's spec instead of the bundled one
            assert all("--input_dims=1,3,224,224 --input_type=float" in c and "bundled" not in c for c in calls), calls
        con = sqlite3.connect(tmp_path / "res" / "results.sqlite")
        assert con.execute("SELECT DISTINCT samples FROM results").fetchall() == [(7,)]
        con.close()

        # without the config file, ANDROID_ADB_SERVER_PORT is honoured: nothing answers there
        r = invoke(tmp_path, "deploy", "--models", str(inp.models), "--build-info", str(inp.build_info), "--no-install",
                   "--results", str(tmp_path / "res2"), port=dead)
        assert r.returncode != 0
        assert f"no adb server answers on 127.0.0.1:{dead}" in r.stderr
