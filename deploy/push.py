"""Push files to a device: skip what already matches by hash, temp name + verify + rename for the rest."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import secrets
import shlex
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from toolchain.errors import DeviceError, TorchdroidError, UsageError, VerificationError
from toolchain.fsutil import sha256_file

from .adb import Device, SyncSession
from .hashes import HEX_LEN, TOOL_OF, LocalHashes, no_hash_tool, pick_algo, probe_command
from .lock import Held

log = logging.getLogger(__name__)

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
SAFE_DIR = re.compile(r"^/[A-Za-z0-9._/+-]+$")
PARTIAL_MARK = ".partial-"
INDEX_NAME = ".torchdroid-index"  # sha256 size mtime name, per deployed file
_STAT_MARK = "--torchdroid-stat--"
_FIRST_RUNS = 2  # runs of the hash tool for a batch that more files follow (measured: fewer processes than one
# per file, and on two host cores 3-5 ms faster per loopback deploy than one run; a phone has more cores)


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


@dataclass(frozen=True)
class RemoteFile:
    """A file in the device directory: its sha256 when the hash index vouches for it (size and mtime
    unchanged), else its digest with the device's hash tool (``digest``, hashed while reading the state)."""

    sha256: Optional[str]
    mode: int
    size: int
    mtime: int
    digest: Optional[str] = None


class RemoteState(dict):
    """``{name: RemoteFile}`` of the files there; ``leftovers``: temporary files of an interrupted deploy
    lie around; ``indexed``: the directory has a hash index (with anything in it); ``algo``: the hash the
    device checks with (hashes.pick_algo; None: it has no tool)."""

    leftovers = False
    indexed = False
    algo: Optional[str] = None


def remote_state(device: Device, directory: str, names: Sequence[str]) -> RemoteState:
    """What of ``names`` exists in ``directory``, and which hash tool the device has.

    Hashes come from the index a previous deploy wrote when size and mtime still
    match (rsync's quick check); every other existing file is hashed on the device.
    Reading it changes nothing on the device.
    """
    out = device.shell(state_command(directory, names), check=True, what=f"reading {directory}").output
    return parse_state(device, directory, out, names)


def state_command(directory: str, names: Sequence[str]) -> str:
    """The read-only shell command behind remote_state, for a caller to run in a round trip it makes anyway."""
    q = " ".join(shlex.quote(n) for n in names)
    return (f"{probe_command()}; echo {_STAT_MARK}; "
            f"(cd {shlex.quote(directory)} 2>/dev/null || exit 0; cat {INDEX_NAME} 2>/dev/null; echo {_STAT_MARK}; "
            f"stat -c '%s %Y %a %n' {q} 2>/dev/null; echo {_STAT_MARK}; "
            f"for f in .*{PARTIAL_MARK}*; do [ -e \"$f\" ] && echo left; done; exit 0)")


def parse_state(device: Device, directory: str, out: str, names: Sequence[str]) -> RemoteState:
    """remote_state from the output of state_command (for ``names``); files the index does not vouch for
    are hashed on the device now (with the cheapest sound tool it has)."""
    probe, _, out = out.partition(_STAT_MARK)
    index_text, _, rest = out.partition(_STAT_MARK)
    stats, _, left = rest.partition(_STAT_MARK)
    index = parse_index(index_text)
    state = RemoteState()
    state.algo = pick_algo(probe)
    state.leftovers = "left" in left.split()
    state.indexed = bool(index_text.strip())
    for line in stats.splitlines():
        parts = line.split(None, 3)
        if len(parts) != 4 or not (parts[0].isdigit() and parts[1].isdigit()) or parts[3] not in names:
            continue
        size, mtime, mode, name = int(parts[0]), int(parts[1]), int(parts[2], 8), parts[3]
        known = index.get(name)
        state[name] = RemoteFile(known[0] if known and known[1:] == (size, mtime) else None, mode, size, mtime)
    unknown = [n for n, f in state.items() if f.sha256 is None]
    if unknown and state.algo:
        for name, digest in hash_on_device(device, directory, unknown, state.algo).items():
            if name in state:
                state[name] = replace(state[name], digest=digest)
    return state


