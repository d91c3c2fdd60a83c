"""Several real adb servers, each with its own virtual devices, one of them down: one run, one result set."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from deploy import BenchOptions, DeploySettings, deploy
from deploy.adb import Adb
from deploy.servers import list_servers
from workflow.doctor import DoctorSettings, run_doctor
from tests.deploy_support.fixtures import invoke_cli, make_inputs
from tests.virtual_device.harness import adb_servers_with_devices
from toolchain.errors import DeviceError, ToolNotFound
from toolchain.fsutil import sha256_file
from tests.virtual_device.harness import held_dead_port

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

DEVICE_DIR = "/data/local/tmp/torchdroid/t"


def settings(inp, tmp_path, servers, **kw) -> DeploySettings:
    base = dict(models=inp.models, results=tmp_path / "results", build_info=inp.build_info, install=False,
                project="t", options=BenchOptions(iters=5, repeat=1, warmup=1), timeout=30, servers=tuple(servers),
                app_bench=False)
    base.update(kw)
    return DeploySettings(**base)


def test_devices_of_several_servers_in_one_run_and_a_down_server_is_a_row(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin)
    layout = {"left": {"a1": {}, "a2": {"props": {"ro.product.model": "Pixel 7"}}}, "right": {"b1": {}}}
    with adb_servers_with_devices(tmp_path / "adb", layout, down=["gone"]) as (servers, devs, down):
        addrs = [f"127.0.0.1:{servers['left'].port}", f"127.0.0.1:{servers['right'].port}",
                 f"127.0.0.1:{down['gone']}"]
        result = deploy(settings(inp, tmp_path, addrs))

        by = {d.serial: d for d in result.devices}
        for name, server in (("a1", "left"), ("a2", "left"), ("b1", "right")):
            rep = by[devs[name].serial]
            assert not rep.errors, rep.errors
            assert rep.server == f"127.0.0.1:{servers[server].port}"
            assert rep.pushed_files == 5  # the binary and four models, each checked on the device
            for f in inp.models.glob("*.pt"):
                assert sha256_file(devs[name].path(f"{DEVICE_DIR}/{f.name}")) == sha256_file(f)
            assert {r.server for r in rep.rows} == {rep.server} and all(r.status == "ok" for r in rep.rows)
        gone = by[f"(adb server 127.0.0.1:{down['gone']})"]
        assert "no adb server answers on 127.0.0.1:" in gone.errors[0] and "adb -P PORT start-server" in gone.errors[0]
        assert len(result.failed) == 1

    # one result set: one run, the server of every device, the down server as a failed row with its reason
    con = sqlite3.connect(result.db_path)
    runs = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    rows = con.execute("SELECT serial, server, status, reason FROM results").fetchall()
    assert runs == 1
    servers_of = {serial: server for serial, server, _s, _r in rows}
    assert servers_of[devs["a1"].serial] == f"127.0.0.1:{servers['left'].port}"
    assert servers_of[devs["b1"].serial] == f"127.0.0.1:{servers['right'].port}"
    failed = [r for r in rows if r[2] == "failed"]
    assert len(failed) == 1 and failed[0][1] == f"127.0.0.1:{down['gone']}" and "no adb server" in failed[0][3]
    exported = json.loads(result.exports["json"].read_text())["results"]
    assert {r["server"] for r in exported} == {f"127.0.0.1:{servers[s].port}" for s in ("left", "right")} | {
        f"127.0.0.1:{down['gone']}"}


def test_console_tables_name_the_server_when_there_are_several():
    from deploy.summary import device_tables
    from toolchain.records import ResultRow

    def row(serial, server):
        return ResultRow(serial=serial, device_model="Pixel", board="sm", release="14", sdk=34, abi="arm64-v8a",
                         stem="m", variant="quant_none", mode="none", backend="cpu", source="binary", status="ok",
                         median_ms=1.0, server=server)

    titles = [t for t, _c, _r in device_tables([row("A", "lab1:5037"), row("B", "lab2:5037")])]
    assert titles[0].endswith("via adb server lab1:5037") and titles[1].endswith("via adb server lab2:5037")
    assert "via adb server" not in device_tables([row("A", "127.0.0.1:5037")])[0][0]  # one server: no noise


def test_a_named_device_behind_a_down_server_is_a_row_with_that_reason(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin)
    with adb_servers_with_devices(tmp_path / "adb", {"up": {"u1": {}}}, down=["gone"]) as (servers, devs, down):
        addrs = [f"127.0.0.1:{servers['up'].port}", f"127.0.0.1:{down['gone']}"]
        result = deploy(settings(inp, tmp_path, addrs, serials=(devs["u1"].serial, "R58M123ABC"), bench=False))
        by = {d.serial: d for d in result.devices}
        assert not by[devs["u1"].serial].errors and by[devs["u1"].serial].pushed_files == 4  # --no-bench: models
        missing = by["R58M123ABC"]
        assert "R58M123ABC was not found" in missing.errors[0] and f"127.0.0.1:{down['gone']}" in missing.errors[0]
        assert missing.server == f"127.0.0.1:{down['gone']}"
        # every server answered but none has it: that is the user's --serial, refused before anything happens
        with pytest.raises(DeviceError, match="no device NOPE on the adb server 127.0.0.1:"):
            deploy(settings(inp, tmp_path, addrs[:1], serials=("NOPE",), bench=False))


def test_same_serial_on_two_servers_gets_two_labels(tmp_path, standin):
    """Two hosts may both have e.g. an emulator-5554: both are deployed, each labelled with its server."""
    inp = make_inputs(tmp_path / "in", standin=standin)
    with adb_servers_with_devices(tmp_path / "adb", {"x": {"x1": {}}, "y": {"y1": {}}}) as (servers, devs, _):
        # the serial is 127.0.0.1:PORT of the device; connect x1 to server y too, under the same serial
        servers["y"].connect(devs["x1"].port)
        addrs = [f"127.0.0.1:{servers['x'].port}", f"127.0.0.1:{servers['y'].port}"]
        listings = list_servers(Adb.locate(addrs))
        assert all(ls.up for ls in listings)
        result = deploy(settings(inp, tmp_path, addrs, bench=False))
        labels = sorted(d.serial for d in result.devices)
        x1 = devs["x1"].serial
        assert f"{x1}@127.0.0.1:{servers['x'].port}" in labels and f"{x1}@127.0.0.1:{servers['y'].port}" in labels
        assert not result.failed


def test_all_servers_down_is_one_clear_error(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin)
    with adb_servers_with_devices(tmp_path / "adb", {}, down=["a", "b"]) as (_s, _d, down):
        addrs = [f"127.0.0.1:{down['a']}", f"127.0.0.1:{down['b']}"]
        with pytest.raises(ToolNotFound, match="none of the 2 adb servers answers") as e:
            deploy(settings(inp, tmp_path, addrs))
        assert "adb -P PORT start-server" in str(e.value)


def test_doctor_and_the_cli_take_several_servers(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", standin=standin)
    layout = {"one": {"d1": {}}, "two": {"d2": {}, "d3": {"authorized": False}}}
    with adb_servers_with_devices(tmp_path / "adb", layout, down=["gone"]) as (servers, devs, down):
        addrs = [f"127.0.0.1:{servers['one'].port}", f"127.0.0.1:{servers['two'].port}", f"127.0.0.1:{down['gone']}"]
        rows = {c.name: c for c in run_doctor(DoctorSettings(env={}, servers=tuple(addrs)))}
        assert rows[f"devices ({addrs[0]})"].status == "ok" and f"{devs['d1'].serial} (device)" in rows[
            f"devices ({addrs[0]})"].found
        assert f"{devs['d3'].serial} (unauthorized)" in rows[f"devices ({addrs[1]})"].found
        assert rows[f"devices ({addrs[2]})"].status == "info"

        work = tmp_path / "work"
        work.mkdir()
        args = ["deploy", "--models", str(inp.models), "--build-info", str(inp.build_info), "--no-install",
                "--no-bench", "--project", "cli", "--results", str(tmp_path / "cli-results")]
        for a in addrs:
            args += ["--adb-server", a]
        res = invoke_cli(work, *args, port=held_dead_port())  # ANDROID_ADB_SERVER_PORT points nowhere: the servers given win
        assert res.returncode == 7, res.stdout + res.stderr  # the unauthorized device and the down server
        out = res.stdout + res.stderr
        assert "Traceback" not in out
        for name in ("d1", "d2"):
            assert devs[name].path("/data/local/tmp/torchdroid/cli/speed_benchmark_torch").exists() is False
            assert devs[name].path("/data/local/tmp/torchdroid/cli/mobilenetv2-quant_full-cpu.pt").exists()
        assert "'unauthorized'" in out and f"no adb server answers on {addrs[2]}" in out


def test_bench_deploy_fleet_script_smoke(tmp_path):
    """benchmarks/bench_deploy_fleet.py on a small fleet: it runs and prints its ratio and the CPU it took."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_deploy_fleet.py"), "--servers", "2",
                        "--per-server", "2", "--model-mb", "0.2", "--repeat", "1", "--link", "0"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: above target, which this machine may well be
    m = re.search(r"fleet wall time / one device: ([0-9.]+) \(target <= 1.5\)", r.stdout)
    assert m and float(m.group(1)) > 0, r.stdout + r.stderr
    assert "4 devices:" in r.stdout and "CPU s: deploy" in r.stdout
