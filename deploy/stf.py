"""Phones lent by a DeviceFarmer/STF farm: list them, keep those that can run what is deployed, take them,
remote-connect and ``adb connect`` each one, and give every one back (adb disconnect, remote connect closed,
device released) whatever happens: success, failure, a phone taken away, Ctrl-C or SIGTERM.

The farm's REST API (docs/facts.md, STF rows): every call carries ``Authorization: Bearer <token>``; the token is
read from ``STF_TOKEN`` only, never put in a URL, a log line, a record or an error message (``Farm.redact``).
A farm that does not answer, or answers 5xx, is asked again a bounded number of times.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

from toolchain.errors import DeviceError, ToolNotFound, TorchdroidError, UsageError
from toolchain.settings import default

from .adb import Adb, AdbServer
from .servers import Target

log = logging.getLogger(__name__)

TOKEN_VAR = "STF_TOKEN"
API = "/api/v1"
FIELDS = "serial,present,ready,using,owner,abi,sdk,model,manufacturer,version"
TOKEN_REMEDY = (f"create an access token in the farm's web UI (Settings > Keys > Access Tokens) and export it as "
                f"{TOKEN_VAR}=... before the deploy (it is read from the environment only)")
# a phone whose primary ABI is the key also runs binaries of these ABIs (its 32-bit sibling; the check on the
# phone, deploy/preflight.check_abi, decides with its full ABI list once it is connected)
RUNS_ALSO = {"arm64-v8a": ("armeabi-v7a",), "x86_64": ("x86",)}
_RETRIED = (500, 502, 503, 504)


@dataclass(frozen=True)
class FarmPhone:
    """One entry of ``GET /api/v1/devices``: STF's own serial and what it says about the phone."""

    serial: str
    present: bool
    ready: bool
    using: bool
    owner: str  # the holder's name or e-mail; "" when nobody holds it
    abi: str
    sdk: int
    model: str
    manufacturer: str = ""
    version: str = ""

    @classmethod
    def from_json(cls, d: dict) -> "FarmPhone":
        owner = d.get("owner") or {}
        sdk = str(d.get("sdk") or "")
        return cls(str(d.get("serial", "")), bool(d.get("present")), bool(d.get("ready")), bool(d.get("using")),
                   str(owner.get("name") or owner.get("email") or "someone") if owner else "",
                   str(d.get("abi") or ""), int(sdk) if sdk.isdigit() else 0, str(d.get("model") or "?"),
                   str(d.get("manufacturer") or ""), str(d.get("version") or ""))

    @property
    def name(self) -> str:
        return f"{self.serial} ({self.model})"


@dataclass(frozen=True)
class Needs:
    """What every phone must offer to run the deploy: the binaries' ABIs and the lowest API level."""

    abis: Tuple[str, ...] = ()
    min_sdk: int = 0


@dataclass(frozen=True)
class NotTaken:
    phone: FarmPhone
    reason: str


class FarmAnswer(Exception):
    """A farm's refusal of one call (a 4xx, or STF's own 504 "Device is not responding"): its status and text."""

    def __init__(self, status: int, description: str):
        super().__init__(f"{status} {description}")
        self.status, self.description = status, description