def hash_on_device(device: Device, directory: str, names: Sequence[str], algo: str) -> Dict[str, str]:
    """``{name: digest}`` of files in ``directory``, hashed on the device with ``algo``'s tool."""
    qu = " ".join(shlex.quote(n) for n in names)
    out = device.shell(f"cd {shlex.quote(directory)} && {TOOL_OF[algo]} {qu}", check=True,
                       what="hashing the files on the device").output
    pattern = re.compile(rf"[0-9a-f]{{{HEX_LEN[algo]}}}")
    got = {}
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and pattern.fullmatch(parts[0]):
            got[parts[1].strip().lstrip("*")] = parts[0]
    return got


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
             existing: Optional[RemoteState] = None,
             hashes: Optional[LocalHashes] = None, release: Optional[Held] = None) -> List[PushOutcome]:
    """Bring ``items`` into ``directory`` on the device; return what was pushed and what skipped.

    ``existing`` is the remote_state() of (at least) these names if the caller read it already;
    ``hashes`` the LocalHashes shared by the deploy's device workers (each local file hashed once).
    Nothing on the device changes before the first file is sent (sync SEND creates the directory);
    the first verify call removes what an interrupted deploy left (temporary names only).

    Each file goes to a temporary name; the device hashes it and only a match is renamed to the
    final name.  The host hashes the files in the background while they are sent, and verification
    runs while the next files are sent: whenever the verifier is free it takes every file sent since,
    in ONE shell call that hashes them in parallel on the device.

    ``release``: the device directory's lock, when nothing follows this push under it; the verify call that
    ends the push removes it too (one round trip less), once every other verify call of the push ended.
    ``release.released`` says whether it did; when not, the caller's unlock removes it.
    """
    directory = check_dir(directory)
    for it in items:
        check_name(it.name)
    if existing is None:
        existing = remote_state(device, directory, [it.name for it in items])
    if existing.algo is None:
        raise no_hash_tool(device.serial)
    own = hashes is None
    hashes = hashes or LocalHashes()
    try:
        return _push_planned(device, directory, items, existing, hashes, on_progress, on_bytes, release)
    finally:
        if own:
            hashes.close()


def _push_planned(device: Device, directory: str, items: Sequence[PushItem], existing: RemoteState,
                  hashes: LocalHashes, on_progress: Optional[Callable[[str], None]],
                  on_bytes: Optional[Callable[[int], None]], release: Optional[Held] = None) -> List[PushOutcome]:
    """plan (what is there already) -> send and verify the rest -> write the index -> outcomes in order."""
    skipped, order = plan_push(device, directory, items, existing, hashes)
    run = f"{os.getpid()}-{secrets.token_hex(3)}"  # in this deploy's temporary names; leftovers lack it
    cleanup = (f"for f in .*{PARTIAL_MARK}*; do case \"$f\" in *{PARTIAL_MARK}{run}-*) ;; "
               f"*) rm -f \"$f\";; esac; done; ") if existing.leftovers else ""
    # what the index will hold besides the files verified now (known hashes of files that stay as they are)
    index = {o.name: (o.sha256, o.size, o.mtime) for o in skipped.values()}
    if release is not None and order:  # the marks of the verify calls (see _BatchVerifier) go with the lock
        release.also.append(f"{shlex.quote(directory)}/{_ENDED_MARK}{run}-*")
    verifier = _BatchVerifier(device, directory, existing.algo, index, cleanup,
                              total=sum(items[i].local.stat().st_size for i in order),
                              rewrite=bool(index) or existing.indexed, release=release if order else None, run=run)
    try:
        _send_all(device, directory, items, order, hashes, verifier, run, on_progress, on_bytes)
    finally:
        results, index_written = verifier.close()  # wait for every verify, even when a later push failed
    if verifier.cleanup:  # nothing was verified: remove the leftovers on their own
        device.shell(f"cd {shlex.quote(directory)} && {verifier.cleanup}true", check=True,
                     what="removing the temporary files of an interrupted deploy")
    return _outcomes(device, directory, existing, skipped, index, results, index_written)


