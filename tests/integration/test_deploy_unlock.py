"""A push-only deploy removes the device directory's lock in its last verify call (no unlock round trip of its
own), and only when nothing of the deploy can still change the directory; every other way out still unlocks."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from deploy import DeploySettings, deploy
from deploy.adb import AdbServer
from deploy.lock import Held, lock_path, new_owner
from deploy.push import _BatchVerifier
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


def shells(dev) -> list:
    """The shell commands the virtual device ran, in order (its log)."""
    entries = re.split(r"\n(?=\d\d:\d\d:\d\d )", (dev.state_dir / "device.log").read_text())
    return [e.split(" shell: ", 1)[1].strip() for e in entries if e[8:16] == " shell: "]


def unlock_calls(dev) -> list:
    """Shell calls that only remove the lock (the separate unlock)."""
    return [c for c in shells(dev) if c.startswith("rm -rf") and LOCK in c and "\n" not in c]


def leftovers(d: Path) -> list:
    return sorted(p for p in os.listdir(d) if ".partial-" in p)


def test_a_push_only_deploy_unlocks_in_its_last_verify_call(tmp_path, standin):
    inp = make_inputs(tmp_path / "in", modes=("none", "core", "full"), standin=standin, model_size=400_000)
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        dev = devs["d"]
        d = dev.path(DEVICE_DIR)
        res = deploy(settings(inp, tmp_path, server.port))
        (rep,) = res.devices
        assert not rep.errors and rep.pushed_files == 6
        assert not dev.path(LOCK).exists()
        assert leftovers(d) == []  # the verify calls' marks went with the lock
        # six files take several verify calls: whether the last one could unlock depends on the others' timing;
        # one file takes one call, which always can
        before = len(unlock_calls(dev))
        (d / "mobilenetv2-quant_core-cpu.pt").unlink()
        again = deploy(settings(inp, tmp_path, server.port))
        assert not again.devices[0].errors and again.devices[0].pushed_files == 1
        assert not dev.path(LOCK).exists() and leftovers(d) == []
        assert len(unlock_calls(dev)) == before  # no round trip of its own: the verify call removed it
        assert LOCK in shells(dev)[-1] and "--torchdroid-verified--" in shells(dev)[-1]
        # an unchanged deploy verifies nothing: it unlocks on its own (and it could take the lock at all)
        third = deploy(settings(inp, tmp_path, server.port))
        assert not third.devices[0].errors and third.devices[0].pushed_files == 0
        assert not dev.path(LOCK).exists() and len(unlock_calls(dev)) == before + 1


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


def test_the_last_batch_releases_the_lock_only_once_the_batches_still_running_ended(tmp_path):
    """The batch of the last file starts while others may still hash and rename: it removes the lock only when
    their marks (written once every file of theirs had its turn) are there; else the caller unlocks."""
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        dev = AdbServer(port=server.port).device(devs["d"].serial)
        dev.shell(f"mkdir -p {DEVICE_DIR} {LOCK}", check=True)
        held = Held(new_owner(), LOCK)
        held.also.append(f"{DEVICE_DIR}/..verified.partial-run-*")
        verifier = _BatchVerifier(dev, DEVICE_DIR, "sha1", {}, release=held, run="run")
        try:
            mark_2, _ = verifier._ending(2, None)  # a batch that is not the last one: its mark
            _, release = verifier._ending(3, [1, 2])  # the last batch, started while 1 and 2 ran
        finally:
            verifier.pool.shutdown()
        d, lock = devs["d"].path(DEVICE_DIR), devs["d"].path(LOCK)
        dev.shell(f"cd {DEVICE_DIR} && {mark_2}", check=True)
        out = dev.shell(f"cd {DEVICE_DIR} && {release}", check=True).output
        assert lock.is_dir() and "unlocked" not in out  # batch 1 has not ended: the lock stays
        dev.shell(f"cd {DEVICE_DIR} && {mark_2.replace('-2', '-1')}", check=True)
        out = dev.shell(f"cd {DEVICE_DIR} && {release}", check=True).output
        assert not lock.exists() and "--torchdroid-unlocked--" in out
        assert leftovers(d) == []
