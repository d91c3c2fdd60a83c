"""Push files to a device: skip what already matches by hash, temp name + verify + rename for the rest.

A file already in the device directory whose digest (with the device's hash tool, see hashes.py) is the local
file's is not sent again.  Every other file goes to a temporary name (sync push); the host hashes the bytes as
it reads them for the push, and one shell call at the end hashes every sent file on the device and renames
only those whose digest matches.  Nothing half-pushed or damaged ever has a final name.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from toolchain.errors import DeviceError, TorchdroidError, UsageError, VerificationError

from .adb import Device
from .hashes import HEX_LEN, TOOL_OF, LocalHashes, no_hash_tool, pick_algo, probe_command

log = logging.getLogger(__name__)

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
SAFE_DIR = re.compile(r"^/[A-Za-z0-9._/+-]+$")
PARTIAL_MARK = ".partial-"
SYNC_DATA_MAX = 64 * 1024  # the largest sync DATA packet adbd takes (docs/facts.md DS5)
_MARK = "--torchdroid-state--"


@dataclass(frozen=True)
class PushItem:
    local: Path
    name: str  # file name inside the device directory
    mode: int = 0o644
    sha256: Optional[str] = None  # known hash (from a manifest); checked against what is sent


@dataclass
class PushOutcome:
    name: str
    remote: str
    pushed: bool
    bytes: int
    sha256: str


def check_name(name: str) -> str:
    if not SAFE_NAME.match(name):
        raise UsageError(f"{name!r} cannot be used as a file name on the device",
                         remedy="use letters, digits, '.', '_', '+' and '-' only")
    return name


def check_dir(path: str) -> str:
    if not SAFE_DIR.match(path) or "/../" in path + "/" or path.rstrip("/") in ("", "/"):
        raise UsageError(f"{path!r} is not a usable device directory",
                         remedy="use an absolute path such as /data/local/tmp/torchdroid (letters, digits, ._+-/)")
    return path.rstrip("/")


class RemoteFile(NamedTuple):
    """A file in the device directory: its mode and its digest with the device's hash tool (None: unreadable)."""

    mode: int
    digest: Optional[str]


class RemoteState(dict):
    """``{name: RemoteFile}`` of the files there; ``leftovers``: temporary files of an interrupted deploy lie
    around; ``algo``: the hash the device checks with (hashes.pick_algo; None: it has no tool)."""

    leftovers = False
    algo: Optional[str] = None


def state_command(directory: str, names: Sequence[str]) -> str:
    """The read-only shell command behind remote_state, for a caller to run in a round trip it makes anyway."""
    q = " ".join(shlex.quote(n) for n in names)
    return (f"{probe_command()}; echo {_MARK}; (cd {shlex.quote(directory)} 2>/dev/null || exit 0; "
            f"stat -c '%a %n' {q} 2>/dev/null; echo {_MARK}; "
            f"for f in .*{PARTIAL_MARK}*; do [ -e \"$f\" ] && echo left; done; exit 0)")


def remote_state(device: Device, directory: str, names: Sequence[str]) -> RemoteState:
    """What of ``names`` exists in ``directory`` (hashed on the device), and which hash tool the device has.
    Reading it changes nothing on the device."""
    out = device.shell(state_command(directory, names), check=True, what=f"reading {directory}").output
    return parse_state(device, directory, out, names)


def parse_state(device: Device, directory: str, out: str, names: Sequence[str]) -> RemoteState:
    """remote_state from the output of state_command (for ``names``); the files found are hashed now."""
    probe, _, rest = out.partition(_MARK)
    stats, _, left = rest.partition(_MARK)
    state = RemoteState()
    state.algo = pick_algo(probe)
    state.leftovers = "left" in left.split()
    modes = {}
    for line in stats.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1] in names and re.fullmatch(r"[0-7]+", parts[0]):
            modes[parts[1]] = int(parts[0], 8)
    found = hash_on_device(device, directory, list(modes), state.algo) if modes and state.algo else {}
    state.update({name: RemoteFile(mode, found.get(name)) for name, mode in modes.items()})
    return state