def _outcomes(device: Device, directory: str, existing: RemoteState, skipped: Dict[int, PushOutcome],
              index: Dict[str, tuple], results: Dict[int, object], index_written: bool) -> List[PushOutcome]:
    """The outcomes in item order; the index written when no verify call did and it is due; the first
    verify failure raised."""
    outcomes = dict(skipped)
    errors = [res for _i, res in sorted(results.items()) if isinstance(res, BaseException)]
    outcomes.update({i: res for i, res in results.items() if isinstance(res, PushOutcome)})
    done = [outcomes[i] for i in sorted(outcomes)]
    index.update({o.name: (o.sha256, o.size, o.mtime) for o in done})
    vouched = all(existing[o.name].sha256 is not None for o in done if not o.pushed)
    if not index_written and (any(o.pushed for o in done) or not vouched):
        with contextlib.suppress(*((TorchdroidError,) if errors else ())):  # never mask the first failure
            write_index(device, directory, index)
    if errors:
        raise errors[0]
    return done


def plan_push(device: Device, directory: str, items: Sequence[PushItem], existing: RemoteState,
              hashes: LocalHashes) -> Tuple[Dict[int, PushOutcome], List[int]]:
    """``({index: outcome} of the items already there, indices to send, largest first)``.

    A file already there keeps its place when its hash matches (a wrong mode is fixed with chmod);
    the largest files go first, so that only the last, small files' verify is not hidden behind
    another transfer.
    """
    skipped: Dict[int, PushOutcome] = {}
    chmods = []
    send = []
    for i, it in enumerate(items):
        have = existing.get(it.name)
        sha = _matching_sha(it, have, hashes, existing.algo) if have else None
        remote = f"{directory}/{it.name}"
        if sha is None:
            send.append(i)
            continue
        if have.mode != it.mode:
            chmods.append(f"chmod {it.mode:o} {shlex.quote(remote)}")
        log.debug("[%s] %s is up to date", device.serial, remote)
        skipped[i] = PushOutcome(it.name, remote, False, 0, sha, have.size, have.mtime)
    if chmods:
        device.shell(" && ".join(chmods), check=True, what="fixing the mode of files already there")
    send.sort(key=lambda k: -items[k].local.stat().st_size)
    return skipped, send


def _matching_sha(it: PushItem, have: RemoteFile, hashes: LocalHashes, algo: str) -> Optional[str]:
    """The sha256 of the file on the device when it is the item's content, else None."""
    if have.sha256 is not None:  # the index vouches (size and mtime unchanged since it was verified)
        want = it.sha256 or hashes.get(it.local, algo)[0]
        return want if have.sha256 == want else None
    if have.digest is None:
        return None
    sha, digest = hashes.get(it.local, algo)
    if have.digest != digest:
        return None
    if it.sha256 and sha != it.sha256:
        raise changed_error(it, sha)
    return sha


def _send_all(device: Device, directory: str, items: Sequence[PushItem], order: Sequence[int],
              hashes: LocalHashes, verifier: "_BatchVerifier", run: str,
              on_progress: Optional[Callable[[str], None]], on_bytes: Optional[Callable[[int], None]]) -> None:
    """Send ``order`` over one sync connection without waiting between files; a reader thread takes the
    device's answers in order and hands each file that arrived to the verifier."""
    session = device.sync_session()
    acks = _AckReader(session, verifier)
    try:
        for n, i in enumerate(order, 1):
            it = items[i]
            if on_progress:
                on_progress(f"pushing {it.name} ({n}/{len(order)}, {it.local.stat().st_size / 1e6:.1f} MB)")
            digests = hashes.request(it.local, verifier.algo)  # hashed on the host while it is sent
            tmp = temp_name(directory, it, run)
            sent, mtime = session.send(it.local, tmp, it.mode, on_bytes)
            acks.put((i, it, tmp, sent, mtime, digests, n == len(order)))
            if acks.error is not None:
                break
    except BaseException as e:
        first = acks.error  # the device's answers failed before this send did: that is the cause
        session.abort()  # wakes the reader up if it waits for an answer that will never come
        acks.finish()
        if first is not None and isinstance(e, TorchdroidError):
            raise first from e
        raise
    acks.finish()
    session.close()
    if acks.error is not None:
        raise acks.error