class Farm:
    """A client of one STF farm's REST API (``URL/api/v1``) with one access token."""

    def __init__(self, url: str, token: str, timeout: float = 30.0, attempts: int = 4, pause: float = 0.5):
        self.base = api_base(url)
        self.name = self.base[: -len(API)]
        self._token = token
        self.timeout, self.attempts, self.pause = timeout, attempts, pause

    @classmethod
    def from_env(cls, url: str, env: Optional[Mapping[str, str]] = None, **kw) -> "Farm":
        token = (os.environ if env is None else env).get(TOKEN_VAR, "").strip()
        if not token:
            raise UsageError(f"deploying to the farm {api_base(url)[:-len(API)]} needs an access token in {TOKEN_VAR}",
                             cause=f"the environment variable {TOKEN_VAR} is not set", remedy=TOKEN_REMEDY)
        if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
            raise UsageError(f"{TOKEN_VAR} does not hold an access token: it has blanks or characters a token never "
                             "has (its value is not shown)", remedy=TOKEN_REMEDY)
        return cls(url, token, **kw)

    def redact(self, text: object) -> str:
        return str(text).replace(self._token, "***") if self._token else str(text)

    def call(self, method: str, path: str, body: Optional[dict] = None) -> dict:
        """The JSON answer of one call; FarmAnswer for a refusal, ToolNotFound when the farm does not answer (after
        ``attempts`` tries), UsageError for a token it refuses."""
        last = ""
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(self.pause * 2 ** (attempt - 1))
            try:
                return self._once(method, path, body)
            except _Again as e:
                last = self.redact(e)
                log.debug("%s %s%s: %s (attempt %d of %d)", method, self.name, path, last, attempt + 1, self.attempts)
        raise ToolNotFound(f"the farm {self.name} does not answer {method} {API}{path.split('?')[0]}",
                           cause=f"{last} ({self.attempts} attempts)",
                           remedy="check that the farm is up (open its web UI) and that the URL (--stf / deploy.stf.url) "
                                  "is right, then deploy again")

    def _once(self, method: str, path: str, body: Optional[dict]) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self._token}", "Accept": "application/json",
            **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with _OPENER.open(request, timeout=self.timeout) as answer:
                return self._json(answer.read(), path)
        except urllib.error.HTTPError as e:
            return self._refused(e, path)
        except (urllib.error.URLError, OSError, socket.timeout) as e:
            raise _Again(f"{type(e).__name__}: {getattr(e, 'reason', e)}") from e

    def _refused(self, e: urllib.error.HTTPError, path: str) -> dict:
        text = e.read().decode("utf-8", "replace")
        try:
            description = str(json.loads(text).get("description", ""))
        except (ValueError, AttributeError):
            description = ""
        if 300 <= e.code < 400:
            raise UsageError(f"the farm {self.name} redirects {API}{path.split('?')[0]} to "
                             f"{self.redact(e.headers.get('Location', '?'))}",
                             cause="torchdroid does not follow a redirect: the access token would go along",
                             remedy="give the address it redirects to (e.g. its https:// one) with --stf or "
                                    "deploy.stf.url") from None
        if e.code == 401:
            raise UsageError(f"the farm {self.name} refuses the access token in {TOKEN_VAR}",
                             cause=f"401 {self.redact(description or text[:200])}", remedy=TOKEN_REMEDY) from None
        if e.code in _RETRIED and not (e.code == 504 and description):  # STF's own 504 names the phone's silence
            raise _Again(f"HTTP {e.code} {self.redact(description or e.reason)}") from None
        if e.code == 404 and path.startswith("/devices"):
            raise self._not_stf(f"HTTP 404 for {API}/devices") from None
        raise FarmAnswer(e.code, self.redact(description or e.reason)) from None

    def _json(self, raw: bytes, path: str) -> dict:
        try:
            answer = json.loads(raw.decode("utf-8"))
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or "success" not in answer:
            raise self._not_stf(f"{API}{path} did not answer with STF's JSON ({raw[:60]!r})")
        return answer

    def _not_stf(self, cause: str) -> UsageError:
        return UsageError(f"{self.name} is not a DeviceFarmer/STF farm's API", cause=self.redact(cause),
                          remedy="give the address of the farm's web UI, e.g. --stf https://stf.example.org "
                                 f"(torchdroid adds {API})")

    # ------------------------------------------------------------------ the calls torchdroid makes

    def phones(self) -> List[FarmPhone]:
        try:
            answer = self.call("GET", f"/devices?fields={FIELDS}")
        except FarmAnswer as e:
            raise self._not_stf(f"{API}/devices answered {e}") from None
        if not isinstance(answer.get("devices"), list):
            raise self._not_stf(f"{API}/devices has no device list")
        return [FarmPhone.from_json(d) for d in answer["devices"] if isinstance(d, dict)]

    def held(self) -> List[str]:
        """The serials this token holds now."""
        return [str(d.get("serial")) for d in self.call("GET", "/user/devices?fields=serial").get("devices") or []]

    def take(self, serial: str, lend_s: float) -> None:
        self.call("POST", "/user/devices", {"serial": serial, "timeout": int(lend_s * 1000)})

    def remote_connect(self, serial: str) -> str:
        url = str(self.call("POST", f"/user/devices/{urllib.parse.quote(serial)}/remoteConnect")
                  .get("remoteConnectUrl") or "")
        if ":" not in url:
            raise FarmAnswer(200, f"remote connect gave no HOST:PORT ({url!r})")
        return url

    def remote_disconnect(self, serial: str) -> None:
        self.call("DELETE", f"/user/devices/{urllib.parse.quote(serial)}/remoteConnect")

    def give_back(self, serial: str) -> None:
        self.call("DELETE", f"/user/devices/{urllib.parse.quote(serial)}")

    def add_adb_key(self, publickey: str) -> None:
        """Register this host's adb key (remote connect needs it); a refusal is only logged: the phone may then show
        as unauthorized, which the deploy names with its fix."""
        try:
            self.call("POST", "/user/adbPublicKeys", {"publickey": publickey, "title": "torchdroid"})
        except FarmAnswer as e:
            log.warning("the farm %s did not take this host's adb key (%s): add it in its web UI (Settings > Keys)",
                        self.name, e)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed (urllib would send the token on to wherever it points): it is an HTTPError."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ARG002 - the handler's signature
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