def hash_on_device(device: Device, directory: str, names: Sequence[str], algo: str) -> Dict[str, str]:
    """``{name: digest}`` of files in ``directory``, hashed on the device with ``algo``'s tool."""
    qu = " ".join(shlex.quote(n) for n in names)
    out = device.shell(f"cd {shlex.quote(directory)} && {TOOL_OF[algo]} {qu}", what="hashing the files on the device")
    pattern = re.compile(rf"[0-9a-f]{{{HEX_LEN[algo]}}}")
    got = {}
    for line in out.output.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and pattern.fullmatch(parts[0]):
            got[parts[1].strip().lstrip("*")] = parts[0]
    return got


class _Reader:
    """A local file as the sync push reads it: counted and, with ``algo``, hashed (sha256 and the device's
    ``algo``) on the way, so the host reads a file it sends once.  adbutils reads 4 KB at a time; a sync
    DATA packet may hold 64 KB, so every read gives up to that: 16 times fewer packets and system calls (at
    150 MB/s, 4 KB packets took more CPU than this process got on a busy host)."""

    def __init__(self, path: Path, algo: Optional[str], on_bytes: Optional[Callable[[int], None]]):
        self.file = open(path, "rb")
        self.hashes = []
        if algo:
            self.hashes = [hashlib.sha256()] if algo == "sha256" else [hashlib.sha256(), hashlib.new(algo)]
        self.size = 0
        self.on_bytes = on_bytes

    def digests(self) -> Tuple[str, str]:
        """``(sha256, <algo> digest)`` of what was read."""
        return self.hashes[0].hexdigest(), self.hashes[-1].hexdigest()

    def read(self, n: int = -1) -> bytes:
        data = self.file.read(max(n, SYNC_DATA_MAX))
        for h in self.hashes:
            h.update(data)
        self.size += len(data)
        if self.on_bytes and data:
            self.on_bytes(len(data))
        return data

    def close(self) -> None:
        self.file.close()


class _Sent(NamedTuple):
    item: PushItem
    tmp: str  # its temporary name in the device directory
    size: int
    sha256: str
    digest: str  # with the device's hash tool


def push_all(device: Device, directory: str, items: Sequence[PushItem],
             on_progress: Optional[Callable[[str], None]] = None,
             on_bytes: Optional[Callable[[int], None]] = None,
             existing: Optional[RemoteState] = None,
             hashes: Optional[LocalHashes] = None) -> List[PushOutcome]:
    """Bring ``items`` into ``directory`` on the device; return what was pushed and what skipped, in order.

    ``existing``: the remote_state() of (at least) these names if the caller read it already; ``hashes``:
    the local digests shared by the deploy's devices (a file already on the device is compared by digest).
    Nothing on the device changes before the first file is sent (sync SEND creates the directory).
    """
    directory = check_dir(directory)
    for it in items:
        check_name(it.name)
    state = existing if existing is not None else remote_state(device, directory, [it.name for it in items])
    if state.algo is None:
        raise no_hash_tool(device.serial)
    hashes = hashes or LocalHashes()
    outcomes: Dict[int, PushOutcome] = {}
    fixes = [f"rm -f .*{PARTIAL_MARK}*"] if state.leftovers else []  # an interrupted deploy's temporary files
    send = []
    for i, it in enumerate(items):
        have = state.get(it.name)
        sha, digest = hashes.get(it.local, state.algo) if have and have.digest else (None, None)
        if digest is None or digest != have.digest:
            send.append(i)
            continue
        if it.sha256 and sha != it.sha256:
            raise changed_error(it, sha)
        if have.mode != it.mode:
            fixes.append(f"chmod {it.mode:o} {shlex.quote(it.name)}")
        log.debug("[%s] %s/%s is up to date", device.serial, directory, it.name)
        outcomes[i] = PushOutcome(it.name, f"{directory}/{it.name}", False, 0, sha)
    if fixes:
        device.shell(f"cd {shlex.quote(directory)} && " + " && ".join(fixes), check=True,
                     what="tidying the device directory")
    send.sort(key=lambda k: -items[k].local.stat().st_size)  # the largest first: the last verify is the shortest
    run = f"{os.getpid()}-{secrets.token_hex(3)}"  # in this push's temporary names
    checks, failure = [], None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"verify-{device.serial}") as verifier:
        try:
            for n, i in enumerate(send, 1):
                it = items[i]
                if on_progress:
                    on_progress(f"pushing {it.name} ({n}/{len(send)}, {it.local.stat().st_size / 1e6:.1f} MB)")
                tmp = f".{it.name}{PARTIAL_MARK}{run}"
                key, known = hashes.lookup(it.local, state.algo)  # known: not hashed again (CPU a busy host lacks)
                reader = _Reader(it.local, None if known else state.algo, on_bytes)
                device.push(reader, f"{directory}/{tmp}", it.mode, it.local.name)
                if known is None:
                    known = reader.digests()
                    hashes.store(key, known)
                sent = _Sent(it, tmp, reader.size, *known)
                checks.append((i, verifier.submit(verify_and_rename, device, directory, sent, state.algo)))
        except BaseException as e:
            failure = e
    if failure is not None:  # every verify ended: remove what was sent and not verified
        with contextlib.suppress(TorchdroidError):  # the connection may be gone: the next push removes them
            device.shell(f"rm -f {shlex.quote(directory)}/.*{PARTIAL_MARK}{run}")
        raise failure
    for i, check in checks:  # the first failure, once every file had its turn
        outcomes[i] = check.result()
    return [outcomes[i] for i in range(len(items))]