class _AckReader:
    """Reads the device's OKAY/FAIL for each sent file, in order, and submits the file to the verifier."""

    def __init__(self, session: SyncSession, verifier: "_BatchVerifier"):
        self.session = session
        self.verifier = verifier
        self.queue: "queue.Queue[Optional[tuple]]" = queue.Queue()
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, name=f"acks-{verifier.device.serial}", daemon=True)
        self.thread.start()

    def put(self, entry: tuple) -> None:
        self.queue.put(entry)

    def finish(self) -> None:
        self.queue.put(None)
        self.thread.join()

    def _run(self) -> None:
        while True:
            entry = self.queue.get()
            if entry is None or self.error is not None:
                if entry is None:
                    return
                continue  # after a failure: drain, never verify what may not have arrived
            i, it, tmp, sent, mtime, digests, last = entry
            try:
                self.session.reply(tmp, it.name)
            except BaseException as e:
                self.error = e
                continue
            self.verifier.submit(i, it, tmp, (sent, mtime), digests, last=last)


class _Batch(NamedTuple):
    """Files a verify call takes (see _BatchVerifier)."""

    files: List[tuple]
    first: bool  # the index is still to be rewritten
    cleanup: str  # the leftovers' removal it runs first
    number: int
    waits: Optional[List[int]]  # the last batch: the batches whose marks it waits for to release the lock
    runs: Optional[int]  # runs of the hash tool at most (None: one per file; see verify_command)


