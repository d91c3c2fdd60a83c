"""Push files to a device: skip what already matches by hash, temp name + verify + rename for the rest."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shlex
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from toolchain.errors import DeviceError, TorchdroidError, UsageError, VerificationError
from toolchain.fsutil import sha256_file

from .adb import Device, SyncSession

log = logging.getLogger(__name__)

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
SAFE_DIR = re.compile(r"^/[A-Za-z0-9._/+-]+$")
PARTIAL_MARK = ".partial-"
INDEX_NAME = ".torchdroid-index"  # sha256 size mtime name, per deployed file
_STAT_MARK = "--torchdroid-stat--"


@dataclass(frozen=True)
class PushItem:
    local: Path
    name: str  # file name inside the device directory
    mode: int = 0o644
    sha256: Optional[str] = None  # known hash (from a manifest); computed when None

    def digest(self) -> str:
        return self.sha256 or sha256_file(self.local)


@dataclass
class PushOutcome:
    name: str
    remote: str
    pushed: bool
    bytes: int
    sha256: str
    size: int = 0
    mtime: int = 0


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


class RemoteState(dict):
    """``{name: (sha256, mode, size, mtime)}`` of the files there, and whether temporary files of an
    interrupted deploy are lying around (``leftovers``)."""

    leftovers = False


def remote_state(device: Device, directory: str, names: Sequence[str]) -> RemoteState:
    """What of ``names`` exists in ``directory``: ``{name: (sha256, mode, size, mtime)}``.

    Hashes come from the index a previous deploy wrote when size and mtime still
    match (rsync's quick check); every other existing file is hashed on the device.
    Reading it changes nothing on the device.
    """
    out = device.shell(state_command(directory, names), check=True, what=f"reading {directory}").output
    return parse_state(device, directory, out, names)


def state_command(directory: str, names: Sequence[str]) -> str:
    """The read-only shell command behind remote_state, for a caller to run in a round trip it makes anyway."""
    q = " ".join(shlex.quote(n) for n in names)
    return (f"(cd {shlex.quote(directory)} 2>/dev/null || exit 0; cat {INDEX_NAME} 2>/dev/null; echo {_STAT_MARK}; "
            f"stat -c '%s %Y %a %n' {q} 2>/dev/null; echo {_STAT_MARK}; "
            f"for f in .*{PARTIAL_MARK}*; do [ -e \"$f\" ] && echo left; done; exit 0)")


def parse_state(device: Device, directory: str, out: str, names: Sequence[str]) -> RemoteState:
    """remote_state from the output of state_command (for ``names``); files the index does not vouch for
    are hashed on the device now."""
    qdir = shlex.quote(directory)
    index_text, _, rest = out.partition(_STAT_MARK)
    stats, _, left = rest.partition(_STAT_MARK)
    index = parse_index(index_text)
    state = RemoteState()
    state.leftovers = "left" in left.split()
    unknown = []
    for line in stats.splitlines():
        parts = line.split(None, 3)
        if len(parts) != 4 or not (parts[0].isdigit() and parts[1].isdigit()):
            continue
        size, mtime, mode, name = int(parts[0]), int(parts[1]), int(parts[2], 8), parts[3]
        if name not in names:
            continue
        known = index.get(name)
        sha = known[0] if known and known[1:] == (size, mtime) else None
        state[name] = (sha, mode, size, mtime)
        if sha is None:
            unknown.append(name)
    if unknown:
        qu = " ".join(shlex.quote(n) for n in unknown)
        out = device.shell(f"cd {qdir} && sha256sum {qu}", check=True, what="hashing the files on the device").output
        for line in out.splitlines():
            parts = line.split(None, 1)
            if len(parts) == 2 and re.fullmatch(r"[0-9a-f]{64}", parts[0]):
                name = parts[1].strip().lstrip("*")
                if name in state:
                    state[name] = (parts[0],) + state[name][1:]
    return state


def parse_index(text: str) -> Dict[str, tuple]:
    """``sha256 size mtime name`` lines -> ``{name: (sha256, size, mtime)}``."""
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and re.fullmatch(r"[0-9a-f]{64}", parts[0]) and parts[1].isdigit() and parts[2].isdigit():
            out[parts[3]] = (parts[0], int(parts[1]), int(parts[2]))
    return out


def index_lines(state: Dict[str, tuple]) -> str:
    return "".join(f"{sha} {size} {mtime} {name}\n" for name, (sha, size, mtime) in sorted(state.items()) if sha)


def write_index(device: Device, directory: str, state: Dict[str, tuple]) -> None:
    """Record ``{name: (sha256, size, mtime)}`` on the device (temp name + rename, like every file)."""
    lines = index_lines(state)
    tmp = f"{directory}/.{INDEX_NAME.lstrip('.')}{PARTIAL_MARK}{os.getpid()}"
    device.shell(f"printf %s {shlex.quote(lines)} > {shlex.quote(tmp)} && mv -f {shlex.quote(tmp)} "
                 f"{shlex.quote(directory + '/' + INDEX_NAME)}", check=True, what="writing the hash index")


def push_all(device: Device, directory: str, items: Sequence[PushItem],
             on_progress: Optional[Callable[[str], None]] = None,
             on_bytes: Optional[Callable[[int], None]] = None,
             existing: Optional[RemoteState] = None) -> List[PushOutcome]:
    """Bring ``items`` into ``directory`` on the device; return what was pushed and what skipped.

    ``existing`` is the remote_state() of (at least) these names if the caller read it already.
    Nothing on the device changes before the first file is sent (sync SEND creates the directory);
    the first verify call removes what an interrupted deploy left (temporary names only).

    Each file goes to a temporary name; the device hashes it and only a match is
    renamed to the final name.  Verification runs while the next files are sent
    (the device's CPU hashes while the cable carries): whenever the verifier is
    free it takes every file sent since, in ONE shell call that hashes them in
    parallel on the device (a phone has 4-8 cores; one round trip per batch
    instead of one per file).
    """
    directory = check_dir(directory)
    for it in items:
        check_name(it.name)
    if existing is None:
        existing = remote_state(device, directory, [it.name for it in items])
    run = f"{os.getpid()}-{secrets.token_hex(3)}"  # in this deploy's temporary names; leftovers lack it
    cleanup = (f"for f in .*{PARTIAL_MARK}*; do case \"$f\" in *{PARTIAL_MARK}{run}-*) ;; "
               f"*) rm -f \"$f\";; esac; done; ") if existing.leftovers else ""
    outcomes: List[Optional[PushOutcome]] = [None] * len(items)
    # largest first: only the last files' verify is not hidden behind another transfer
    order = sorted(range(len(items)), key=lambda k: -items[k].local.stat().st_size)
    # what the index will hold besides the files verified now (known hashes of files that stay as they are)
    index = {name: (sha, size, mtime) for name, (sha, _mode, size, mtime) in existing.items() if sha}
    verifier = _BatchVerifier(device, directory, index, cleanup)
    session = device.sync_session()
    try:
        for n, i in enumerate(order, 1):
            it = items[i]
            remote = f"{directory}/{it.name}"
            have_hash, have_mode, size, mtime = existing.get(it.name, (None, None, 0, 0))
            if it.sha256 and have_hash == it.sha256 or not it.sha256 and have_hash == it.digest():
                if have_mode is not None and have_mode != it.mode:
                    device.shell(f"chmod {it.mode:o} {shlex.quote(remote)}", check=True, what=f"chmod {it.name}")
                log.debug("[%s] %s is up to date", device.serial, remote)
                outcomes[i] = PushOutcome(it.name, remote, False, 0, have_hash, size, mtime)
                continue
            if on_progress:
                on_progress(f"pushing {it.name} ({n}/{len(items)}, {it.local.stat().st_size / 1e6:.1f} MB)")
            tmp, sent, digest = send_to_temp(device, directory, it, on_bytes, session, run)
            verifier.submit(i, it, tmp, sent, digest)
    finally:
        session.close()
        results, index_written = verifier.close()  # wait for every verify, even when a later push failed
    if verifier.cleanup:  # nothing was verified: remove the leftovers on their own
        device.shell(f"cd {shlex.quote(directory)} && {verifier.cleanup}true", check=True,
                     what="removing the temporary files of an interrupted deploy")
    errors = []
    for i, res in sorted(results.items()):
        if isinstance(res, BaseException):
            errors.append(res)
        else:
            outcomes[i] = res
    done = [o for o in outcomes if o is not None]
    index.update({o.name: (o.sha256, o.size, o.mtime) for o in done})
    if not index_written and (any(o.pushed for o in done)
                              or any(existing.get(o.name, (None,))[0] is None for o in done)):
        write_index(device, directory, index)
    if errors:
        raise errors[0]  # the first verify failure
    return done


class _BatchVerifier:
    """One verify worker per device that checks every file queued since its last call in one shell call.

    The last batch (the one that starts after every file was sent) also writes the hash index, in the
    same shell call; ``index`` holds the entries known so far and grows with each batch's outcomes.
    """

    def __init__(self, device: Device, directory: str, index: Dict[str, tuple], cleanup: str = ""):
        self.device = device
        self.directory = directory
        self.cleanup = cleanup  # run by the first verify call
        self.index = dict(index)
        self.lock = threading.Lock()
        self.queued: List[tuple] = []
        self.results: Dict[int, object] = {}
        self.sending = True
        self.index_written = False
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"verify-{device.serial}")

    def submit(self, i: int, it: PushItem, tmp: str, sent: int, digest: str) -> None:
        with self.lock:
            self.queued.append((i, it, tmp, sent, digest))
        self.pool.submit(self._drain)

    def _drain(self) -> None:
        with self.lock:
            batch, self.queued = self.queued, []
            last = not self.sending
        if not batch:  # an earlier drain took these files already
            return
        try:
            cleanup, self.cleanup = self.cleanup, ""
            got = finish_batch(self.device, self.directory, [b[1:] for b in batch],
                               index=self.index if last else None, cleanup=cleanup)
            self.index_written = last
        except Exception as e:  # the connection dropped: every file of the batch failed with it
            got = [e] * len(batch)
        for (i, *_rest), res in zip(batch, got):
            self.results[i] = res
            if isinstance(res, PushOutcome):
                self.index[res.name] = (res.sha256, res.size, res.mtime)

    def close(self) -> Tuple[Dict[int, object], bool]:
        """Wait for every verify; return the outcomes and whether the last batch wrote the index."""
        with self.lock:
            self.sending = False
        self.pool.submit(self._drain)  # no-op unless files wait (their drain may have started before)
        self.pool.shutdown(wait=True)
        return self.results, self.index_written


def send_to_temp(device: Device, directory: str, it: PushItem,
                 on_bytes: Optional[Callable[[int], None]] = None, session: Optional[SyncSession] = None,
                 run: str = "") -> tuple:
    """Send a file to a temporary name; return it, the bytes sent and the sha256 the device must find.

    With a recorded hash (the manifest's) that is the hash to find: the device checks the file against
    the record directly, and the host need not hash it again while sending (a mismatch is told apart
    from a corrupted transfer afterwards, see finish_batch).  Otherwise the bytes are hashed as sent.
    """
    tmp = f"{directory}/.{it.name}{PARTIAL_MARK}{run or os.getpid()}-{secrets.token_hex(3)}"
    sent, digest = (session or device).push_file(it.local, tmp, it.mode, on_bytes, with_hash=not it.sha256)
    return tmp, sent, it.sha256 or digest


def changed_locally(it: PushItem) -> Optional[VerificationError]:
    """The error for a file that no longer matches its recorded hash (None when it still does)."""
    if not it.sha256:
        return None
    digest = sha256_file(it.local)
    if digest == it.sha256:
        return None
    return VerificationError(
        f"{it.local} changed after it was recorded (sha256 {digest[:12]}… != {it.sha256[:12]}…)",
        cause="the file was modified or replaced after `invoke convert` wrote its manifest",
        remedy="run `invoke convert --force` to regenerate it",
    )


# v TMP SHA256 NAME KEY MODE (in the device directory): hash TMP; only on a match chmod it and rename it
# to NAME.  One line per file (short lines are written atomically, so parallel jobs do not interleave them):
# "KEY OK SIZE MTIME", "KEY BAD SHA256" (TMP removed) or "KEY E" (TMP removed; the error is on stderr).
# With $IDX set, a verified file's index line is appended to it (after the known lines: the last line of
# a name wins, see parse_index).
_VERIFY_FN = ('v() { h=$(sha256sum "$1") || { rm -f "$1"; echo "$4 E"; return; }; h=${h%% *}; '
              'if [ "$h" = "$2" ]; then if chmod "$5" "$1" && mv -f "$1" "$3"; then '
              's=$(stat -c \'%s %Y\' "$3"); echo "$4 OK $s"; [ -z "$IDX" ] || echo "$h $s $3" >> "$IDX"; '
              'else rm -f "$1"; echo "$4 E"; fi; '
              'else rm -f "$1"; echo "$4 BAD $h"; fi; }; ')
_VERIFY_LINE = re.compile(r"^(\d+) (OK|BAD|E)\b ?(.*)$")


def finish_batch(device: Device, directory: str, batch: Sequence[tuple],
                 index: Optional[Dict[str, tuple]] = None, cleanup: str = "") -> List[object]:
    """Verify ``(item, tmp, sent, digest)`` files in one shell call, hashing them in parallel on the device.

    With ``index`` (``{name: (sha256, size, mtime)}`` known before this batch), the same call then writes
    the hash index: those lines plus one per file verified now, temp name + rename like every file.
    Returns a PushOutcome or the exception to raise, per file, in order.
    """
    calls = " ".join(f"v {shlex.quote(tmp.rsplit('/', 1)[1])} {digest} {shlex.quote(it.name)} {k} {it.mode:o} &"
                     for k, (it, tmp, _sent, digest) in enumerate(batch))
    head, tail = f"cd {shlex.quote(directory)} || exit 1; {cleanup}IDX=; ", ""
    if index is not None:
        tmp_index = f".{INDEX_NAME.lstrip('.')}{PARTIAL_MARK}{os.getpid()}"
        head += f"IDX={tmp_index}; printf %s {shlex.quote(index_lines(index))} > $IDX || exit 1; "
        tail = f"; mv -f $IDX {INDEX_NAME}"
    res = device.shell(f"{head}{_VERIFY_FN}{calls} wait{tail}")
    lines = {}
    other = []
    for line in res.output.splitlines():
        m = _VERIFY_LINE.match(line.strip())
        if m and int(m.group(1)) < len(batch):
            lines[int(m.group(1))] = (m.group(2), m.group(3).split())
        elif line.strip():
            other.append(line)
    out: List[object] = []
    for k, (it, tmp, sent, digest) in enumerate(batch):
        remote = f"{directory}/{it.name}"
        kind, rest = lines.get(k, ("E", []))
        if kind == "OK":
            log.info("[%s] pushed %s (%d bytes)", device.serial, remote, sent)
            size, mtime = (int(rest[0]), int(rest[1])) if len(rest) == 2 and all(x.isdigit() for x in rest) else (0, 0)
            out.append(PushOutcome(it.name, remote, True, sent, digest, size, mtime))
        elif kind == "BAD":
            got = rest[0] if rest else "?"
            out.append(changed_locally(it) or VerificationError(
                f"{it.name} arrived on {device.serial} corrupted (sha256 {got[:12]}… != {digest[:12]}…)",
                cause="the transfer was altered on the way (bad cable/hub?) or the device storage is failing",
                remedy="run the deploy again; if it repeats, try another USB cable or port",
            ))
        else:
            if k not in lines:  # the shell died before this file's line: do not leave its temporary file
                with contextlib.suppress(TorchdroidError):
                    device.shell(f"rm -f {shlex.quote(tmp)}")
            out.append(DeviceError(
                f"could not verify and move {it.name} into place on {device.serial}",
                cause="\n".join(other[-5:]) or f"exit code {res.code}",
                remedy=f"check the directory: adb -s {device.serial} shell ls -la {shlex.quote(directory)}"))
    return out
