"""Phones lent by a DeviceFarmer/STF farm (issue 33): a stand-in farm (tests/deploy_support/stf_standin.py) over
virtual phones behind a real adb server; every phone torchdroid takes is given back whatever happens."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from deploy import BenchOptions, DeploySettings, deploy
from deploy.stf import FarmSettings
from tests.deploy_support.fixtures import invoke_cli, make_inputs
from tests.deploy_support.stf_standin import OTHER, FarmDevice, StandinFarm
from tests.virtual_device.harness import AdbServer, VirtualDeviceProcess, dead_port
from toolchain.errors import DeviceError, ToolNotFound, UsageError

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

TOKEN = "stf-token-3f9a1c77d2e84b6b"


@contextlib.contextmanager
def lab(tmp_path: Path, phones: Dict[str, dict], **farm_kw) -> Iterator[Tuple[StandinFarm, AdbServer, dict]]:
    """A real adb server that knows no phone, the virtual phones (``vdev``: their config, or None for one that is
    never reached) and the farm lending them; yields ``(farm, adb server, {serial: VirtualDeviceProcess})``."""
    server = AdbServer(tmp_path / "adb").start()
    devs: Dict[str, VirtualDeviceProcess] = {}
    try:
        for serial, spec in phones.items():
            if spec.get("vdev") is not None:
                devs[serial] = VirtualDeviceProcess(tmp_path / f"dev-{serial}", **spec["vdev"]).launch()
        for dev in devs.values():
            dev.ready()
        farm_phones = [FarmDevice(serial, devs[serial].port if serial in devs else 1,
                                  **{k: v for k, v in spec.items() if k != "vdev"}) for serial, spec in phones.items()]
        with StandinFarm(TOKEN, farm_phones, **farm_kw) as farm:
            yield farm, server, devs
    finally:
        for dev in devs.values():
            dev.stop()
        server.stop()


def settings(inp, tmp_path, port: int, url: str, **kw) -> DeploySettings:
    base = dict(models=inp.models, results=tmp_path / "results", build_info=inp.build_info, install=False,
                project="t", options=BenchOptions(iters=5, repeat=1, warmup=1), timeout=30, adb_port=port,
                app_bench=False, numerics=False, hardware=False, stf=FarmSettings(url))
    base.update(kw)
    return DeploySettings(**base)


def nothing_left(farm: StandinFarm, server: AdbServer) -> None:
    assert farm.lent_to_me() == [] and farm.remote_open() == [], (farm.lent_to_me(), farm.remote_open())
    assert server.states() == {}, server.states()  # every `adb connect` undone


def test_four_farm_phones_two_deployed_two_named_and_all_given_back(tmp_path, standin, monkeypatch):
    """The issue's first must-show, through the command line: the token reaches no file and no output."""
    monkeypatch.setenv("STF_TOKEN", TOKEN)
    inp = make_inputs(tmp_path / "in", standin=standin)
    phones = {"FREE1": {"vdev": {}, "model": "Pixel 7"}, "FREE2": {"vdev": {}, "model": "Pixel 8"},
              "BUSY1": {"owner": OTHER, "model": "Pixel 6"},
              "X86PHONE": {"abi": "x86_64", "model": "Emulator x86"}}
    work = tmp_path / "work"
    work.mkdir()
    with lab(tmp_path, phones) as (farm, server, devs):
        args = ["deploy", "--stf", farm.url, "--models", str(inp.models), "--build-info", str(inp.build_info),
                "--no-install", "--no-numerics", "--no-hardware", "--iter", "5", "--repeat", "1", "--warmup", "1",
                "--project", "farm", "--results", str(work / "build" / "results")]
        res = invoke_cli(work, *args, port=server.port)
        out = res.stdout + res.stderr
        assert res.returncode == 0, out
        nothing_left(farm, server)
        for serial in ("FREE1", "FREE2"):
            assert devs[serial].path("/data/local/tmp/torchdroid/farm/speed_benchmark_torch").exists()
            assert farm.phones[serial].history == ["lent for 3600000 ms", "remote connect", "remote disconnect",
                                                   "released"], farm.phones[serial].history
        assert farm.phones["BUSY1"].owner == OTHER and farm.phones["X86PHONE"].history == []
    assert "BUSY1 (Pixel 6): in use by ana" in out, out
    assert "X86PHONE (Emulator x86): wrong ABI: it is x86_64, the binary is arm64-v8a" in out, out
    assert out.count("in use by ana") == 1  # said once
    run = json.loads((work / "build" / "results" / "run-0001.json").read_text())
    by = {}
    for r in run["results"]:
        by.setdefault(r["serial"], set()).add((r["server"], r["status"]))
    assert by == {s: {(farm.url, "ok")} for s in ("FREE1", "FREE2")}, by
    con = sqlite3.connect(work / "build" / "results" / "results.sqlite")
    assert {row[0] for row in con.execute("SELECT DISTINCT serial FROM results")} == {"FREE1", "FREE2"}
    con.close()
    assert TOKEN not in out
    for path in work.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert all(h == f"Bearer {TOKEN}" for h in farm.headers_seen)  # the token went only where it belongs


