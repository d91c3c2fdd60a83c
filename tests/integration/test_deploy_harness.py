"""The test harness itself: private adb servers never collide with other suites and never outlive a test."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.virtual_device.harness import AdbServer, adb_with_devices

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_taken_port_is_skipped_and_everything_stops_on_exit(tmp_path):
    with socket.socket() as taken:  # someone else's listener on the port we picked
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        server = AdbServer(tmp_path)
        server.port = taken.getsockname()[1]
        server.start()
        try:
            assert server.port != taken.getsockname()[1]
            assert server.proc.poll() is None
            assert server.adb("devices").returncode == 0
        finally:
            server.stop()
        assert server.proc.poll() is not None

    with adb_with_devices(tmp_path / "w", {"d": {}}) as (srv, devs):
        pids = [srv.proc.pid, devs["d"].proc.pid]
        port = srv.port
        assert srv.states() == {devs["d"].serial: "device"}
    assert not any(alive(p) for p in pids)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_servers_die_with_a_killed_test_process(tmp_path):
    script = ("import os, sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path\n"
              "from tests.virtual_device.harness import AdbServer, VirtualDeviceProcess\n"
              "s = AdbServer(Path(sys.argv[2])).start(); d = VirtualDeviceProcess(Path(sys.argv[2]) / 'dev').start()\n"
              "print(s.proc.pid, d.proc.pid, flush=True); os._exit(0)  # no cleanup: as if killed\n")
    out = subprocess.run([sys.executable, "-c", script, str(ROOT), str(tmp_path)], capture_output=True, text=True,
                         timeout=60)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2, out.stderr
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for p in left:  # do not leave them behind even when the assertion fails
        os.kill(p, 9)
    assert not left


@pytest.mark.slow
def test_the_opt_in_phone_tests_run_against_a_virtual_phone(tmp_path):
    """`-m device` cannot run here on a phone; run it against the virtual device so it does not rot."""
    from tests.deploy_support.fixtures import make_inputs

    inp = make_inputs(tmp_path / "in", modes=("none",))
    with adb_with_devices(tmp_path / "adb", {"p": {}}) as (server, devs):
        env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(server.port), TORCHDROID_DEVICE_SERIAL=devs["p"].serial,
                   TORCHDROID_DEVICE_BUILD_INFO=str(inp.build_info), TORCHDROID_DEVICE_MODELS=str(inp.models))
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "device", "-p", "no:cacheprovider",
                            str(ROOT / "tests" / "integration" / "test_deploy_phone.py")],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        scratch = devs["p"].path("/data/local/tmp/torchdroid/pytest-phone")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "2 passed" in r.stdout
        assert not scratch.exists()  # the phone tests clean up after themselves


def test_bench_deploy_script_smoke(tmp_path):
    """benchmarks/bench_deploy.py with tiny files: it runs and prints its ratio and re-deploy time."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_deploy.py"), "--scale", "0.02", "--repeat",
                        "1", "--link", "150"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: below target, which tiny files may well be
    m = re.search(r"deploy throughput / adb push throughput: ([0-9.]+) \(target >= [0-9.]+\)", r.stdout)
    assert m and float(m.group(1)) > 0, r.stdout + r.stderr
    assert re.search(r"unchanged re-deploy: +[0-9.]+ s +\(0 bytes pushed\)", r.stdout), r.stdout


def test_the_devices_native_sha256sum_prints_what_coreutils_prints(tmp_path):
    """The virtual devices' libcrypto sha256sum (tests/virtual_device/tools.py) is a stand-in for the device's
    tool: same digests, same lines, same exit codes as the host's sha256sum, a damaged file gives another digest,
    and the devices find it first on their PATH."""
    from tests.virtual_device.tools import tools_dir

    built = tools_dir()
    if built is None:
        pytest.skip("no C compiler or libcrypto here: the devices use coreutils' sha256sum")
    files = {"empty": b"", "one": b"x", "big": os.urandom(300_000) * 3}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    damaged = bytearray(files["big"])
    damaged[123_456] ^= 0x01
    (tmp_path / "damaged").write_bytes(bytes(damaged))
    for args in (["empty", "one", "big", "damaged"], ["big", "missing", "one"], [], ["-"]):
        ours = subprocess.run([str(built / "sha256sum"), *args], cwd=tmp_path, input=b"abc", capture_output=True)
        real = subprocess.run(["/usr/bin/sha256sum", *args], cwd=tmp_path, input=b"abc", capture_output=True)
        assert (ours.returncode, ours.stdout) == (real.returncode, real.stdout), args
        assert (b"missing" in ours.stderr) == (b"missing" in real.stderr)
    out = subprocess.run([str(built / "sha256sum"), "big", "damaged"], cwd=tmp_path, capture_output=True).stdout.split()
    assert out[0] != out[2]
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        where = server.adb("-s", devs["d"].serial, "shell", "command -v sha256sum").stdout.strip()
        assert where == str(built / "sha256sum")


def test_the_devices_mv_chmod_mkdir_and_rm_leave_what_coreutils_leaves(tmp_path):
    """The virtual devices' mv, chmod, mkdir and rm (tests/virtual_device/tools.py: a few system calls for the
    simple forms a deploy uses, coreutils for the rest) give coreutils' results, messages and exit codes; a
    stand-in that does not is caught by the same comparison; the devices find them first on their PATH."""
    from tests.virtual_device import tools

    built = tools.tools_dir()
    names = ("mv", "chmod", "mkdir", "rm")
    if built is None or not all((built / n).exists() for n in names):
        pytest.skip("no C compiler here: the devices use coreutils' tools")
    cases = {"mv": tools.MV_CASES, "chmod": tools.CHMOD_CASES, "mkdir": tools.MKDIR_CASES, "rm": tools.RM_CASES}
    for name in names:
        assert tools.compare_with_coreutils(built / name, f"/usr/bin/{name}", cases[name], tools._files) == []
        wrong = tools.compare_with_coreutils(Path("/bin/true"), f"/usr/bin/{name}", cases[name], tools._files)
        assert wrong, name  # a stand-in that does nothing is caught
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        where = server.adb("-s", devs["d"].serial, "shell", "; ".join(f"command -v {n}" for n in names)).stdout.split()
        assert where == [str(built / n) for n in names]
