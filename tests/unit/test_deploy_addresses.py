"""adb server addresses: HOST:PORT parsing, adb's -H/-P and environment conventions, the device's hash tool."""

from __future__ import annotations

import hashlib

import pytest

from deploy.adb import AdbAddress, default_address, resolve_servers
from deploy.hashes import file_digests, pick_algo, probe_command
from toolchain.errors import UsageError


@pytest.mark.parametrize("text,host,port", [
    ("127.0.0.1:5037", "127.0.0.1", 5037),
    ("lab-pc2.example.org:5038", "lab-pc2.example.org", 5038),
    ("tcp:10.0.0.7:6000", "10.0.0.7", 6000),
    ("[::1]:5037", "::1", 5037),
    (" localhost:1 ", "localhost", 1),
])
def test_good_addresses(text, host, port):
    a = AdbAddress.parse(text)
    assert (a.host, a.port) == (host, port)
    assert AdbAddress.parse(str(a)) == AdbAddress(host, port, "--adb-server")


@pytest.mark.parametrize("text,words", [
    ("127.0.0.1", "has no port"),
    ("127.0.0.1:", "not a number"),
    (":5037", "has no port"),
    ("127.0.0.1:0", "1 to 65535"),
    ("127.0.0.1:99999", "1 to 65535"),
    ("127.0.0.1:50x7", "not a number"),
    ("lab pc;rm -rf ~:5037", "not a host name"),
    ("$(reboot):5037", "not a host name"),
    ("[zz::1]:5037", "not a host name"),
])
def test_bad_addresses_are_usage_errors_that_show_the_form(text, words):
    with pytest.raises(UsageError) as e:
        AdbAddress.parse(text, "deploy.servers")
    assert words in str(e.value) and "deploy.servers" in str(e.value) and "HOST:PORT" in str(e.value)


def test_duplicates_are_refused_whatever_the_spelling_of_the_host_case():
    with pytest.raises(UsageError, match="listed twice"):
        resolve_servers(["Lab-PC:5037", "lab-pc:5037"])
    assert len(resolve_servers(["lab-pc:5037", "lab-pc:5038"])) == 2


def test_default_follows_adb_conventions():
    assert default_address(env={}) == AdbAddress("127.0.0.1", 5037, "default")
    assert default_address(env={"ANDROID_ADB_SERVER_PORT": "5555"}).port == 5555
    env = {"ANDROID_ADB_SERVER_ADDRESS": "farm", "ANDROID_ADB_SERVER_PORT": "7000"}
    assert (default_address(env=env).host, default_address(env=env).port) == ("farm", 7000)
    # -H/-P (deploy.adb_host / adb_port) win over the variables; the variable still fills what is missing
    assert default_address("box", None, env) == AdbAddress("box", 7000, "deploy.adb_host and ANDROID_ADB_SERVER_PORT")
    assert default_address(None, 6001, env) == AdbAddress("farm", 6001, "ANDROID_ADB_SERVER_ADDRESS and deploy.adb_port")
    # ADB_SERVER_SOCKET=tcp:HOST:PORT wins over the variables unless -H or -P is given
    sock = {"ADB_SERVER_SOCKET": "tcp:gateway:5039", **env}
    assert (default_address(env=sock).host, default_address(env=sock).port) == ("gateway", 5039)
    assert default_address(None, 6001, sock).host == "farm"
    assert default_address(env={"ADB_SERVER_SOCKET": "tcp:5040"}).port == 5040
    with pytest.raises(UsageError, match="ANDROID_ADB_SERVER_PORT"):
        default_address(env={"ANDROID_ADB_SERVER_PORT": "abc"})
    assert resolve_servers([], None, None, {"ANDROID_ADB_SERVER_PORT": "5555"})[0].port == 5555


def test_the_cheapest_tool_that_computes_the_right_digest_is_picked():
    empty = {a: hashlib.new(a, b"").hexdigest() for a in ("sha1", "md5", "sha256")}
    out = f"sha1sum {empty['sha1']}  -\nmd5sum {empty['md5']}  -\nsha256sum {empty['sha256']}  -\n"
    assert pick_algo(out) == "sha1"
    # toybox without libcrypto has no sha256sum; a sha1sum that is missing or prints nonsense is passed over
    assert pick_algo(f"sha1sum \nmd5sum {empty['md5']}  -\nsha256sum \n") == "md5"
    assert pick_algo(f"sha1sum {empty['md5']}  -\nmd5sum x\nsha256sum {empty['sha256']}  -\n") == "sha256"
    assert pick_algo("sha1sum \nmd5sum \nsha256sum \n") is None
    assert "sha1sum" in probe_command() and "</dev/null" in probe_command()


def test_file_digests_one_read(tmp_path):
    f = tmp_path / "m.pt"
    f.write_bytes(b"model bytes" * 1000)
    sha, sha1 = file_digests(f, "sha1")
    assert sha == hashlib.sha256(f.read_bytes()).hexdigest() and sha1 == hashlib.sha1(f.read_bytes()).hexdigest()
    assert file_digests(f, "sha256") == (sha, sha)