def test_a_phone_taken_away_mid_benchmark_is_named_and_the_other_is_recorded(tmp_path, standin, monkeypatch):
    monkeypatch.setenv("STF_TOKEN", TOKEN)
    inp = make_inputs(tmp_path / "in", standin=standin)
    phones = {"KEPT": {"vdev": {}}, "GONE": {"vdev": {"env": {"SBT_HOLD_MS": "3000"}},
                                            "take_away_on": b"--report_pep"}}
    work = tmp_path / "work"
    work.mkdir()
    with lab(tmp_path, phones) as (farm, server, devs):
        args = ["deploy", "--stf", farm.url, "--models", str(inp.models), "--build-info", str(inp.build_info),
                "--no-install", "--no-numerics", "--no-hardware", "--iter", "5", "--repeat", "1", "--warmup", "1",
                "--project", "farm", "--results", str(work / "results")]
        res = invoke_cli(work, *args, port=server.port)
        out = res.stdout + res.stderr
        assert res.returncode == 7, out
        assert "taken away" in farm.phones["GONE"].history
        nothing_left(farm, server)
        assert farm.phones["KEPT"].history[-1] == "released"
    rows = json.loads((work / "results" / "run-0001.json").read_text())["results"]
    kept = [r for r in rows if r["serial"] == "KEPT"]
    assert len(kept) == 4 and all(r["status"] == "ok" for r in kept), kept
    gone = [r for r in rows if r["serial"] == "GONE"]
    assert gone and all(r["status"] == "failed" for r in gone)
    assert any(f"the farm {farm.url} took GONE back during the run" in (r["reason"] or "") for r in gone), gone
    assert "GONE" in out and "1 of 2 device(s) had problems" in out


def test_ctrl_c_during_a_farm_deploy_gives_every_phone_back(tmp_path, standin, monkeypatch):
    monkeypatch.setenv("STF_TOKEN", TOKEN)
    inp = make_inputs(tmp_path / "in", standin=standin)
    phones = {f"P{i}": {"vdev": {"env": {"SBT_HOLD_MS": "2000"}}} for i in range(2)}
    with lab(tmp_path, phones) as (farm, server, _devs):
        said: List[str] = []

        def status(serial, text):
            said.append(text)
            if "benchmarking" in text and len([x for x in said if "benchmarking" in x]) == 1:
                threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()

        with pytest.raises(KeyboardInterrupt):
            deploy(settings(inp, tmp_path, server.port, farm.url), on_status=status)
        assert sorted(farm.phones) == ["P0", "P1"] and all(
            p.history[-1] == "released" for p in farm.phones.values()), [p.history for p in farm.phones.values()]
        nothing_left(farm, server)


def test_a_farm_failing_its_first_calls_is_asked_again_and_a_lend_that_times_out_is_named(tmp_path, standin,
                                                                                         monkeypatch, caplog):
    monkeypatch.setenv("STF_TOKEN", TOKEN)
    inp = make_inputs(tmp_path / "in", standin=standin)
    phones = {"OK1": {"vdev": {}}, "SLOW": {"lend_times_out": True, "model": "Galaxy S9"},
              "LOST": {"vdev": {}, "lost_answer": True}}  # its lend's answer is lost: asked again, it is ours
    with lab(tmp_path, phones, fail_first=2) as (farm, server, _devs):
        result = deploy(settings(inp, tmp_path, server.port, farm.url, bench=False))
        assert [c[2] for c in farm.calls[:3]] == [503, 503, 200]
        assert sorted(d.serial for d in result.devices) == ["LOST", "OK1"] and not result.failed
        assert farm.phones["LOST"].history[-1] == "released"
        nothing_left(farm, server)
    assert "SLOW (Galaxy S9): it did not answer the farm (the lend timed out)" in caplog.text


