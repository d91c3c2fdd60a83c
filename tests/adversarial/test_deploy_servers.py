"""Adversarial cases for deploying through several adb servers: bad server values from every source,
servers that are down, a device that vanishes mid-push, a transfer that arrives corrupted, a device
without a hash tool.  Each runs the real `invoke deploy` from a fresh directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.adversarial.harness import adversarial, assert_clean, run_invoke, snapshot
from tests.deploy_support.fixtures import build_standin, make_inputs
from tests.virtual_device.harness import adb_servers_with_devices
from toolchain.fsutil import sha256_file

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

PROJECT = "adv"
DEVICE_DIR = f"/data/local/tmp/torchdroid/{PROJECT}"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("adv-inputs")
    return make_inputs(root, modes=("none", "full"), standin=build_standin(root / "standin"), model_size=300_000)


def deploy_args(inp, *servers: str) -> list:
    args = ["deploy", "--models", str(inp.models), "--build-info", str(inp.build_info), "--no-install",
            "--no-bench", "--project", PROJECT, "--results", "results"]
    for s in servers:
        args += ["--adb-server", s]
    return args


def user_dir(tmp_path: Path) -> Path:
    cwd = tmp_path / "user"
    cwd.mkdir()
    return cwd


def final_files_are_whole(dev, inp) -> list:
    """Names under their final name on the device; each must be byte-identical to the local file."""
    d = dev.path(DEVICE_DIR)
    names = sorted(p.name for p in d.iterdir() if not p.name.startswith(".")) if d.exists() else []
    for name in names:
        assert sha256_file(d / name) == sha256_file(inp.models / name), f"{name} is partial or wrong on the device"
    return names


@adversarial("deploy", "bad value (CLI): adb server without a port, port 0, port 99999, garbage host, duplicate")
@pytest.mark.parametrize("values,words", [
    (["127.0.0.1"], "has no port"),
    (["127.0.0.1:0"], "1 to 65535"),
    (["127.0.0.1:99999"], "1 to 65535"),
    (["lab pc;reboot:5037"], "not a host name"),
    (["127.0.0.1:5037", "127.0.0.1:5037"], "listed twice"),
])
def test_bad_adb_server_values(tmp_path, inputs, values, words):
    cwd = user_dir(tmp_path)
    kept = snapshot([inputs.models])
    out = run_invoke(deploy_args(inputs, *values), cwd)
    assert_clean(out, "usage", mentions=[words, "--adb-server", "HOST:PORT"], kept=kept, root=cwd)


@adversarial("deploy", "bad value (config file): deploy.servers names the key to fix")
def test_bad_servers_in_the_config_file(tmp_path, inputs):
    cwd = user_dir(tmp_path)
    (cwd / "lab.yaml").write_text("deploy:\n  servers: ['127.0.0.1:5037', 'farm-01']\n")
    out = run_invoke(["-f", "lab.yaml", *deploy_args(inputs)], cwd)
    assert_clean(out, "usage", mentions=["farm-01", "deploy.servers", "has no port"], root=cwd)


@adversarial("deploy", "bad value (environment): ANDROID_ADB_SERVER_PORT that is not a port")
def test_bad_adb_port_variable(tmp_path, inputs):
    cwd = user_dir(tmp_path)
    out = run_invoke(deploy_args(inputs), cwd, env={"ANDROID_ADB_SERVER_PORT": "50x7"})
    assert_clean(out, "usage", mentions=["ANDROID_ADB_SERVER_PORT", "1 to 65535"], root=cwd)


@adversarial("deploy", "unreachable dependency: one adb server of three is down")
def test_one_server_down_the_others_are_deployed(tmp_path, inputs):
    cwd = user_dir(tmp_path)
    layout = {"a": {"a1": {}}, "b": {"b1": {}}}
    with adb_servers_with_devices(tmp_path / "adb", layout, down=["gone"]) as (servers, devs, down):
        addrs = [f"127.0.0.1:{servers['a'].port}", f"127.0.0.1:{down['gone']}", f"127.0.0.1:{servers['b'].port}"]
        out = run_invoke(deploy_args(inputs, *addrs), cwd)
        assert_clean(out, "device", mentions=[f"no adb server answers on {addrs[1]}", "start-server"],
                     kept=snapshot([inputs.models]), root=cwd)
        for name in ("a1", "b1"):
            assert len(final_files_are_whole(devs[name], inputs)) == 4
        assert "1 of 3 device(s) had problems" in out.text  # the down server is a row of its own


@adversarial("deploy", "unreachable dependency: every adb server is down")
def test_all_servers_down(tmp_path, inputs):
    cwd = user_dir(tmp_path)
    with adb_servers_with_devices(tmp_path / "adb", {}, down=["x", "y"]) as (_s, _d, down):
        addrs = [f"127.0.0.1:{down['x']}", f"127.0.0.1:{down['y']}"]
        out = run_invoke(deploy_args(inputs, *addrs), cwd)
    assert_clean(out, "tool", mentions=["none of the 2 adb servers answers", addrs[0], addrs[1]], root=cwd)
    assert not (cwd / "results").exists() or not list((cwd / "results").glob("run-*"))


@adversarial("deploy", "kill: the device vanishes mid-push (the cable is pulled)")
def test_device_vanishes_mid_push_nothing_partial_under_a_final_name(tmp_path, inputs):
    cwd = user_dir(tmp_path)
    cut = {"match": "quant_full-cpu", "after": 100_000, "times": 1}
    with adb_servers_with_devices(tmp_path / "adb", {"s": {"d": {"cut_send": cut}, "ok": {}}}) as (servers, devs, _):
        addr = f"127.0.0.1:{servers['s'].port}"
        out = run_invoke(deploy_args(inputs, addr), cwd)
        assert_clean(out, "device", mentions=["interrupted", "run `invoke deploy` again"], kept=snapshot([inputs.models]),
                     root=cwd)
        assert "mobilenetv2-quant_full-cpu.pt" not in final_files_are_whole(devs["d"], inputs)
        assert len(final_files_are_whole(devs["ok"], inputs)) == 4  # the other device went on
        # reconnect and deploy again: the rest arrives, the half-written temporary file is gone
        servers["s"].connect(devs["d"].port)
        again = run_invoke(deploy_args(inputs, addr), cwd)
        assert_clean(again, "ok", root=cwd)
        assert len(final_files_are_whole(devs["d"], inputs)) == 4
        assert not [p for p in devs["d"].path(DEVICE_DIR).iterdir() if ".partial-" in p.name]


@adversarial("deploy", "tampered transfer: a byte flipped on the way (bad cable or flash)")
def test_corrupt_transfer_is_never_renamed(tmp_path, inputs):
    cwd = user_dir(tmp_path)
    bad = {"match": "quant_none-nnapi", "at": 123_456, "times": 1}
    with adb_servers_with_devices(tmp_path / "adb", {"s": {"d": {"corrupt_send": bad}}}) as (servers, devs, _):
        addr = f"127.0.0.1:{servers['s'].port}"
        out = run_invoke(deploy_args(inputs, addr), cwd)
        assert_clean(out, "device", mentions=["arrived on", "corrupted", "USB cable"], root=cwd)
        names = final_files_are_whole(devs["d"], inputs)
        assert "mobilenetv2-quant_none-nnapi.pt" not in names and len(names) == 3
        assert not [p for p in devs["d"].path(DEVICE_DIR).iterdir() if ".partial-" in p.name]  # removed too
        again = run_invoke(deploy_args(inputs, addr), cwd)  # the flaky link behaves this time
        assert_clean(again, "ok", root=cwd)
        assert len(final_files_are_whole(devs["d"], inputs)) == 4


@adversarial("deploy", "missing tool on the device: no working sha256sum")
def test_device_without_a_hash_tool_is_not_touched(tmp_path, inputs):
    cwd = user_dir(tmp_path)
    broken = tmp_path / "broken-bin"
    broken.mkdir()
    for tool in ("sha1sum", "md5sum", "sha256sum"):
        (broken / tool).write_text("#!/bin/sh\necho 0123456789abcdef\n")  # present, but computes nothing sound
        (broken / tool).chmod(0o755)
    vbin = Path(__file__).resolve().parents[1] / "virtual_device" / "vbin"
    env = {"PATH": f"{broken}:{vbin}:/usr/bin:/bin"}
    with adb_servers_with_devices(tmp_path / "adb", {"s": {"d": {"env": env}}}) as (servers, devs, _):
        out = run_invoke(deploy_args(inputs, f"127.0.0.1:{servers['s'].port}"), cwd)
        assert_clean(out, "device", mentions=["has no working sha256sum"], root=cwd)
        assert not devs["d"].path(DEVICE_DIR).exists()  # checked before anything was sent
