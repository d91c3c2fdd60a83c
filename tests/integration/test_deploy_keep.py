"""Measured results are kept (issue 21 item 3), in the virtual adb lab: the results store is checked before any
device work; each device's rows are written as soon as that device is done; Ctrl-C stops the benchmarks on the
phones and keeps every completed row."""

from __future__ import annotations

import csv
import os
import shutil
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from deploy import BenchOptions, DeploySettings, deploy
from tests.deploy_support.fixtures import make_inputs, running_in
from tests.virtual_device.harness import adb_with_devices
from toolchain.errors import RecordError

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

DEVICE_DIR = "/data/local/tmp/torchdroid/keep"


def settings(inp, results: Path, port: int, **kw) -> DeploySettings:
    base = dict(models=inp.models, results=results, build_info=inp.build_info, app_dir=None, adb_port=port,
                project="keep", options=BenchOptions(iters=5, repeat=1), timeout=60, numerics=False, hardware=False)
    base.update(kw)
    return DeploySettings(**base)


def _csv_rows(path: Path) -> list:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["garbage", "busy"])
def test_a_damaged_or_busy_store_is_found_before_any_device_work(tmp_path, standin, damage):
    inp = make_inputs(tmp_path / "in", standin=standin)
    results = tmp_path / "results"
    results.mkdir()
    db = results / "results.sqlite"
    holder = None
    if damage == "garbage":
        db.write_bytes(b"SQLite format 3\0" + os.urandom(4096))
    else:
        sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.commit()
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # another deploy or report writing it
    try:
        with adb_with_devices(tmp_path / "adb", {"phone": {}}) as (server, devs):
            t0 = time.monotonic()
            with pytest.raises(RecordError) as ei:
                deploy(settings(inp, results, server.port))
            took = time.monotonic() - t0
            assert not devs["phone"].path(DEVICE_DIR).exists(), "a device was worked on before the store was checked"
    finally:
        if holder is not None:
            holder.close()
    assert ("busy" if damage == "busy" else "results database") in str(ei.value) and took < 20


@pytest.mark.slow
def test_each_devices_rows_are_written_as_soon_as_it_is_done(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin)
    results = tmp_path / "results"
    devices = {"fast": {}, "slow": {"env": {"SBT_HOLD_MS": "2500"}}}
    seen = {}
    with adb_with_devices(tmp_path / "adb", devices) as (server, devs):
        fast, slow = devs["fast"].serial, devs["slow"].serial

        def status(serial, text):
            if serial == fast and text == "done":
                seen["at_fast_done"] = True
            if serial == slow and "benchmarking" in text and "(3/4" in text and (results / "run-0001.csv").is_file():
                seen.setdefault("slow_running", {r["serial"] for r in _csv_rows(results / "run-0001.csv")})

        result = deploy(settings(inp, results, server.port), on_status=status)
    assert seen.get("slow_running") == {fast}, seen  # the fast phone's rows were on disk while the slow one ran
    con = sqlite3.connect(results / "results.sqlite")
    stored = con.execute("SELECT serial, status FROM results WHERE run_id = 1").fetchall()
    con.close()
    assert sorted(stored) == sorted((r.serial, r.status) for r in result.rows) and len(stored) == 8


def test_ctrl_c_stops_the_phones_benchmarks_and_keeps_the_completed_rows(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin)
    results = tmp_path / "results"
    lines = []
    with adb_with_devices(tmp_path / "adb", {"phone": {"env": {"SBT_HOLD_MS": "2000"}}}) as (server, devs):
        where = devs["phone"].path(DEVICE_DIR)

        def status(serial, text):
            lines.append(text)
            if "benchmarking" in text and "(2/4" in text:  # the first model is complete: Ctrl-C during the second
                threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()

        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            deploy(settings(inp, results, server.port), on_status=status)
        took = time.monotonic() - t0
        running = running_in(where, b"speed_benchmark_torch")
    assert not running, f"benchmarks still running on the phone after Ctrl-C: {running}"
    assert any("stopping the benchmark on the phone" in x for x in lines), lines
    assert took < 4 * 2 * 2.0, f"the phone's benchmarks ran to the end ({took:.1f}s)"  # 4 models x 2 runs x 2 s
    kept = _csv_rows(results / "run-0001.csv")
    assert [(r["model_file"], r["status"]) for r in kept] == [(kept[0]["model_file"], "ok")] and len(kept) == 1
    con = sqlite3.connect(results / "results.sqlite")
    assert con.execute("SELECT COUNT(*) FROM results WHERE run_id = 1 AND status = 'ok'").fetchone()[0] == 1
    con.close()