class _BatchVerifier:
    """The verify calls of one device: each checks the files queued since the previous one, in one shell call.

    A batch starts when two thirds of the bytes to send are waiting, and when the last file arrived: few shell
    calls (each costs a round trip and a few processes on the device; six model files take two) and a short
    tail (the last batch holds the smaller files sent last, largest first, hashed in parallel; the first one
    hashes its files in two runs of the hash tool, hidden behind the files still to send).  Up to two
    run at once (a phone has several cores), except the first, which runs alone: it removes the leftovers of an interrupted deploy and rewrites the hash index with the ``index``
    entries of the files that stay (``rewrite``: not when the directory had no index and none stay: the
    appends create it); every batch then appends the entries of the files it renamed (see verify_command).

    With ``release`` (the lock, when nothing follows the push under it), each batch ends by creating its mark
    (``_ENDED_MARK``: every file of it had its turn), and the batch of the last file removes the lock and the
    marks when the marks of the batches still running when it started are there; else the caller unlocks.
    """

    def __init__(self, device: Device, directory: str, algo: str, index: Dict[str, tuple], cleanup: str = "",
                 total: int = 0, rewrite: bool = True, release: Optional[Held] = None, run: str = ""):
        self.device = device
        self.directory = directory
        self.algo = algo
        self.cleanup = cleanup
        self.index = dict(index)
        self.cond = threading.Condition()
        self.queued: List[tuple] = []
        self.queued_bytes = 0
        self.threshold = total * 2 // 3
        self.results: Dict[int, object] = {}
        self.sending = True
        self.started = 0  # batches taken
        self.running = 0  # batches in flight
        self.index_written = not rewrite  # the first batch's shell rewrote the index (or nothing is to rewrite)
        self.release = release
        self.run = run
        self.all_sent = False  # the last file arrived (no send failed)
        self.in_flight: set = set()  # numbers of the batches running
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"verify-{device.serial}")

    def submit(self, i: int, it: PushItem, tmp: str, sent: Tuple[int, int], digests: Future,
               last: bool = False) -> None:
        """Queue a sent file (``sent``: its size and the mtime sent with it; ``last``: nothing follows it)."""
        with self.cond:
            self.queued.append((i, it, tmp, sent, digests))
            self.queued_bytes += sent[0]
            self.sending = self.sending and not last
            self.all_sent = self.all_sent or last
        self.pool.submit(self._drain)

    def _take(self) -> Optional[_Batch]:
        """The files to verify now (None: none, or they wait for more)."""
        with self.cond:
            if not self.queued or self.sending and self.queued_bytes < self.threshold:
                return None  # wait for more: a later submit (or close) drains them
            if self.started and not self.index_written and self.running:
                return None  # the first batch (index, leftovers) runs alone; its end drains again
            files, self.queued, self.queued_bytes = self.queued, [], 0
            cleanup, self.cleanup = self.cleanup, ""
            self.started += 1
            self.running += 1
            last = self.release is not None and self.all_sent  # nothing is queued after it: it ends the push
            waits = sorted(self.in_flight) if last else None
            self.in_flight.add(self.started)
            return _Batch(files, not self.index_written, cleanup, self.started, waits,
                          runs=None if not self.sending else _FIRST_RUNS)

    def _drain(self) -> None:
        batch = self._take()
        if batch is None:  # an earlier drain took these files already, or they wait for more
            return
        try:
            self._verify(batch, self._ending(batch.number, batch.waits))
        finally:
            with self.cond:
                self.running -= 1
                self.in_flight.discard(batch.number)
                self.cond.notify_all()
            if self.queued:
                with contextlib.suppress(RuntimeError):  # the pool is shut down: close() drains them
                    self.pool.submit(self._drain)

    def _ending(self, number: int, waits: Optional[List[int]]) -> Tuple[str, str]:
        """What batch ``number`` runs after every file had its turn: its mark, or (the last batch) the release
        of the lock once the marks of ``waits`` are there; and the release's shell (for _verify), or ""."""
        if self.release is None:
            return "", ""
        if waits is None:
            return f": > {_ENDED_MARK}{self.run}-{number}", ""
        ended = " && ".join(f"[ -e {_ENDED_MARK}{self.run}-{k} ]" for k in waits) or "true"
        return "", f"if {ended}; then {self.release.command()} && echo {_RELEASED_MARK}; fi"

    def _checks(self, batch: _Batch) -> Tuple[List[Tuple[int, SentFile]], str]:
        """``([(index, SentFile)] to verify, the shell that removes the temporary files of the others)``: a
        file whose local copy vanished or changed since it was recorded is never verified."""
        checks, discard = [], ""
        for i, it, tmp, sent, fut in batch.files:
            try:
                sha, digest = fut.result()
            except OSError as e:  # the local file vanished after it was sent
                sha, digest = None, None
                self.results[i] = DeviceError(f"cannot read {it.local} any more", cause=str(e),
                                              remedy="keep the inputs in place while deploying; deploy again")
            if sha is not None and it.sha256 and sha != it.sha256:
                self.results[i] = changed_error(it, sha)
            if i in self.results:  # never verified: the temporary file goes
                discard += f"rm -f {shlex.quote(tmp.rsplit('/', 1)[1])}; "
            else:
                checks.append((i, SentFile(it, tmp, sent[0], sent[1], digest, sha)))
        return checks, discard

    def _verify(self, batch: _Batch, ending: Tuple[str, str] = ("", "")) -> None:
        checks, discard = self._checks(batch)
        rewrite = batch.first and bool(checks)  # nothing to rename: the index can wait for a batch that has
        mark, release = ending
        if batch.first and not rewrite:  # the index is still to be written after this batch: the lock stays
            release = ""
        try:
            got, out = run_batch(self.device, self.directory, [c[1] for c in checks], self.algo,
                                 index=self.index if rewrite else None, cleanup=batch.cleanup + discard,
                                 tail=mark + release, runs=batch.runs)
            self.index_written = self.index_written or rewrite
            if release and _RELEASED_MARK in out.splitlines():
                self.release.released = True
        except Exception as e:  # the connection dropped: every file of the batch failed with it
            got = [e] * len(checks)
        with self.cond:
            for (i, _check), res in zip(checks, got):
                self.results[i] = res

    def close(self) -> Tuple[Dict[int, object], bool]:
        """Wait for every verify; return the outcomes and whether the index was rewritten."""
        with self.cond:
            self.sending = False
        while True:
            self.pool.submit(self._drain).result()
            with self.cond:
                if not self.queued and not self.running:
                    break
                self.cond.wait(0.5)
        self.pool.shutdown(wait=True)
        return self.results, self.index_written


def temp_name(directory: str, it: PushItem, run: str = "") -> str:
    """Where ``it`` is sent before its hash matched (leftovers of other runs lack this run's ``run``)."""
    return f"{directory}/.{it.name}{PARTIAL_MARK}{run or os.getpid()}-{secrets.token_hex(3)}"


