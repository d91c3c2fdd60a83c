"""A stand-in DeviceFarmer/STF farm: its REST API in a real HTTP server thread, over virtual phones.

What it answers follows STF's sources (docs/facts.md, rows STF1-STF12): the Bearer token check and its 401s
(securityHandlers.js), ``GET /devices`` with ``fields`` (apiutil.respond, filterDevice), lending only a phone that
is present, ready, not in use and without owner (deviceutil.isAddable: else 403), remote connect, its close and the
release only for the holder or an admin (deviceutil.isOwnedByUser: else 403), STF's own 504 "Device is not responding",
``POST /user/adbPublicKeys`` with a required ``publickey``.

Each phone is a virtual phone (tests/virtual_device) that no adb server knows yet; its adb port is reached through
the farm's relay (the provider's remote-connect port), which listens only while remote connect is on.  Taking a
phone away (``take_away``, or the ``take_away_on`` fault when a command for it passes the relay) gives it to an
admin and cuts every adb connection to it, as STF does.

Faults: ``fail_first`` (the first N calls answer 503 as a proxy in front of a starting farm would), a phone held by
someone else (``owner``), one taken by someone just before the lend (``taken_meanwhile``), a
lend whose answer is lost (``lost_answer``), ``lend_times_out`` (STF's 504 after the lend request), ``take_away_on``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Optional, Tuple

ME = {"email": "ci@lab.example", "name": "ci"}
ADMIN = {"email": "admin@lab.example", "name": "lab admin"}
OTHER = {"email": "ana@lab.example", "name": "ana"}


class Relay:
    """The provider's adb port of one phone: accepts while open, forwards both ways to the phone's own port;
    ``close`` stops accepting and cuts every connection.  ``trigger``: bytes that, sent towards the phone, call
    ``on_trigger`` once (a command the test wants to interrupt)."""

    def __init__(self, phone_port: int, trigger: Optional[bytes] = None, on_trigger=None):
        self.phone_port, self.trigger, self.on_trigger = phone_port, trigger, on_trigger
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.socks: List[socket.socket] = []
        self.open = True
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.open:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                phone = socket.create_connection(("127.0.0.1", self.phone_port))
            except OSError:
                client.close()
                continue
            with self.lock:
                if not self.open:
                    client.close(), phone.close()
                    return
                self.socks += [client, phone]
            threading.Thread(target=self._pipe, args=(client, phone, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(phone, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, to_phone: bool) -> None:
        seen = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if to_phone and self.trigger is not None:
                    seen = (seen + data)[-4096:]
                    if self.trigger in seen:
                        self.trigger = None
                        threading.Timer(0.3, self.on_trigger).start()  # while the command runs
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        with self.lock:
            self.open = False
            socks, self.socks = self.socks, []
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


@dataclass
class FarmDevice:
    serial: str  # STF's serial (the phone's USB serial on its provider)
    port: int  # the virtual phone's adb port, behind the relay
    abi: str = "arm64-v8a"
    sdk: str = "33"  # STF stores ro.build.version.sdk as the text getprop gives
    model: str = "Pixel 7"
    manufacturer: str = "GOOGLE"
    version: str = "13"
    present: bool = True
    ready: bool = True
    owner: Optional[dict] = None
    lend_times_out: bool = False
    taken_meanwhile: bool = False  # listed free, but someone takes it just before torchdroid's lend
    lost_answer: bool = False  # the lend is granted but its answer is lost (a proxy's 502): asked again, STF says 403
    take_away_on: Optional[bytes] = None  # bytes that, passing the relay towards the phone, make an admin take it
    relay: Optional[Relay] = None
    history: List[str] = field(default_factory=list)

    @property
    def using(self) -> bool:
        return self.owner is not None

    def public(self) -> dict:
        return {"serial": self.serial, "present": self.present, "ready": self.ready, "using": self.using,
                "owner": self.owner, "abi": self.abi, "sdk": self.sdk, "model": self.model,
                "manufacturer": self.manufacturer, "version": self.version, "platform": "Android",
                "remoteConnect": self.relay is not None, "channel": f"ch-{self.serial}"}


class StandinFarm:
    """``with StandinFarm(token, phones) as farm``: ``farm.url`` answers STF's API until the block ends."""

    def __init__(self, token: str, phones: List[FarmDevice], fail_first: int = 0, lend_wait: float = 0.2,
                 admin: bool = False):
        self.token, self.phones, self.admin = token, {p.serial: p for p in phones}, admin  # admin: the token's user
        self.fail_first, self.lend_wait = fail_first, lend_wait
        self.calls: List[Tuple[str, str, int]] = []
        self.headers_seen: List[str] = []
        self.keys: List[str] = []
        self.lock = threading.RLock()
        farm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                farm.handle(self, "GET")

            def do_POST(self) -> None:
                farm.handle(self, "POST")

            def do_DELETE(self) -> None:
                farm.handle(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "StandinFarm":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        for p in self.phones.values():
            if p.relay is not None:
                p.relay.close()

    # ------------------------------------------------------------------ what the test asks

    def lent_to_me(self) -> List[str]:
        with self.lock:
            return [p.serial for p in self.phones.values() if p.owner == ME]

    def remote_open(self) -> List[str]:
        with self.lock:
            return [p.serial for p in self.phones.values() if p.relay is not None]

    def take_away(self, serial: str) -> None:
        """An admin takes the phone: the holder changes and every adb connection through the relay drops."""
        with self.lock:
            phone = self.phones[serial]
            phone.owner = ADMIN
            phone.history.append("taken away")
            self._close_relay(phone)

    # ------------------------------------------------------------------ the API

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        url = urllib.parse.urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        self.headers_seen.append(h.headers.get("Authorization", ""))
        with self.lock:
            if self.fail_first > 0:
                self.fail_first -= 1
                return self._send(h, method, url.path, 503, None, b"<html>503 Service Unavailable</html>")
        status, answer = self._auth(h) or self._route(method, url, body)
        self._send(h, method, url.path, status, answer)

    def _send(self, h, method: str, path: str, status: int, answer: Optional[dict], raw: bytes = b"") -> None:
        data = raw or json.dumps(answer).encode()
        self.calls.append((method, path, status))
        h.send_response(status)
        h.send_header("Content-Type", "text/html" if raw else "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _auth(self, h) -> Optional[Tuple[int, dict]]:
        """securityHandlers.accessTokenAuth: no header, another scheme or an unknown token: 401."""
        header = h.headers.get("Authorization")
        if not header:
            return 401, {"success": False, "description": "Requires Authentication"}
        scheme, _, token = header.partition(" ")
        if scheme != "Bearer":
            return 401, {"success": False,
                         "description": 'Authorization header should be in "Bearer $AUTH_TOKEN" format'}
        if token != self.token:
            return 401, {"success": False, "description": "Bad Credentials"}
        return None

    def _route(self, method: str, url, body: bytes) -> Tuple[int, dict]:
        parts = url.path.split("/")[1:]
        if parts[:2] != ["api", "v1"]:
            return 404, {"success": False, "description": "Not Found"}
        fields = urllib.parse.parse_qs(url.query).get("fields", [""])[0]
        rest = parts[2:]
        if method == "GET" and rest == ["devices"]:
            return 200, {"success": True, "description": "Devices Information",
                         "devices": [self._pick(p, fields) for p in self.phones.values()]}
        if method == "GET" and rest == ["user", "devices"]:
            return 200, {"success": True, "description": "Controlled devices information",
                         "devices": [self._pick(p, fields) for p in self.phones.values() if p.owner == ME]}
        if method == "POST" and rest == ["user", "devices"]:
            return self._lend(json.loads(body or b"{}"))
        if method == "POST" and rest == ["user", "adbPublicKeys"]:
            key = json.loads(body or b"{}").get("publickey")
            if not key:
                return 400, {"success": False, "description": "publickey is required"}
            self.keys.append(key)
            return 200, {"success": True}
        if len(rest) >= 3 and rest[:2] == ["user", "devices"]:
            return self._held(method, urllib.parse.unquote(rest[2]), rest[3:])
        return 404, {"success": False, "description": "Not Found"}

    @staticmethod
    def _pick(phone: FarmDevice, fields: str) -> dict:
        d = phone.public()
        return {k: v for k, v in d.items() if k in fields.split(",")} if fields else d

    def _lend(self, body: dict) -> Tuple[int, dict]:
        """user.addUserDevice: only an addable phone; STF's own 504 when the phone does not answer in time."""
        with self.lock:
            phone = self.phones.get(str(body.get("serial")))
            if phone is None:
                return 404, {"success": False, "description": "Not Found (device)"}
            if phone.taken_meanwhile:
                phone.owner = OTHER
            if not (phone.present and phone.ready and not phone.using and not phone.owner):
                return 403, {"success": False, "description": "Device is being used or not available"}
            if phone.lend_times_out:
                time.sleep(self.lend_wait)
                return 504, {"success": False, "description": "Device is not responding"}
            phone.owner = ME
            phone.history.append(f"lent for {body.get('timeout')} ms")
            if phone.lost_answer:
                phone.lost_answer = False
                return 502, {"success": False, "description": "Bad Gateway"}
        return 200, {"success": True, "description": "Device successfully added"}

    def _held(self, method: str, serial: str, tail: List[str]) -> Tuple[int, dict]:
        """remote connect on/off and the release: only by the holder (deviceutil.isOwnedByUser)."""
        with self.lock:
            phone = self.phones.get(serial)
            if phone is None:
                return 404, {"success": False, "description": "Device not found"}
            if not (phone.present and phone.ready and phone.owner and (phone.owner == ME or self.admin)
                    and phone.using):
                return 403, {"success": False, "description": ("You cannot release this device. Not owned by you"
                                                               if not tail else
                                                               "Device is not owned by you or is not available")}
            if tail == ["remoteConnect"] and method == "POST":
                if phone.relay is None:
                    phone.relay = Relay(phone.port, phone.take_away_on, lambda: self.take_away(serial))
                phone.history.append("remote connect")
                return 200, {"success": True, "description": "Remote connection is enabled",
                             "remoteConnectUrl": f"127.0.0.1:{phone.relay.port}"}
            if tail == ["remoteConnect"] and method == "DELETE":
                self._close_relay(phone)
                phone.history.append("remote disconnect")
                return 200, {"success": True, "description": "Device remote disconnected successfully"}
            if not tail and method == "DELETE":
                self._close_relay(phone)
                phone.owner = None
                phone.history.append("released")
                return 200, {"success": True, "description": "Device successfully removed"}
        return 404, {"success": False, "description": "Not Found"}

    @staticmethod
    def _close_relay(phone: FarmDevice) -> None:
        if phone.relay is not None:
            phone.relay.close()
            phone.relay = None