def verify_and_rename(device: Device, directory: str, s: _Sent, algo: str) -> PushOutcome:
    """One shell call: the sent file is hashed on the device, and when the digest is the one sent it gets its exact
    mode (adbd widens the SEND mode, docs/facts.md DS4) and its name; otherwise it is removed.  Runs while the next
    file is sent (measured: verifying every file after the last one cost 0.1-0.15 of `adb push` at 40 MB/s)."""
    tmp, name, q = shlex.quote(s.tmp), shlex.quote(s.item.name), shlex.quote(directory)
    if s.item.sha256 and s.sha256 != s.item.sha256:  # changed after convert recorded it: never renamed
        device.shell(f"rm -f {q}/{tmp}")  # whatever its exit code: the changed file is what to report
        raise changed_error(s.item, s.sha256)
    res = device.shell(f'cd {q} || exit 1; h=$({TOOL_OF[algo]} {tmp} 2>/dev/null); case "$h" in "{s.digest} "*) '
                       f'if chmod {s.item.mode:o} {tmp} && mv -f {tmp} {name}; then echo ok; '
                       f'else rm -f {tmp}; echo failed; fi;; *) rm -f {tmp}; echo "bad $h";; esac')
    word, _, got = res.output.strip().partition(" ")
    remote = f"{directory}/{s.item.name}"
    if word == "ok":
        log.info("[%s] pushed %s (%d bytes)", device.serial, remote, s.size)
        return PushOutcome(s.item.name, remote, True, s.size, s.sha256)
    if word == "bad":
        raise VerificationError(
            f"{s.item.name} arrived on {device.serial} corrupted ({algo} {got[:12] or 'none'}… != {s.digest[:12]}…)",
            cause="the transfer was altered on the way (bad cable/hub?) or the device storage is failing",
            remedy="run the deploy again; if it repeats, try another USB cable or port")
    raise DeviceError(f"could not verify and move {s.item.name} into place on {device.serial}",
                      cause="\n".join(res.tail(5)) or f"exit code {res.code}",
                      remedy=f"check the directory: adb -s {device.serial} shell ls -la {q}")


def changed_error(it: PushItem, digest: str) -> VerificationError:
    return VerificationError(
        f"{it.local} changed after it was recorded (sha256 {digest[:12]}… != {it.sha256[:12]}…)",
        cause="the file was modified or replaced after `invoke convert` wrote its manifest",
        remedy="run `invoke convert --force` to regenerate it",
    )