def test_stf_count_takes_at_most_n_and_a_phone_taken_meanwhile_is_left_to_its_new_holder(tmp_path, standin,
                                                                                        monkeypatch, caplog):
    monkeypatch.setenv("STF_TOKEN", TOKEN)
    inp = make_inputs(tmp_path / "in", standin=standin)
    phones = {"MEANWHILE": {"taken_meanwhile": True}, "A": {"vdev": {}}, "B": {"vdev": {}}, "C": {}}
    with lab(tmp_path, phones, admin=True) as (farm, server, _devs):  # an admin's token could release any phone
        result = deploy(settings(inp, tmp_path, server.port, farm.url, bench=False,
                                 stf=FarmSettings(farm.url, count=2)))
        assert sorted(d.serial for d in result.devices) == ["A", "B"] and not result.failed
        assert farm.phones["MEANWHILE"].owner == OTHER and "released" not in farm.phones["MEANWHILE"].history
        assert farm.phones["C"].history == []
        nothing_left(farm, server)
    assert "MEANWHILE (Pixel 7): taken by someone else meanwhile" in caplog.text
    assert "C (Pixel 7): not needed (--stf-count 2)" in caplog.text


def test_wrong_token_no_farm_not_a_farm_and_nothing_to_take_are_clear_errors(tmp_path, standin, monkeypatch):
    inp = make_inputs(tmp_path / "in", standin=standin)
    with lab(tmp_path, {"A": {"vdev": None, "owner": OTHER}, "B": {"abi": "x86"}}) as (farm, server, _devs):
        monkeypatch.setenv("STF_TOKEN", "wrong-" + TOKEN)
        with pytest.raises(UsageError, match="refuses the access token in STF_TOKEN") as e:
            deploy(settings(inp, tmp_path, server.port, farm.url))
        assert e.value.exit_code == 2 and TOKEN not in str(e.value) and "Bad Credentials" in str(e.value)
        assert not [c for c in farm.calls if c[0] != "GET"]  # nothing taken
        monkeypatch.delenv("STF_TOKEN")
        with pytest.raises(UsageError, match="needs an access token in STF_TOKEN"):
            deploy(settings(inp, tmp_path, server.port, farm.url))
        monkeypatch.setenv("STF_TOKEN", TOKEN)
        with pytest.raises(UsageError, match="is not a DeviceFarmer/STF farm's API"):
            deploy(settings(inp, tmp_path, server.port, farm.url + "/not-stf"))
        monkeypatch.setenv("ANDROID_SERIAL", "emulator-5554")  # a local phone's serial: not the farm's to narrow
        with pytest.raises(DeviceError, match="no phone of the farm") as e:
            deploy(settings(inp, tmp_path, server.port, farm.url))
        assert "A (Pixel 7): in use by ana" in str(e.value) and "wrong ABI: it is x86" in str(e.value)
        with pytest.raises(DeviceError, match="no phone of the farm") as e:
            deploy(settings(inp, tmp_path, server.port, farm.url, serials=("A", "NOPE")))
        assert str(e.value).splitlines()[1] == "  cause: A (Pixel 7): in use by ana; it lists no phone NOPE"
        nothing_left(farm, server)
        with dead_port() as port:
            with pytest.raises(ToolNotFound, match=f"the farm http://127.0.0.1:{port} does not answer"):
                deploy(settings(inp, tmp_path, server.port, f"http://127.0.0.1:{port}"))


def test_sigterm_during_a_farm_deploy_gives_every_phone_back(tmp_path, standin, monkeypatch):
    """A real `invoke deploy --stf` process stopped with SIGTERM while a phone benchmarks (a CI job cancelled)."""
    import subprocess
    import sys

    from tests.deploy_support.fixtures import running_in, wait_running

    inp = make_inputs(tmp_path / "in", standin=standin)
    root = Path(__file__).resolve().parents[2]
    where = "/data/local/tmp/torchdroid/farm"
    with lab(tmp_path, {"HELD": {"vdev": {"env": {"SBT_HOLD_MS": "100000"}}}}) as (farm, server, devs):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANDROID_", "INVOKE_"))}
        env.update(CI="1", STF_TOKEN=TOKEN, ANDROID_ADB_SERVER_PORT=str(server.port))
        argv = [sys.executable, "-m", "invoke", "--search-root", str(root), "deploy", "--stf", farm.url, "--models",
                str(inp.models), "--build-info", str(inp.build_info), "--no-install", "--no-numerics",
                "--no-hardware", "--iter", "5", "--repeat", "1", "--warmup", "0", "--project", "farm",
                "--results", str(tmp_path / "results")]
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_running(proc, devs["HELD"], where, b"speed_benchmark_torch")
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                print(proc.communicate())
            for pid in running_in(devs["HELD"].path(where), b"speed_benchmark_torch"):
                os.kill(pid, signal.SIGKILL)
        assert proc.returncode == 128 + signal.SIGTERM, out + err
        assert farm.phones["HELD"].history[-2:] == ["remote disconnect", "released"], farm.phones["HELD"].history
        nothing_left(farm, server)
    assert TOKEN not in out + err