def send_to_temp(device: Device, directory: str, it: PushItem,
                 on_bytes: Optional[Callable[[int], None]] = None, session: Optional[SyncSession] = None,
                 run: str = "") -> Tuple[str, int, int]:
    """Send a file to a temporary name and wait for the device's answer; return that name, the bytes sent
    and the mtime it was given (the digests to check it against come from the local file, see LocalHashes)."""
    tmp = temp_name(directory, it, run)
    own = session is None
    session = session or device.sync_session()
    try:
        sent, mtime = session.send(it.local, tmp, it.mode, on_bytes)
        session.reply(tmp, it.name)
    finally:
        if own:
            session.close()
    return tmp, sent, mtime


def changed_error(it: PushItem, digest: str) -> VerificationError:
    return VerificationError(
        f"{it.local} changed after it was recorded (sha256 {digest[:12]}… != {it.sha256[:12]}…)",
        cause="the file was modified or replaced after `invoke convert` wrote its manifest",
        remedy="run `invoke convert --force` to regenerate it",
    )


def changed_locally(it: PushItem) -> Optional[VerificationError]:
    """The error for a file that no longer matches its recorded hash (None when it still does)."""
    if not it.sha256:
        return None
    digest = sha256_file(it.local)
    return None if digest == it.sha256 else changed_error(it, digest)


class SentFile(NamedTuple):
    """A file on the device under its temporary name, waiting for its check."""

    item: PushItem
    tmp: str  # the temporary path on the device
    size: int  # bytes sent
    mtime: int  # the modification time sent with it (sync DONE)
    digest: str  # the host's digest of the file with the device's hash tool
    sha256: str  # the host's sha256 of the file (what the index records)


_H_MARK = "--torchdroid-hashes--"
_DONE_MARK = "--torchdroid-verified--"
_RELEASED_MARK = "--torchdroid-unlocked--"
_ENDED_MARK = f"..verified{PARTIAL_MARK}"  # + run + batch number: a verify call of the run ended (see _BatchVerifier)
_VERIFY_LINE = re.compile(r"^(\d+) (OK|E)$")
_NL = "nl='\n'"


def verify_command(directory: str, batch: Sequence[SentFile], algo: str,
                   index: Optional[Dict[str, tuple]] = None, cleanup: str = "", tail: str = "",
                   runs: Optional[int] = None) -> str:
    """The one shell command that verifies a batch of sent files: hash them all with the device's tool
    (in parallel: one run of it per file, or ``runs`` runs over alternate files), remove those whose digest differs, set the modes of the others (one chmod per mode),
    rename them to their final names and append their entries to the hash index.  With ``index`` (the
    first batch) the index is first rewritten with those entries (temp name + rename): the files that
    stay.  An entry is appended only after its file was renamed, and the last line of a name wins.
    ``tail`` runs after every file had its turn (after _DONE_MARK is printed).

    Output: the tool's lines between two _H_MARK lines (the host reads a mismatch's digest there), a
    ``K OK`` or ``K E`` line per file that matched, then _DONE_MARK (every file had its turn).  A few
    processes per batch (sh, the hash tool, chmod, one mv per file) instead of several per file: on a
    phone each costs little, on a host running many virtual devices it adds up.
    """
    tmp = [f.tmp.rsplit("/", 1)[1] for f in batch]  # SAFE_NAME-based: no quoting needed
    modes = sorted({f.item.mode for f in batch})
    script = [f"cd {shlex.quote(directory)} || exit 1", cleanup + "true", _NL,
              " ".join(f"M{m:o}=" for m in modes)]
    if index is not None:
        idx = f".{INDEX_NAME.lstrip('.')}{PARTIAL_MARK}{os.getpid()}"
        script.append(f"printf %s {shlex.quote(index_lines(index))} > {idx} && mv -f {idx} {INDEX_NAME} || exit 1")
    if batch:
        tool = TOOL_OF[algo]  # several runs in parallel: one line per file each, written whole
        groups = [tmp[k::runs] for k in range(min(runs, len(tmp)))] if runs else [[t] for t in tmp]
        hashing = " ".join(f"{tool} {' '.join(g)} &" for g in groups) + " wait" if len(groups) > 1 \
            else f"{tool} {' '.join(tmp)}"
        script += [f"H=$({{ {hashing}; }} 2>/dev/null)", f"echo {_H_MARK}", 'echo "$H"', f"echo {_H_MARK}",
                   'H="${nl}${H}${nl}"']
    for f, t in zip(batch, tmp):  # a match joins its mode's group, a mismatch goes
        script.append(f'case "$H" in *"${{nl}}{f.digest}  {t}${{nl}}"*) M{f.item.mode:o}="$M{f.item.mode:o} {t}";; '
                      f'*) rm -f {t};; esac')
    for m in modes:  # one chmod per mode; if it fails, none of its files is renamed
        script.append(f'[ -z "$M{m:o}" ] || chmod {m:o} $M{m:o} || {{ rm -f $M{m:o}; M{m:o}=; }}')
    for k, (f, t) in enumerate(zip(batch, tmp)):
        script.append(f'case " $M{f.item.mode:o} " in *" {t} "*) if mv -f {t} {f.item.name}; then '
                      f'echo "{k} OK"; echo "{f.sha256} {f.size} {f.mtime} {f.item.name}" >> {INDEX_NAME}; '
                      f'else rm -f {t}; echo "{k} E"; fi;; esac')
    script.append(f"echo {_DONE_MARK}")
    if tail:
        script.append(tail)
    return "\n".join(script)