class _Again(Exception):
    """A failure worth asking again: no answer, a connection cut, a 5xx."""


def api_base(url: str) -> str:
    """``https://stf.example.org`` (or with ``/api/v1``) -> ``https://stf.example.org/api/v1``; the URL's user and
    password, if any, are not kept (they would end up in messages)."""
    parts = urllib.parse.urlsplit(str(url).strip())
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        shown = parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl() if "@" in parts.netloc \
            else str(url).strip()
        raise UsageError(f"the farm URL {shown!r} (--stf / deploy.stf.url) is not an http(s) address with a host "
                         "(and a port from 1 to 65535, if any)",
                         remedy="give the address of the farm's web UI, e.g. --stf https://stf.example.org "
                                "(or deploy.stf.url)")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    host += f":{port}" if port else ""
    path = parts.path.rstrip("/")
    path = path[: -len(API)] if path.endswith(API) else path
    return f"{parts.scheme}://{host}{path}{API}"


# --------------------------------------------------------------------------- which phones


def refusal(phone: FarmPhone, needs: Needs) -> Optional[str]:
    """Why ``phone`` is not taken (None: it is), from the farm's list alone: before anything is taken."""
    if not phone.present:
        return "not present (disconnected from the farm)"
    if phone.owner or phone.using:
        return f"in use by {phone.owner or 'someone'}"
    if not phone.ready:
        return "not ready (the farm is still preparing it)"
    wrong = [abi for abi in needs.abis if abi != phone.abi and abi not in RUNS_ALSO.get(phone.abi, ())]
    if wrong:
        return f"wrong ABI: it is {phone.abi or 'unknown'}, the binary is {wrong[0]}"
    if phone.sdk < needs.min_sdk:
        return f"too old: Android {phone.version or '?'} (SDK {phone.sdk}) < SDK {needs.min_sdk}"
    return None


def choose(phones: Sequence[FarmPhone], needs: Needs, serials: Sequence[str] = ()) -> Tuple[List[FarmPhone],
                                                                                             List[NotTaken]]:
    """The phones that fit (in the farm's order) and every other one with its reason; ``serials`` narrows the list."""
    fit, not_taken = [], []
    for phone in phones:
        if serials and phone.serial not in serials:
            continue
        why = refusal(phone, needs)
        if why is None:
            fit.append(phone)
        else:
            not_taken.append(NotTaken(phone, why))
    return fit, not_taken


