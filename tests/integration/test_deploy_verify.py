"""push_all on the virtual device: hash-skip, temp name + verify + rename, nothing bad under a final name."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from deploy.adb import AdbServer
from deploy.push import PushItem, push_all, remote_state
from tests.virtual_device.harness import adb_with_devices
from toolchain.errors import DeviceError, VerificationError

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

DEVICE_DIR = "/data/local/tmp/torchdroid/verify"


def sends(dev) -> int:
    """How many sync SENDs the virtual device received."""
    return (dev.state_dir / "device.log").read_text().count("sync SEND ")


def test_a_corrupted_file_is_never_renamed_and_a_good_one_of_the_same_push_is(tmp_path):
    good, bad = tmp_path / "good.bin", tmp_path / "bad.bin"
    for i, f in enumerate((good, bad)):
        f.write_bytes(bytes([i]) * 300_000)
    corrupt = {"match": "bad.bin", "at": 1000, "times": 1}
    with adb_with_devices(tmp_path / "adb", {"d": {"corrupt_send": corrupt}}) as (server, devs):
        dev = AdbServer(port=server.port).device(devs["d"].serial)
        with pytest.raises(VerificationError) as e:
            push_all(dev, DEVICE_DIR, [PushItem(good, good.name, 0o640), PushItem(bad, bad.name)])
        assert "bad.bin arrived on" in str(e.value) and "corrupted" in str(e.value) and "USB cable" in str(e.value)
        d = devs["d"].path(DEVICE_DIR)
        assert os.listdir(d) == ["good.bin"]  # the corrupted temporary file is removed, nothing else is left
        assert (d / "good.bin").read_bytes() == good.read_bytes()
        assert (d / "good.bin").stat().st_mode & 0o777 == 0o640
        (again,) = [o for o in push_all(dev, DEVICE_DIR, [PushItem(good, good.name, 0o640), PushItem(bad, bad.name)])
                    if o.pushed]  # the next push sends only the file that is missing
        assert again.name == "bad.bin" and (d / "bad.bin").read_bytes() == bad.read_bytes()


def test_an_unchanged_file_is_not_sent_again_and_a_changed_one_is(tmp_path):
    files = []
    for i in range(3):
        f = tmp_path / f"m{i}.pt"
        f.write_bytes(bytes([i + 1]) * (200_000 + i))
        files.append(PushItem(f, f.name, 0o644))
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        dev = AdbServer(port=server.port).device(devs["d"].serial)
        counted = []
        first = push_all(dev, DEVICE_DIR, files, on_bytes=counted.append)
        assert [o.pushed for o in first] == [True] * 3
        assert sum(counted) == sum(it.local.stat().st_size for it in files)  # every byte once, pushes in flight or not
        assert [o.sha256 for o in first] == [hashlib.sha256(it.local.read_bytes()).hexdigest() for it in files]
        assert [o.bytes for o in first] == [it.local.stat().st_size for it in files]
        d = devs["d"].path(DEVICE_DIR)
        assert sorted(os.listdir(d)) == [it.name for it in files]
        before = sends(devs["d"])
        again = push_all(dev, DEVICE_DIR, files)
        assert [o.pushed for o in again] == [False] * 3 and [o.sha256 for o in again] == [o.sha256 for o in first]
        assert sends(devs["d"]) == before  # nothing sent
        (d / "m1.pt").write_bytes(b"other content, same name")  # changed on the device: its hash differs
        os.chmod(d / "m2.pt", 0o600)  # right content, wrong mode: fixed in place
        third = push_all(dev, DEVICE_DIR, files)
        assert [o.pushed for o in third] == [False, True, False] and sends(devs["d"]) == before + 1
        assert (d / "m1.pt").read_bytes() == files[1].local.read_bytes()
        assert (d / "m2.pt").stat().st_mode & 0o777 == 0o644


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
        (d / "keep.partial").write_bytes(b"not ours")
        state = remote_state(dev, DEVICE_DIR, ["m.pt"])
        assert state.leftovers and set(state) == {"m.pt"}
        (again,) = push_all(dev, DEVICE_DIR, [PushItem(f, f.name)], existing=state)
        assert not again.pushed
        assert sorted(os.listdir(d)) == ["keep.partial", "m.pt"]
        assert not remote_state(dev, DEVICE_DIR, ["m.pt"]).leftovers


def test_a_serial_the_server_does_not_know_is_a_device_error(tmp_path):
    with adb_with_devices(tmp_path / "adb", {}) as (server, _devs):
        dev = AdbServer(port=server.port).device("no-such-phone")
        with pytest.raises(DeviceError) as e:
            dev.shell("true")
        assert "lost the connection to no-such-phone" in str(e.value) and "not found" in str(e.value)


def test_the_virtual_device_refuses_a_sync_data_packet_above_64_kb(tmp_path):
    """docs/facts.md DS5: the fixture refuses what adbd refuses, so pushing larger packets fails here as on a phone;
    the device's FAIL is reported as a refusal."""
    class OnePacket:  # what adbutils' sync push reads: one DATA packet of ``size`` bytes
        def __init__(self, size: int):
            self.chunks = [b"x" * size]

        def read(self, n: int = -1) -> bytes:
            return self.chunks.pop() if self.chunks else b""

        def close(self) -> None:
            pass

    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        dev = AdbServer(port=server.port).device(devs["d"].serial)
        dev.push(OnePacket(64 * 1024), f"{DEVICE_DIR}/ok.bin", 0o644, "ok.bin")
        assert (devs["d"].path(DEVICE_DIR) / "ok.bin").stat().st_size == 64 * 1024
        with pytest.raises(DeviceError) as e:
            dev.push(OnePacket(64 * 1024 + 1), f"{DEVICE_DIR}/big.bin", 0o644, "big.bin")
        assert f"{devs['d'].serial} refused {DEVICE_DIR}/big.bin" in str(e.value)