def parse_verify(output: str) -> Tuple[Dict[int, str], Dict[str, str], List[str], bool]:
    """``({key: OK|E}, {tmp name: digest the device found}, other lines, every file had its turn)``."""
    before, _, rest = output.partition(_H_MARK + "\n")
    hashes_text, _, rest = rest.partition(_H_MARK + "\n")
    results_text, done, _after = rest.partition(_DONE_MARK)
    found = {}
    for line in hashes_text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            found[parts[1].strip().lstrip("*")] = parts[0]
    lines = {int(m.group(1)): m.group(2) for m in map(_VERIFY_LINE.match, results_text.splitlines()) if m}
    other = [ln for ln in before.splitlines() + results_text.splitlines()
             if ln.strip() and not _VERIFY_LINE.match(ln)]
    return lines, found, other, bool(done)


def run_batch(device: Device, directory: str, batch: Sequence[SentFile], algo: str,
              index: Optional[Dict[str, tuple]] = None, cleanup: str = "", tail: str = "",
              runs: Optional[int] = None) -> Tuple[List[object], str]:
    """Verify sent files in one shell call (see verify_command), with the device's ``algo`` tool.

    With ``index`` (``{name: (sha256, size, mtime)}`` of the files that stay), the same call first rewrites
    the hash index with those lines; the entries of the files renamed now are appended.
    Returns a PushOutcome or the exception to raise, per file, in order, and the shell's output.
    """
    res = device.shell(verify_command(directory, batch, algo, index, cleanup, tail, runs))
    lines, found, other, hashed = parse_verify(res.output)
    return [_batch_outcome(device, directory, f, algo, lines.get(k), found, other, res.code, hashed)
            for k, f in enumerate(batch)], res.output


def _batch_outcome(device: Device, directory: str, f: SentFile, algo: str, line: Optional[str],
                   found: Dict[str, str], other: List[str], code: int, hashed: bool) -> object:
    it, tmp, digest = f.item, f.tmp, f.digest
    remote = f"{directory}/{it.name}"
    if line == "OK":
        log.info("[%s] pushed %s (%d bytes)", device.serial, remote, f.size)
        return PushOutcome(it.name, remote, True, f.size, f.sha256, f.size, f.mtime)
    got = found.get(tmp.rsplit("/", 1)[1])
    if line is None and hashed and got and got != digest:  # hashed, no match: the shell removed it
        return changed_locally(it) or VerificationError(
            f"{it.name} arrived on {device.serial} corrupted ({algo} {got[:12]}… != {digest[:12]}…)",
            cause="the transfer was altered on the way (bad cable/hub?) or the device storage is failing",
            remedy="run the deploy again; if it repeats, try another USB cable or port",
        )
    if line is None and not hashed:  # the shell died before this file's turn: do not leave its temporary file
        with contextlib.suppress(TorchdroidError):
            device.shell(f"rm -f {shlex.quote(tmp)}")
    return DeviceError(
        f"could not verify and move {it.name} into place on {device.serial}",
        cause="\n".join(other[-5:]) or f"exit code {code}",
        remedy=f"check the directory: adb -s {device.serial} shell ls -la {shlex.quote(directory)}")