def adb_public_key(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """This host's adb public key (``$ANDROID_USER_HOME`` or ``~/.android``, ``adbkey.pub``), None when absent."""
    env = os.environ if env is None else env
    home = Path(env["ANDROID_USER_HOME"]) if env.get("ANDROID_USER_HOME") else Path(env.get("HOME", "~")) / ".android"
    path = home.expanduser() / "adbkey.pub"
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


# --------------------------------------------------------------------------- taking and giving back


@dataclass(frozen=True)
class FarmSettings:
    """A DeviceFarmer/STF farm the phones of the run are lent by (deploy/stf.py); its token is read from STF_TOKEN."""

    url: str  # the farm's web address (--stf / deploy.stf.url)
    count: Optional[int] = None  # at most this many phones (--stf-count; None: every one that fits)
    lend: float = default("deploy.stf.lend")  # seconds the farm lends each phone; it takes it back by itself after
    connect_wait: float = 15.0  # seconds for a connected phone to come up on the adb server


class Lease:
    """The phones of one run taken from one farm; ``close()`` gives every one back (each step once, best effort)."""

    def __init__(self, farm: Farm, server: AdbServer, s: FarmSettings):
        self.farm, self.server, self.s = farm, server, s
        self.steps: List[Tuple[str, str, Callable[[], None]]] = []  # (phone, what, undo), undone last first
        self.not_taken: List[NotTaken] = []
        self.guard = threading.Lock()
        self.connecting = threading.Lock()

    def _undo_later(self, phone: FarmPhone, what: str, undo: Callable[[], None]) -> None:
        with self.guard:
            self.steps.append((phone.name, what, undo))

    def take(self, phones: Sequence[FarmPhone]) -> List[Target]:
        """Take ``phones`` in the farm's order, in parallel: waves of as many as are still wanted (--stf-count); a
        phone the farm refuses meanwhile is named and the next one is tried."""
        targets: List[Target] = []
        queue = list(phones)
        while queue and (self.s.count is None or len(targets) < self.s.count):
            wave_size = len(queue) if self.s.count is None else self.s.count - len(targets)
            wave, queue = queue[:wave_size], queue[wave_size:]
            with ThreadPoolExecutor(max_workers=min(len(wave), 16), thread_name_prefix="stf-take") as pool:
                for phone, got in zip(wave, pool.map(self._try_take, wave)):
                    if isinstance(got, Target):
                        targets.append(got)
                    else:
                        self.not_taken.append(NotTaken(phone, got))
        self.not_taken += [NotTaken(p, f"not needed (--stf-count {self.s.count})") for p in queue]
        return targets

    def _try_take(self, phone: FarmPhone) -> Union[Target, str]:
        try:
            return self._take_one(phone)
        except FarmAnswer as e:
            return _lend_refused(e)

    def _take_one(self, phone: FarmPhone) -> Target:
        """Lend, remote connect, ``adb connect``: each step's undo is noted before the step (a Ctrl-C in the middle of
        one still undoes it; undoing what was not done is a refusal the farm answers and close() ignores)."""
        farm, serial = self.farm, phone.serial
        refused = threading.Event()  # the farm said no: nothing to give back (an admin's token would release another's)
        self._undo_later(phone, "release", lambda: refused.is_set() or farm.give_back(serial))
        try:
            farm.take(serial, self.s.lend)
        except FarmAnswer as e:  # a 403 after a lend asked again (a 5xx first) may be the farm's yes to the first ask
            if e.status != 403 or serial not in farm.held():
                refused.set()
                raise
        self._undo_later(phone, "close remote connect", lambda: farm.remote_disconnect(serial))
        address = farm.remote_connect(serial)
        self._undo_later(phone, "adb disconnect", lambda: self.server.disconnect(address))
        try:
            with self.connecting:  # one `adb connect` at a time: adb 29 has been seen to crash on two at once
                said = self.server.connect(address, timeout=self.s.connect_wait)
        except TorchdroidError:  # the adb server itself does not answer: no phone can be connected
            raise
        except Exception as e:  # noqa: BLE001 - adbutils' AdbError/AdbTimeout, a socket error: this phone only
            said = f"{type(e).__name__}: {e}"
        if "connected to" not in said:  # adb says "connected to"/"already connected to", else why not
            raise FarmAnswer(0, f"`adb connect {address}`: {said}")
        state = self._state(address)
        log.info("[%s] lent by the farm %s: adb %s (%s)", serial, farm.name, address, state)  # the adb lines' name
        return Target(self.server, self.server.address, address, state, serial, origin=farm.name,
                      lost=lambda: self.gone(serial))

    def _state(self, address: str) -> str:
        """The phone's adb state once it left "connecting"/"offline" (or that state after ``connect_wait``)."""
        deadline, state = time.monotonic() + self.s.connect_wait, "offline"
        while time.monotonic() < deadline:
            state = self.server.devices().get(address, "offline")
            if state not in ("offline", "connecting", "authorizing"):
                break
            time.sleep(0.1)
        return state

    def gone(self, serial: str) -> Optional[str]:
        """Why a phone whose run failed is gone, when the farm took it back (None: it is still ours)."""
        try:
            if serial in self.farm.held():
                return None
        except (TorchdroidError, FarmAnswer):
            return None
        return (f"the farm {self.farm.name} took {serial} back during the run (someone with more rights took it, or "
                "the lend ended: deploy.stf.lend)")

    def close(self) -> None:
        """Give every phone back, last step first; a step that fails is logged and the others still run."""
        while self.steps:
            with self.guard:
                name, what, undo = self.steps.pop()
            try:
                undo()
            except FarmAnswer as e:
                log.debug("farm %s: %s of %s: %s", self.farm.name, what, name, e)
            except Exception as e:  # noqa: BLE001 - whatever it is, every other phone is still given back
                log.warning("could not %s %s of the farm %s (%s): give it back in the farm's web UI", what, name,
                            self.farm.name, self.farm.redact(getattr(e, "what", e)))


def _lend_refused(e: FarmAnswer) -> str:
    if e.status == 403:
        return "taken by someone else meanwhile"
    if e.status == 504:
        return "it did not answer the farm (the lend timed out)"
    if e.status == 0:
        return f"adb could not reach it: {e.description}"
    return f"the farm refused it ({e})"


def farm_targets(s: FarmSettings, adb: Adb, serials: Sequence[str], needs: Needs,
                 lent: contextlib.ExitStack, env: Optional[Mapping[str, str]] = None) -> List[Target]:
    """Take the farm's phones that fit, connect them to the run's (first) adb server, and have ``lent`` give them
    back.  Names every phone not taken and why; raises when none can be taken."""
    farm = Farm.from_env(s.url, env, timeout=min(30.0, adb.timeout))  # STF itself gives up on a phone after 5 s
    server = adb.servers()[0]
    server.verify()
    listed = farm.phones()
    fit, not_taken = choose(listed, needs, serials)
    unknown = [x for x in serials if x not in {p.serial for p in listed}]
    if unknown:
        log.warning("the farm %s lists no phone %s (--serial takes the farm's serials: see its web UI)", farm.name,
                    ", ".join(unknown))
    lease = Lease(farm, server, s)
    lease.not_taken = not_taken
    lent.callback(lease.close)
    key = adb_public_key(env)
    if fit and key:
        farm.add_adb_key(key)
    targets = lease.take(fit)
    _say_not_taken(farm, lease.not_taken, len(targets))
    if not targets:
        why = [f"{n.phone.name}: {n.reason}" for n in lease.not_taken]
        why += [f"it lists no phone {', '.join(unknown)}"] if unknown else [] if why else ["it lists no phone"]
        raise DeviceError(f"no phone of the farm {farm.name} can be taken for this deploy", cause="; ".join(why),
                          remedy="wait for a phone to be free, build for the farm's ABI (`invoke build-android --abi "
                                 "ABI`), or ask the farm's admins for access to more phones")
    return targets


def _say_not_taken(farm: Farm, not_taken: Sequence[NotTaken], taken: int) -> None:
    if not_taken:
        log.warning("the farm %s: %d phone(s) taken; not taken: %s", farm.name, taken,
                    "; ".join(f"{n.phone.name}: {n.reason}" for n in not_taken))


def needs_of(plan: Any, install: bool) -> Needs:
    """What the plan's (deploy.plan.DeployPlan) binaries need of a phone: their ABIs, and the highest of their API levels and (when it is
    installed) the app's minSdk."""
    et = plan.executorch
    binaries = [b for b in (plan.binary, et.runner if et is not None else None) if b is not None]
    app_sdk = plan.app.facts.min_sdk if plan.app is not None and install else None
    return Needs(tuple(dict.fromkeys(b.abi for b in binaries if b.abi)),
                 max([m for m in [b.api_level for b in binaries] + [app_sdk] if m] or [0]))
