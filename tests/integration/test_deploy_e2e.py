"""`invoke deploy` and `invoke report` end to end: the real adb server, two virtual devices, the CLI."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.deploy_support.fixtures import APP_ID, make_inputs
from tests.deploy_support.fixtures import invoke_cli as invoke
from tests.virtual_device.harness import adb_with_devices
from toolchain.fsutil import sha256_file
from tests.virtual_device.harness import held_dead_port

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

ROOT = Path(__file__).resolve().parents[2]
DEVICE_DIR = "/data/local/tmp/torchdroid/e2e"


def sends(dev) -> int:
    log = dev.state_dir / "device.log"
    return sum("sync SEND" in line for line in log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.slow
def test_two_devices_end_to_end(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin)
    devices = {
        "pixel": {"props": {"ro.product.model": "Pixel 3a", "ro.soc.model": "SDM670"}, "env": {"SBT_NNAPI_US": "17100",
                                                                                             "SBT_CPU_US": "6680"}},
        "galaxy": {"props": {"ro.product.model": "Galaxy S10", "ro.soc.model": "Exynos 9820",
                             "ro.build.version.sdk": "29", "ro.build.version.release": "10"}},
    }
    work = tmp_path / "work"
    work.mkdir()
    args = ["deploy", "--models", str(inp.models), "--build-info", str(inp.build_info), "--app", str(inp.app_dir),
            "--project", "e2e", "--iter", "30", "--repeat", "2", "--results", str(tmp_path / "results")]
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        r = invoke(work, *args, port=server.port)
        assert r.returncode == 0, r.stdout + r.stderr
        out = r.stdout

        for name, dev in devs.items():
            # files under their final names, with the right modes and hashes; nothing temporary left
            d = dev.path(DEVICE_DIR)
            binary = d / "speed_benchmark_torch"
            assert sha256_file(binary) == sha256_file(inp.binary)
            assert binary.stat().st_mode & 0o777 == 0o755
            manifest = json.loads((inp.models / "manifest.json").read_text())
            for f in manifest["files"]:
                assert sha256_file(d / f["file"]) == f["sha256"]
                assert (d / f["file"]).stat().st_mode & 0o777 == 0o644
            assert not [p for p in os.listdir(d) if ".partial-" in p]
            # the app is installed from our APK
            assert sha256_file(dev.state_dir / "packages" / APP_ID / "base.apk") == sha256_file(inp.apk)
        assert out.count("5 file(s) pushed") == 2, out

        # speed-ups in the console: the Pixel's NNAPI is slower (6.68 ms CPU vs 17.1 ms NNAPI)
        assert re.search(r"Pixel 3a\): mobilenetv2 quant_full \(binary\): NNAPI is 2\.\d\dx SLOWER than CPU", out), out
        assert "Galaxy S10" in out and "Pixel 3a" in out

        # a second deploy of unchanged files pushes 0 bytes (no sync SEND at all) and re-installs nothing
        before = {n: sends(d) for n, d in devs.items()}
        r2 = invoke(work, *args, "--no-app-bench", port=server.port)
        assert r2.returncode == 0, r2.stdout + r2.stderr
        assert r2.stdout.count("0 file(s) pushed (0 bytes), 5 unchanged") == 2, r2.stdout
        assert "app already installed" in r2.stdout
        assert {n: sends(d) for n, d in devs.items()} == before

    # results: SQLite history with both runs, CSV and JSON exports of the first
    db = tmp_path / "results" / "results.sqlite"
    con = sqlite3.connect(db)
    runs = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    rows = con.execute("SELECT serial, device_model, backend, source, status, median_ms, samples FROM results "
                       "WHERE run_id = 1").fetchall()
    con.close()
    assert runs == 2
    binary_rows = [r for r in rows if r[3] == "binary"]
    assert len(binary_rows) == 8 and all(r[4] == "ok" and r[6] == 60 for r in binary_rows)
    pixel_nnapi = [r[5] for r in binary_rows if r[1] == "Pixel 3a" and r[2] == "nnapi"]
    assert all(16.0 < v < 19.0 for v in pixel_nnapi), pixel_nnapi
    app_rows = [r for r in rows if r[3] == "app"]
    assert len(app_rows) == 4 and all(r[4] == "ok" for r in app_rows)
    with open(tmp_path / "results" / "run-0001.csv") as f:
        assert len(list(csv.DictReader(f))) == 12
    data = json.loads((tmp_path / "results" / "run-0001.json").read_text())
    pix = [s for s in data["speedups"] if s["device_model"] == "Pixel 3a" and s["source"] == "binary"]
    assert pix and all(s["nnapi_slower"] and s["speedup"] < 0.5 for s in pix)

    # invoke report: a PNG of run 1
    rep = invoke(work, "report", "--run", "1", "--results", str(tmp_path / "results"), port=held_dead_port())
    assert rep.returncode == 0, rep.stdout + rep.stderr
    png = tmp_path / "results" / "report-run-0001.png"
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert width > 600 and height > 600
    if os.environ.get("TORCHDROID_KEEP_REPORT"):
        shutil.copy(png, os.environ["TORCHDROID_KEEP_REPORT"])


def test_report_without_results_says_so(tmp_path):
    r = invoke(tmp_path, "report", "--results", str(tmp_path / "nothing"), port=held_dead_port())
    assert r.returncode == 5
    assert "no results database" in r.stderr and "run `invoke deploy` first" in r.stderr


def test_cli_reports_a_failing_device_and_exits_7(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin, modes=("none",))
    with adb_with_devices(tmp_path / "adb", {"ok": {}, "locked": {"authorized": False}}) as (server, devs):
        r = invoke(tmp_path, "deploy", "--models", str(inp.models), "--build-info", str(inp.build_info),
                   "--app", str(inp.app_dir), "--iter", "5", "--repeat", "1", "--results", str(tmp_path / "res"),
                   port=server.port)
    assert r.returncode == 7, r.stdout + r.stderr
    assert "1 of 2 device(s) had problems" in r.stderr
    locked = devs["locked"].serial
    assert f"problem: device {locked} is 'unauthorized'" in r.stdout and "Allow USB debugging" in r.stdout
    assert f"{devs['ok'].serial} (Virtual Pixel, SDK 30): 3 file(s) pushed" in r.stdout
    assert (tmp_path / "res" / "run-0001.json").is_file()


def test_deploy_json_is_one_document_with_every_row(tmp_path, standin):
    """Issue 31 item 5: --json wherever a table is printed; deploy prints tables (latency, hardware, answers)."""
    inp = make_inputs(tmp_path / "in", standin=standin, modes=("none",))
    with adb_with_devices(tmp_path / "adb", {"ok": {}}) as (server, devs):
        r = invoke(tmp_path, "deploy", "--models", str(inp.models), "--build-info", str(inp.build_info),
                   "--app", str(inp.app_dir), "--iter", "5", "--repeat", "1", "--results", str(tmp_path / "res"),
                   "--json", port=server.port)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(r.stdout)  # stdout is the document, nothing else
    assert data["run_id"] == 1 and data["failed"] == [] and data["devices"][0]["serial"] == devs["ok"].serial
    assert {row["backend"] for row in data["rows"]} >= {"cpu"} and all(row["status"] for row in data["rows"])
