"""Every way out of a deploy removes the device directory's lock, and nothing bad is left under a final name."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from deploy import DeploySettings, deploy
from deploy.lock import lock_path
from tests.deploy_support.fixtures import make_inputs
from tests.virtual_device.harness import adb_with_devices

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

DEVICE_DIR = "/data/local/tmp/torchdroid/u"
LOCK = lock_path(DEVICE_DIR)


def settings(inp, tmp_path, port, **kw) -> DeploySettings:
    base = dict(models=inp.models, results=tmp_path / "results", build_info=inp.build_info, adb_port=port,
                project="u", bench=False, install=False, timeout=30)
    base.update(kw)
    return DeploySettings(**base)


def leftovers(d: Path) -> list:
    return sorted(p for p in os.listdir(d) if ".partial-" in p)


def test_a_push_only_deploy_leaves_no_lock_and_no_temporary_file(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", modes=("none", "core", "full"), standin=standin, model_size=400_000)
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        dev = devs["d"]
        d = dev.path(DEVICE_DIR)
        for pushed in (6, 0):  # a fresh deploy, then an unchanged one
            res = deploy(settings(inp, tmp_path, server.port))
            (rep,) = res.devices
            assert not rep.errors and rep.pushed_files == pushed
            assert not dev.path(LOCK).exists()
            assert leftovers(d) == []


@pytest.mark.parametrize("bad", ["quant_full-nnapi", "quant_none-cpu"])  # in the last batch; in the first
def test_a_failed_verify_still_removes_the_lock_and_renames_nothing_bad(tmp_path, standin, bad):
    inp = make_inputs(tmp_path / "in", modes=("none", "core", "full"), standin=standin, model_size=400_000)
    corrupt = {"match": bad, "at": 1234, "times": 1}
    with adb_with_devices(tmp_path / "adb", {"d": {"corrupt_send": corrupt}}) as (server, devs):
        dev = devs["d"]
        res = deploy(settings(inp, tmp_path, server.port))
        (rep,) = res.devices
        assert len(rep.errors) == 1 and "corrupted" in rep.errors[0], rep.errors
        assert not dev.path(LOCK).exists()
        d = dev.path(DEVICE_DIR)
        assert not (d / f"mobilenetv2-{bad}.pt").exists()  # never under its final name
        assert leftovers(d) == []
        assert sum(1 for p in os.listdir(d) if p.endswith(".pt")) == 5
        # and the next deploy takes the lock and completes the directory
        again = deploy(settings(inp, tmp_path, server.port))
        assert not again.devices[0].errors and again.devices[0].pushed_files == 1
        assert not dev.path(LOCK).exists() and leftovers(d) == []
