"""deploy/adb.py's use of adbutils: it never starts an adb server, and a ``send`` on a push's socket sends every byte
(adbutils' sync push ignores the count ``send`` returns)."""

from __future__ import annotations

import socket
import threading

import pytest

from deploy.adb import AdbAddress, AdbServer
from tests.virtual_device.harness import dead_port, held_dead_port
from toolchain.errors import ToolNotFound, UsageError


def test_a_dead_server_is_reported_with_the_fix_and_never_started(tmp_path, monkeypatch):
    started = tmp_path / "started"
    fake = tmp_path / "adb"  # the adb adbutils would run (`adb start-server`) when nothing answers
    fake.write_text(f'#!/bin/sh\necho "$@" >> {started}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("ADBUTILS_ADB_PATH", str(fake))
    with dead_port() as port, pytest.raises(ToolNotFound) as e:
        AdbServer(port=port).verify()
    assert f"no adb server answers on 127.0.0.1:{port}" in str(e.value) and "adb start-server" in str(e.value)
    assert not started.exists()


def test_the_held_dead_port_refuses_connections_and_cannot_be_taken():
    """What the tests' clean environment points adb and downloads at (no fixed port assumed unused)."""
    port = held_dead_port()
    assert held_dead_port() == port  # one for the whole process
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)
    with socket.socket() as other, pytest.raises(OSError):  # nothing (an adb server, another test) can start there
        other.bind(("127.0.0.1", port))


def test_a_dead_server_is_never_started_by_a_listing_either(tmp_path, monkeypatch):
    started = tmp_path / "started"
    fake = tmp_path / "adb"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {started}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("ADBUTILS_ADB_PATH", str(fake))
    with dead_port() as port, pytest.raises(ToolNotFound) as e:
        AdbServer(port=port).devices()
    assert f"no adb server answers on 127.0.0.1:{port}" in str(e.value)
    assert not started.exists()


def test_an_ipv6_server_is_refused_with_the_fix():
    with pytest.raises(UsageError) as e:
        AdbServer(address=AdbAddress.parse("[::1]:5037")).verify()
    assert "IPv4 only" in str(e.value) and "ssh -L" in str(e.value)


def sends(client, size: int) -> int:
    """What one ``send`` of ``size`` bytes takes on a connection of ``client`` whose send buffer is far smaller."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        c = client(port).make_connection()
        peer, _ = listener.accept()
        got = []

        def drain() -> None:
            n = 0
            while n < size:
                chunk = peer.recv(1 << 16)
                if not chunk:
                    break
                n += len(chunk)
            got.append(n)

        with peer:
            sock = c.conn
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # far less than one send
            reader = threading.Thread(target=drain, daemon=True)
            reader.start()
            sent = sock.send(b"x" * size)
            c.close()
            reader.join(20)
    return sent


def test_a_push_connection_sends_every_byte_at_once():
    """The push client's sockets block: one ``send`` takes everything (a socket with a timeout, as the other client
    has, takes what fits: the control shows the check can fail)."""
    size = 4_000_000
    assert sends(lambda port: AdbServer(port=port, timeout=20).client(blocking=True), size) == size
    assert sends(lambda port: AdbServer(port=port, timeout=20).client(), size) < size
