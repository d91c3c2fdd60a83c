"""Push files to a device: skip what already matches by sha256, temp name + one sha256 check + rename for the rest.

A file already in the device directory whose ``sha256sum`` is the local file's sha256 is not sent again.  Every
other file goes to a temporary name (adbutils' sync push); the host hashes the bytes as it reads them for the push,
and one shell call after the push runs ``sha256sum`` on the device and renames the file only when the digests
match.  Nothing half-pushed or damaged ever has a final name.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import shlex
import threading
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from toolchain.errors import DeviceError, TorchdroidError, UsageError, VerificationError

from .adb import Device
from .hashes import HASH_TOOL, LocalHashes, has_sha256, no_hash_tool, probe_command

log = logging.getLogger(__name__)

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
SAFE_DIR = re.compile(r"^/[A-Za-z0-9._/+-]+$")
PARTIAL_MARK = ".partial-"
SYNC_DATA_MAX = 64 * 1024  # the largest sync DATA packet adbd takes (docs/facts.md DS5)
PUSHES_AT_ONCE = 3  # files in flight: the connections each opens and closes overlap the others' data (see _send)
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
    """A file in the device directory: its mode and its sha256 (None: unreadable)."""

    mode: int
    digest: Optional[str]


class RemoteState(dict):
    """``{name: RemoteFile}`` of the files there; ``leftovers``: temporary files of an interrupted deploy lie
    around; ``hash_tool``: the device has a sha256sum that computes the right digest."""

    leftovers = False
    hash_tool = False


def state_command(directory: str, names: Sequence[str]) -> str:
    """The read-only shell command behind remote_state, for a caller to run in a round trip it makes anyway."""
    q = " ".join(shlex.quote(n) for n in names)
    return (f"{probe_command()}; echo {_MARK}; (cd {shlex.quote(directory)} 2>/dev/null || exit 0; "
            f"stat -c '%a %n' {q} 2>/dev/null; echo {_MARK}; "
            f"for f in .*{PARTIAL_MARK}*; do [ -e \"$f\" ] && echo left; done; exit 0)")


def remote_state(device: Device, directory: str, names: Sequence[str]) -> RemoteState:
    """What of ``names`` exists in ``directory`` (hashed on the device), and whether the device has sha256sum.
    Reading it changes nothing on the device."""
    out = device.shell(state_command(directory, names), check=True, what=f"reading {directory}").output
    return parse_state(device, directory, out, names)


def parse_state(device: Device, directory: str, out: str, names: Sequence[str]) -> RemoteState:
    """remote_state from the output of state_command (for ``names``); the files found are hashed now."""
    probe, _, rest = out.partition(_MARK)
    stats, _, left = rest.partition(_MARK)
    state = RemoteState()
    state.hash_tool = has_sha256(probe)
    state.leftovers = "left" in left.split()
    modes = {}
    for line in stats.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1] in names and re.fullmatch(r"[0-7]+", parts[0]):
            modes[parts[1]] = int(parts[0], 8)
    found = hash_on_device(device, directory, list(modes)) if modes and state.hash_tool else {}
    state.update({name: RemoteFile(mode, found.get(name)) for name, mode in modes.items()})
    return state


def hash_on_device(device: Device, directory: str, names: Sequence[str]) -> Dict[str, str]:
    """``{name: sha256}`` of files in ``directory``, hashed on the device."""
    qu = " ".join(shlex.quote(n) for n in names)
    out = device.shell(f"cd {shlex.quote(directory)} && {HASH_TOOL} {qu}", what="hashing the files on the device")
    got = {}
    for line in out.output.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and re.fullmatch(r"[0-9a-f]{64}", parts[0]):
            got[parts[1].strip().lstrip("*")] = parts[0]
    return got


class _Reader:
    """A local file as the sync push reads it: counted and, unless its sha256 is known, hashed on the way, so the
    host reads a file it sends once.  adbutils asks for 4 KB at a time; a sync DATA packet may hold 64 KB, so
    every read gives up to that: 16 times fewer packets and system calls (at 150 MB/s, 4 KB packets took more
    CPU than this process got on a busy host).  ``stop`` set: the next read ends the push (another file's
    push failed, or the user pressed Ctrl-C)."""

    def __init__(self, path: Path, hashing: bool, on_bytes: Optional[Callable[[int], None]], stop: threading.Event):
        self.file = open(path, "rb")
        self.sha = hashlib.sha256() if hashing else None
        self.size = 0
        self.on_bytes = on_bytes
        self.stop = stop

    def read(self, n: int = -1) -> bytes:
        if self.stop.is_set():
            raise InterruptedError("the push was stopped")
        data = self.file.read(max(n, SYNC_DATA_MAX))
        if self.sha is not None:
            self.sha.update(data)
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


@dataclass
class _Pushes:
    """One push_all's sending: where to, the temporary names' mark, and what is shared by its files."""

    device: Device
    directory: str
    hashes: LocalHashes
    on_progress: Optional[Callable[[str], None]]
    on_bytes: Optional[Callable[[int], None]]
    count: int
    run: str = field(default_factory=lambda: f"{os.getpid()}-{secrets.token_hex(3)}")  # in the temporary names
    stop: threading.Event = field(default_factory=threading.Event)  # set: the pushes in flight end
    checker: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(PUSHES_AT_ONCE, thread_name_prefix="check"))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sent(self, n: int) -> None:
        """``on_bytes(n)``, one call at a time (the pushes in flight read in threads of their own)."""
        with self.lock:
            self.on_bytes(n)

    def push_one(self, n: int, it: PushItem) -> "Future[Union[PushOutcome, TorchdroidError]]":
        """Send ``it`` to its temporary name and hand it to the checker (check_in).  A failed push raises."""
        if self.on_progress:
            self.on_progress(f"pushing {it.name} ({n}/{self.count}, {it.local.stat().st_size / 1e6:.1f} MB)")
        tmp = f".{it.name}{PARTIAL_MARK}{self.run}"
        key, known = self.hashes.lookup(it.local)  # known: not hashed again (CPU a busy host lacks)
        reader = _Reader(it.local, known is None, self.sent if self.on_bytes else None, self.stop)
        self.device.push(reader, f"{self.directory}/{tmp}", it.mode, it.local.name)
        if known is None:
            known = reader.sha.hexdigest()
            self.hashes.store(key, known)
        return self.checker.submit(self.check_in, _Sent(it, tmp, reader.size, known))

    def check_in(self, sent: _Sent) -> Union[PushOutcome, TorchdroidError]:
        """verify_and_rename; a failed check is returned, so that the other files still get their turn."""
        try:
            return verify_and_rename(self.device, self.directory, sent)
        except (VerificationError, DeviceError) as e:
            return e

    def remove_partials(self) -> None:
        """Remove what this push sent and did not check in (the connection may be gone: the next push removes
        them then)."""
        with contextlib.suppress(TorchdroidError):
            self.device.shell(f"rm -f {shlex.quote(self.directory)}/.*{PARTIAL_MARK}{self.run}")


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
    if not state.hash_tool:
        raise no_hash_tool(device.serial)
    hashes = hashes or LocalHashes()
    outcomes, send, fixes = _compare(device, directory, items, state, hashes)
    if fixes:
        device.shell(f"cd {shlex.quote(directory)} && " + " && ".join(fixes), check=True,
                     what="tidying the device directory")
    pushes = _Pushes(device, directory, hashes, on_progress, on_bytes, len(send))
    outcomes.update(_send(pushes, {i: items[i] for i in send}))
    return [outcomes[i] for i in range(len(items))]


def _compare(device: Device, directory: str, items: Sequence[PushItem], state: RemoteState,
             hashes: LocalHashes) -> Tuple[Dict[int, PushOutcome], List[int], List[str]]:
    """``(outcomes of the files already there, indexes of those to send, shell commands that tidy up)``."""
    outcomes: Dict[int, PushOutcome] = {}
    fixes = [f"rm -f .*{PARTIAL_MARK}*"] if state.leftovers else []  # an interrupted deploy's temporary files
    send = []
    for i, it in enumerate(items):
        have = state.get(it.name)
        sha = hashes.get(it.local) if have and have.digest else None
        if sha is None or sha != have.digest:
            send.append(i)
            continue
        if it.sha256 and sha != it.sha256:
            raise changed_error(it, sha)
        if have.mode != it.mode:
            fixes.append(f"chmod {it.mode:o} {shlex.quote(it.name)}")
        log.debug("[%s] %s/%s is up to date", device.serial, directory, it.name)
        outcomes[i] = PushOutcome(it.name, f"{directory}/{it.name}", False, 0, sha)
    return outcomes, send, fixes


def _send(pushes: _Pushes, items: Dict[int, PushItem]) -> Dict[int, PushOutcome]:
    """Push ``items`` ({index: item}), the largest first, PUSHES_AT_ONCE at a time, each checked on the device while
    the next ones are sent: the two connections adbutils opens for each file (a STAT, then the SEND; each close
    sleeps 10 ms) overlap the other files' data, which share the link (measured at 150 MB/s on a busy host: one at
    a time 0.64-0.68 of `adb push`, two 0.75-0.77, three 0.77-0.80). A failed push stops the rest and removes this
    push's temporary files once the checks of the files sent ended; a failed check is raised once every file had
    its turn (the first in the items' order)."""
    order = sorted(items, key=lambda k: -items[k].local.stat().st_size)  # the largest first: the last check is short
    pool = ThreadPoolExecutor(max_workers=PUSHES_AT_ONCE, thread_name_prefix=f"push-{pushes.device.serial}")
    failure: Optional[BaseException] = None
    try:
        futures = {i: pool.submit(pushes.push_one, n, items[i]) for n, i in enumerate(order, 1)}
        done, _ = wait(futures.values(), return_when=FIRST_EXCEPTION)
        failure = next((f.exception() for f in done if f.exception()), None)
    except BaseException as e:  # Ctrl-C
        failure = e
    pushes.stop.set()  # after a failure: the pushes in flight end at their next read, the others never start
    pool.shutdown(wait=True, cancel_futures=True)
    pushes.checker.shutdown(wait=True)
    if failure is not None:
        pushes.remove_partials()
        raise failure
    results = {i: futures[i].result().result() for i in sorted(futures)}
    for result in results.values():
        if isinstance(result, TorchdroidError):
            raise result
    return results


def verify_and_rename(device: Device, directory: str, s: _Sent) -> PushOutcome:
    """One shell call: the sent file is hashed on the device with sha256sum, and when the digest is the one sent it
    gets its exact mode (adbd widens the SEND mode, docs/facts.md DS4) and its name; otherwise it is removed.  Runs
    while the next files are sent (measured: checking every file after the last one cost 0.1-0.15 of `adb push` at
    40 MB/s)."""
    tmp, name, q = shlex.quote(s.tmp), shlex.quote(s.item.name), shlex.quote(directory)
    if s.item.sha256 and s.sha256 != s.item.sha256:  # changed after convert recorded it: never renamed
        device.shell(f"rm -f {q}/{tmp}")  # whatever its exit code: the changed file is what to report
        raise changed_error(s.item, s.sha256)
    res = device.shell(f'cd {q} || exit 1; h=$({HASH_TOOL} {tmp} 2>/dev/null); case "$h" in "{s.sha256} "*) '
                       f'if chmod {s.item.mode:o} {tmp} && mv -f {tmp} {name}; then echo ok; '
                       f'else rm -f {tmp}; echo failed; fi;; *) rm -f {tmp}; echo "bad $h";; esac')
    word, _, got = res.output.strip().partition(" ")
    remote = f"{directory}/{s.item.name}"
    if word == "ok":
        log.info("[%s] pushed %s (%d bytes)", device.serial, remote, s.size)
        return PushOutcome(s.item.name, remote, True, s.size, s.sha256)
    if word == "bad":
        raise VerificationError(
            f"{s.item.name} arrived on {device.serial} corrupted (sha256 {got[:12] or 'none'}… != {s.sha256[:12]}…)",
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
