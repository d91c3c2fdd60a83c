"""adb server addresses: HOST:PORT parsing, adb's -H/-P and environment conventions, the device's hash tool."""

from __future__ import annotations

import hashlib

import pytest

from deploy.adb import AdbAddress, default_address, resolve_servers
from deploy.hashes import has_sha256, probe_command
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


def test_only_a_sha256sum_that_computes_the_right_digest_is_used():
    empty = hashlib.sha256(b"").hexdigest()
    assert has_sha256(f"{empty}  -\n") and has_sha256(f"{empty.upper()}  -\n")
    # missing, printing nonsense, or computing another hash: the device is refused
    assert not has_sha256("") and not has_sha256("0123456789abcdef\n")
    assert not has_sha256(f"{hashlib.sha1(b'').hexdigest()}  -\n")
    assert "sha256sum" in probe_command() and "</dev/null" in probe_command()
