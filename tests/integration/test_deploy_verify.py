"""The on-device verify of a batch: a corrupted temporary file is never renamed, a good one in the same batch is."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from deploy.adb import AdbServer
from deploy.push import (INDEX_NAME, PushItem, SentFile, parse_index, push_all, remote_state, run_batch,
                         send_to_temp)
from tests.virtual_device.harness import adb_with_devices
from toolchain.errors import DeviceError, VerificationError

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

DEVICE_DIR = "/data/local/tmp/torchdroid/verify"


@pytest.mark.parametrize("runs", [None, 1, 2])  # one hash process per file, one for the batch, two
def test_batch_verify_renames_only_matching_files(tmp_path, runs):
    good, bad, gone = tmp_path / "good.bin", tmp_path / "bad.bin", tmp_path / "gone.bin"
    for i, f in enumerate((good, bad, gone)):
        f.write_bytes(bytes([i]) * 300_000)
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        dev = AdbServer(port=server.port).device(devs["d"].serial)
        dev.shell(f"mkdir -p {DEVICE_DIR}", check=True)
        batch = []
        with dev.sync_session() as session:
            for f in (good, bad, gone):
                it = PushItem(f, f.name, 0o640)
                tmp, sent, mtime = send_to_temp(dev, DEVICE_DIR, it, session=session)
                assert sent == 300_000
                data = f.read_bytes()
                batch.append(SentFile(it, tmp, sent, mtime, hashlib.sha1(data).hexdigest(),
                                      hashlib.sha256(data).hexdigest()))
        d = devs["d"].path(DEVICE_DIR)
        with open(devs["d"].path(batch[1][1]), "r+b") as fh:  # one flipped byte on the device's storage
            fh.seek(1000)
            fh.write(b"\xff")
        os.unlink(devs["d"].path(batch[2][1]))  # the temporary file vanished before the verify

        ok, corrupt, missing = run_batch(dev, DEVICE_DIR, batch, "sha1", runs=runs)[0]

        assert ok.pushed and ok.sha256 == batch[0].sha256 and ok.bytes == 300_000 and ok.size == 300_000 and ok.mtime > 0
        assert (d / "good.bin").read_bytes() == good.read_bytes()
        assert (d / "good.bin").stat().st_mode & 0o777 == 0o640
        assert isinstance(corrupt, VerificationError)
        assert "bad.bin arrived on" in str(corrupt) and "corrupted" in str(corrupt) and "USB cable" in str(corrupt)
        assert isinstance(missing, DeviceError) and "could not verify and move gone.bin" in str(missing)
        assert not (d / "bad.bin").exists() and not (d / "gone.bin").exists()  # never under a final name
        assert sorted(os.listdir(d)) == [INDEX_NAME, "good.bin"]  # the corrupted temporary file is removed too
        # only the renamed file has an index entry, with the size and mtime it has on the device
        assert parse_index((d / INDEX_NAME).read_text()) == {
            "good.bin": (batch[0].sha256, 300_000, int((d / "good.bin").stat().st_mtime))}


def test_push_all_writes_the_index_and_the_next_push_trusts_it(tmp_path):
    files = []
    for i in range(3):
        f = tmp_path / f"m{i}.pt"
        f.write_bytes(bytes([i + 1]) * (200_000 + i))
        files.append(PushItem(f, f.name))
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        dev = AdbServer(port=server.port).device(devs["d"].serial)
        first = push_all(dev, DEVICE_DIR, files)
        assert [o.pushed for o in first] == [True] * 3
        d = devs["d"].path(DEVICE_DIR)
        index = parse_index((d / INDEX_NAME).read_text())
        assert index == {it.name: (hashlib.sha256(it.local.read_bytes()).hexdigest(), (d / it.name).stat().st_size,
                                   int((d / it.name).stat().st_mtime)) for it in files}
        assert sorted(os.listdir(d)) == sorted([INDEX_NAME] + [it.name for it in files])
        log = devs["d"].state_dir / "device.log"
        before = log.read_text().count("shell: ")
        again = push_all(dev, DEVICE_DIR, files)
        assert [o.pushed for o in again] == [False] * 3 and [o.sha256 for o in again] == [o.sha256 for o in first]
        # sizes and mtimes match the index: one shell call (the state), nothing hashed or verified on the device
        assert log.read_text().count("shell: ") == before + 1


def test_a_model_changed_after_it_was_recorded_is_refused_on_the_device_and_named_as_such(tmp_path):
    model = tmp_path / "m.pt"
    model.write_bytes(b"\x01" * 250_000)
    recorded = hashlib.sha256(model.read_bytes()).hexdigest()
    model.write_bytes(b"\x02" * 250_000)  # same size: only the hash tells
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        dev = AdbServer(port=server.port).device(devs["d"].serial)
        with pytest.raises(VerificationError) as e:
            push_all(dev, DEVICE_DIR, [PushItem(model, model.name, 0o644, recorded)])
        assert f"{model} changed after it was recorded" in str(e.value) and "invoke convert --force" in str(e.value)
        assert os.listdir(devs["d"].path(DEVICE_DIR)) == []  # neither a final name nor a temporary file


def test_leftovers_of_an_interrupted_deploy_are_removed_even_when_nothing_is_pushed(tmp_path):
    f = tmp_path / "m.pt"
    f.write_bytes(b"\x05" * 100_000)
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        dev = AdbServer(port=server.port).device(devs["d"].serial)
        assert remote_state(dev, DEVICE_DIR, ["m.pt"]) == {}
        assert not devs["d"].path(DEVICE_DIR).exists()  # reading the state changes nothing
        push_all(dev, DEVICE_DIR, [PushItem(f, f.name)])
        d = devs["d"].path(DEVICE_DIR)
        (d / ".m.pt.partial-123-abcdef").write_bytes(b"half")
        (d / ".torchdroid-index.partial-123").write_bytes(b"half")
        (d / "keep.partial").write_bytes(b"not ours")
        state = remote_state(dev, DEVICE_DIR, ["m.pt"])
        assert state.leftovers and set(state) == {"m.pt"}
        (again,) = push_all(dev, DEVICE_DIR, [PushItem(f, f.name)], existing=state)
        assert not again.pushed
        assert sorted(os.listdir(d)) == [INDEX_NAME, "keep.partial", "m.pt"]
        assert not remote_state(dev, DEVICE_DIR, ["m.pt"]).leftovers
