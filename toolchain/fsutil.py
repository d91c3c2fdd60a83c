"""File safety for every stage: atomic writes, owned output directories, one writer, disk space.

Nothing half-written under a final name, nothing of the user's overwritten, no two runs writing
into one place, and a full disk is a clean error.  Each helper in one line:

* **atomic writes**: ``with atomic_path(final) as tmp: write(tmp)`` (or ``atomic_write_bytes``/
  ``_text``/``_json``, ``atomic_copy``, ``atomic_dir``): the data goes to a temporary
  ``.<name>.td<pid>.<random>.partial`` beside ``final`` and is renamed into place only on success.
  ENOSPC/EDQUOT while writing becomes :class:`NoSpaceError` (exit 2) naming the file, what is free
  where and the fix; the temporary is removed.
* **output-directory ownership**: ``claim_output_dir(out, "convert", force=force, inputs=[models])``.
  torchdroid writes an ownership marker (``.torchdroid-owned``) in a directory it creates or finds
  empty; a directory with files it did not write (no marker, and ``adopt(dir)`` does not recognise
  it as an older torchdroid output) is refused with exit 2 unless ``force``.  ``inputs`` are the
  command's input paths: an output directory equal to an input, or containing one, is refused
  even with ``force`` (``make-app --force --out X --models X`` must not destroy the models).
  ``check_not_inputs(out, inputs)`` does only the latter.
* **one writer per output directory**: ``with output_lock(out, "convert"):`` takes an OS file lock
  (``fcntl.flock`` on ``<parent>/.<name>.torchdroid.lock``, beside the directory so ``atomic_dir``
  can replace it) and records pid, command and start time in it.  A second run gets
  :class:`BusyError` (exit 2): "busy: another torchdroid run (pid …, convert, since …) is writing
  here", with ``wait=SECONDS`` to wait instead.  Re-entrant within one process; the kernel
  releases the lock when a process dies, so a killed run never blocks the next.
* **disk space before large writes**: ``ensure_space(out, need_bytes, "the quant_full models")``
  raises :class:`NoSpaceError` naming what needs how much, where, and what is free.
* **torch's save**: ``save_torch_module(module, path)`` serialises a TorchScript module
  (``torch.jit.save``) in memory first, checks the space for
  exactly those bytes, then writes atomically: a full disk is a clean error, never torch's C++
  abort (exit 134) and never a partial file.
* **the one guard of every deleter**: ``check_removable(path, what, named=..., ours=...)`` before anything
  is deleted or replaced (clean, make-app/convert ``--force``, report's page, deploy's results): never the
  file system root, ``$HOME``, the working directory or a directory holding one of them (nor a symlink to
  one), never a git checkout with local changes, and, unless the user named the path explicitly, only what
  torchdroid wrote (its marker, a record of its own, or nothing but its own hidden names).
  ``protected_reason(path)`` is its first check alone (``claim_output_dir`` uses it before ``--force``).
* **no write through a link**: lock files are opened with ``O_NOFOLLOW`` and refused when they are not a
  regular file of their own (a symlink or a hard link to a user's file is never truncated); every other
  marker, record and temporary goes through ``atomic_path`` (``mkstemp``'s ``O_EXCL``, then a rename that
  replaces a link instead of writing through it); ``open_append(path)`` opens a log the same way.
* **a signal between two steps**: ``with signals_held():`` makes Ctrl-C, SIGTERM and SIGHUP wait for the end of a
  short block (a temporary's creation and its name kept, the manifest entry and the rename, a cleanup): a signal
  never leaves a ``.partial`` no ``finally`` knows of, nor a final file the manifest does not list.
* **stale partials**: ``remove_stale_partials(dir)`` removes ``*.partial`` temporaries of dead runs
  (ours by name: ``.td<pid>.`` with a pid that no longer runs, or the older pid-less names once
  older than an hour); ``output_lock`` calls it for the directory it locks.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as _dt
import errno
import hashlib
import io
import json
import logging
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from .errors import BusyError, NoSpaceError, UsageError, WriteError

log = logging.getLogger(__name__)

PathLike = Union[str, os.PathLike]

OWNER_MARKER = ".torchdroid-owned"
OWNER_KIND = "torchdroid.output-dir"
LOCK_SUFFIX = ".torchdroid.lock"
PARTIAL_SUFFIX = ".partial"
SPACE_RESERVE = 1 << 20  # keep 1 MiB free beyond what a write needs (metadata, the manifest after it)
_PID_IN_PARTIAL = re.compile(r"\.td(\d+)\.")
_PIDLESS_STALE_SECONDS = 3600
_FULL_ERRNOS = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
_IN_THE_WAY_ERRNOS = (errno.ENOTDIR, errno.EISDIR, errno.EEXIST)


def sha256_file(path: PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def digest_of(obj: Any) -> str:
    """sha256 of a JSON-able value (keys sorted; anything else by its str): what a result depends on, as one key."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return f"{n:.1f} TB"


def ensure_writable_dir(path: PathLike, what: str = "output directory") -> Path:
    """Create ``path`` if needed and prove we can write into it."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise UsageError(
            f"the {what} {path} is a symbolic link to {os.readlink(path)}, which does not exist",
            cause="the link is dangling (its target was moved, deleted or is on a disk that is not mounted)",
            remedy="mount or create the link's target, remove the link, or pass another directory",
        )
    if path.exists() and not path.is_dir():
        raise UsageError(
            f"the {what} {path} exists and is not a directory",
            remedy="pass a directory path (or remove/rename that file)",
        )
    problem = in_the_way(path, f"the {what}", directory=True)  # a file where one of its parents should be
    if problem is not None:
        raise problem
    try:
        path.mkdir(parents=True, exist_ok=True)
        with signals_held():  # the probe never stays behind
            fd, probe = tempfile.mkstemp(prefix=".torchdroid-probe-", dir=path)
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        if e.errno in _FULL_ERRNOS:
            raise _no_space_error(path, f"the {what}", e) from e
        raise UsageError(
            f"the {what} {path} is not writable",
            cause=f"{type(e).__name__}: {e.strerror or e}",
            remedy=f"fix its permissions, or choose another {what}",
        ) from e
    return path


# --------------------------------------------------------------------------- disk space


def _existing_ancestor(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: PathLike) -> int:
    """Bytes available to this user on the filesystem that holds (or would hold) ``path``."""
    return shutil.disk_usage(_existing_ancestor(Path(path))).free


def mount_point(path: PathLike) -> Path:
    """The mount point of the filesystem that holds (or would hold) ``path``."""
    path = _existing_ancestor(Path(path))
    with contextlib.suppress(OSError):
        path = path.resolve()
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def _no_space_error(where: Path, what: str, err: Optional[BaseException] = None, need: Optional[int] = None):
    free = free_bytes(where)
    needs = f"needs about {human_bytes(need)}, " if need is not None else ""
    cause = (f"{needs}{human_bytes(free)} free on the filesystem of {_existing_ancestor(Path(where))} "
             f"(mounted at {mount_point(where)})")
    if err is not None:
        cause = f"{cause} ({os.strerror(getattr(err, 'errno', errno.ENOSPC) or errno.ENOSPC)})"
    return NoSpaceError(
        f"not enough disk space for {what} in {where}",
        cause=cause,
        remedy="free some space on that filesystem, or write elsewhere (another output directory or build_dir); "
               "nothing half-written was left behind",
    )


def as_usage_error(err: OSError, near: Optional[PathLike] = None) -> Optional[UsageError]:
    """An OSError the environment causes while writing (a full disk or quota, a read-only filesystem, a permission
    taken away, a failing disk, a file or directory of the user's in the way: :func:`in_the_way`) as a usage error
    naming the file; None for any other error (a bug, to be seen with
    its traceback).  ``near``: where the caller was writing (the stage's build directory), named when the error
    names no file -- never the working directory, which may be on another filesystem."""
    named = getattr(err, "filename", None)
    where = Path(named) if named else Path(near) if near is not None else Path.cwd()
    if err.errno in _FULL_ERRNOS:
        return _no_space_error(where.parent if not where.is_dir() else where, f"writing {where.name or where}", err)
    what = f"cannot write {where}" if named else f"a write under {where} failed"
    if named and err.errno in _IN_THE_WAY_ERRNOS:  # a file where a directory goes, or the other way round
        return in_the_way(where, directory=err.errno != errno.EISDIR)
    if err.errno == errno.EROFS:
        return WriteError(f"{what}: the filesystem is read-only",
                          remedy="write elsewhere (another output directory or build_dir), or remount that filesystem read-write")
    if err.errno in (errno.EACCES, errno.EPERM):
        return WriteError(f"{what}: permission denied ({os.strerror(err.errno)})",
                          remedy="give yourself write permission on that directory, or write elsewhere "
                                 "(another output directory or build_dir); nothing half-written was left behind")
    if err.errno == errno.EIO:
        return WriteError(f"{what}: the disk reported an input/output error",
                          remedy="check that filesystem (dmesg, fsck) or write elsewhere (another output "
                                 "directory or build_dir); "
                                 "nothing half-written was left behind")
    return None


def ensure_space(where: PathLike, need: int, what: str) -> None:
    """Raise :class:`NoSpaceError` unless ``need`` bytes (+1 MiB reserve) fit where ``where`` lives."""
    if free_bytes(where) < need + SPACE_RESERVE:
        raise _no_space_error(Path(where), what, need=need)


# --------------------------------------------------------------------------- atomic writes


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (deploy writes from threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _partial_prefix(name: str) -> str:
    return f".{name}.td{os.getpid()}."


_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Held:
    """The handler while :func:`signals_held` runs: notes the signal, which takes effect when the block ends."""

    def __init__(self) -> None:
        self.caught: List[int] = []

    def __call__(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        self.caught.append(signum)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Within the block SIGINT, SIGTERM and SIGHUP are noted, not acted on; the first one noted is delivered to
    the handler it would have met (Ctrl-C's KeyboardInterrupt, the task's ``Terminated``, the default action) as
    the block ends.  For short steps that must not be cut in two.  Python runs signal handlers in the main thread
    only: elsewhere, and inside an outer block, nothing changes."""
    if threading.current_thread() is not threading.main_thread() or isinstance(signal.getsignal(signal.SIGINT),
                                                                              _Held):
        yield
        return
    held = _Held()
    previous: Dict[int, Any] = {}
    try:
        for s in _HELD_SIGNALS:
            if signal.getsignal(s) is not None:  # None: a handler not set from Python, which cannot be put back
                previous[s] = signal.signal(s, held)
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if held.caught:
            _deliver(held.caught[0], previous[held.caught[0]])


def _deliver(signum: int, handler: Any) -> None:
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)


def _remove(path: Path) -> None:
    with signals_held(), contextlib.suppress(FileNotFoundError):  # a second signal does not stop the cleanup
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()


@contextlib.contextmanager
def atomic_path(final: PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``final``; move it into place only on success.

    The temporary name starts with ``.``, carries ``td<pid>`` and ends with ``.partial`` so it can
    never be mistaken for an artefact and a later run can tell a dead run's leftover; on any
    exception it is removed.  A full disk becomes :class:`NoSpaceError`.
    """
    final = Path(final)
    tmp_path: Optional[Path] = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        with signals_held():  # the temporary exists only once its name is kept for the cleanup below
            fd, tmp = tempfile.mkstemp(prefix=_partial_prefix(final.name), suffix=f"{suffix}{PARTIAL_SUFFIX}",
                                       dir=final.parent)
            os.close(fd)
            tmp_path = Path(tmp)
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp's 0600 would make artefacts private: use what open() gives
        yield tmp_path
        if not tmp_path.exists():
            raise FileNotFoundError(f"nothing was written to {tmp_path}")
        with signals_held():  # listed, then renamed: never a final file the manifest calls the user's
            if tmp_path.is_file() and not _ours(final):
                record_written(final, digest=sha256_file(tmp_path))
            os.replace(tmp_path, final)
    except OSError as e:
        if tmp_path is not None:
            _remove(tmp_path)
        if e.errno in _FULL_ERRNOS:
            raise _no_space_error(final.parent, final.name, e) from e
        problem = in_the_way(final)
        if problem is not None:
            raise problem from e
        raise
    except BaseException:
        if tmp_path is not None:
            _remove(tmp_path)
        raise


def in_the_way(final: PathLike, what: str = "", directory: bool = False) -> Optional[UsageError]:
    """The usage error when something of the user's stands where torchdroid writes the file ``final`` (with
    ``directory``: makes the directory ``final``): a directory (a file) of that name, or a file where a directory of
    its path should be; None when nothing is in the way."""
    final = Path(final)
    label = f"{what} {final}" if what else str(final)
    if directory and final.exists() and not final.is_dir():
        return UsageError(f"cannot create {label}: a file of that name is there",
                          cause="torchdroid makes a directory at that path and never replaces a file with one",
                          remedy=f"move or rename the file {final}, or write elsewhere (another output directory)")
    if not directory and final.is_dir() and not final.is_symlink():
        return UsageError(f"cannot write {label}: a directory of that name is there",
                          cause="torchdroid writes a file at that path and never replaces a directory with one",
                          remedy=f"move or rename the directory {final}, or write elsewhere (another output directory)")
    for parent in final.parents:
        if parent.exists() and not parent.is_dir():
            return UsageError(f"cannot {'create' if directory else 'write'} {label}: {parent} is a file, not a directory",
                              cause="the output path goes through a file",
                              remedy=f"move or rename the file {parent}, or write elsewhere (another output directory)")
        if parent.exists():
            break
    return None


def atomic_write_bytes(path: PathLike, data: bytes, mode: int = 0o644) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
    return Path(path)


def atomic_write_text(path: PathLike, text: str, mode: int = 0o644) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), mode)


def atomic_write_json(path: PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def atomic_write_csv(path: PathLike, rows: Iterable[Any], columns: List[str]) -> Path:
    """Rows (dataclasses, or dicts) as CSV, a header of ``columns`` (their fields or keys) and a line per row,
    atomically; a dict's missing key is an empty cell."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns)
    w.writeheader()
    w.writerows({c: r.get(c) if isinstance(r, dict) else getattr(r, c) for c in columns} for r in rows)
    return atomic_write_text(path, buf.getvalue())


def atomic_copy(src: PathLike, dst: PathLike) -> Path:
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)
        shutil.copymode(src, tmp)
    return Path(dst)


@contextlib.contextmanager
def atomic_dir(final: PathLike, force: bool = False, stage: Optional[str] = None) -> Iterator[Path]:
    """Build a directory under a temporary name and move it into place on success.

    ``final`` must not exist, or be empty, unless ``force`` (then the old one is
    replaced only once the new one is complete, and only when every file in it is torchdroid's and unchanged:
    :func:`refuse_unowned_files`).  ``stage``: the task writing it: a directory of another task's is refused, and
    the new one is marked as this task's, with the manifest of every file in it.
    """
    final = Path(final)
    if stage is not None:
        refuse_another_owner(final, stage)
    if final.exists():
        if not final.is_dir():
            raise UsageError(f"{final} exists and is not a directory", remedy="choose another --out")
        if any(final.iterdir()) and not force:
            raise UsageError(
                f"{final} already exists and is not empty",
                remedy="choose a new --out directory, or pass --force to replace it",
            )
        if any(final.iterdir()):
            check_removable(final, "--out", named=True, verb="replace")  # never ~, /, . or a changed checkout
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp: Optional[Path] = None
    try:
        with signals_held():  # the temporary exists only once the cleanup below knows it
            tmp = Path(tempfile.mkdtemp(prefix=_partial_prefix(final.name), suffix=PARTIAL_SUFFIX, dir=final.parent))
        if stage is not None:
            mark_owned(tmp, stage)
        yield tmp
        with signals_held():  # listed, the user's files carried over, swapped: one step for a signal
            _swap_in(tmp, final)
    except OSError as e:
        if tmp is not None:
            _remove(tmp)
        if e.errno in _FULL_ERRNOS:
            raise _no_space_error(final.parent, f"the directory {final.name}", e) from e
        raise
    except BaseException:
        if tmp is not None:
            _remove(tmp)
        raise


def _swap_in(tmp: Path, final: Path) -> None:
    """``atomic_dir``'s last step: ``tmp``'s manifest, the kept files of ``final`` moved in, ``tmp`` renamed to
    ``final`` (the old one removed after)."""
    if is_owned(tmp):
        record_tree(tmp)
    carry_over_kept(final, tmp)
    if not final.exists():
        os.replace(tmp, final)
        return
    old = final.with_name(f"{_partial_prefix(final.name)}old{PARTIAL_SUFFIX}")
    os.replace(final, old)
    try:
        os.replace(tmp, final)
    except OSError:
        os.replace(old, final)  # the old directory back under its name
        raise
    shutil.rmtree(old, ignore_errors=True)


def save_torch_module(module: Any, path: PathLike) -> Tuple[int, str]:
    """Save a TorchScript module atomically: serialise in memory, check the space, write; returns (size, sha256).

    torch writing straight to a file aborts the process (C++ exception, exit 134) when the disk fills up;
    here a full disk is a :class:`NoSpaceError` and no partial file is left.
    """
    path = Path(path)
    import torch

    buf = io.BytesIO()
    torch.jit.save(module, buf)
    data = buf.getvalue()
    ensure_space(path.parent, len(data), path.name)
    atomic_write_bytes(path, data)
    return len(data), hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- stale partials


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a zombie counts as dead)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed child nobody has reaped yet is dead for our purposes
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


_pid_alive = pid_alive


def _is_stale_partial(entry: Path, now: float) -> bool:
    name = entry.name
    if not (name.startswith(".") and name.endswith(PARTIAL_SUFFIX)):
        return False
    m = _PID_IN_PARTIAL.search(name)
    if m:
        return not _pid_alive(int(m.group(1)))
    try:  # written before temporaries carried a pid: only when clearly abandoned
        return now - entry.lstat().st_mtime > _PIDLESS_STALE_SECONDS
    except FileNotFoundError:
        return False


def remove_stale_partials(directory: PathLike, only_for: Optional[str] = None) -> List[Path]:
    """Remove temporaries (files or directories) of dead torchdroid runs in ``directory``; returns them.

    ``only_for``: only the temporaries of that one name (``atomic_dir``'s, beside the directory it replaces).
    """
    directory = Path(directory)
    removed: List[Path] = []
    if not directory.is_dir():
        return removed
    now = time.time()
    for entry in list(directory.iterdir()):
        if only_for is not None and not entry.name.startswith(f".{only_for}."):
            continue
        if _is_stale_partial(entry, now):
            _remove(entry)
            removed.append(entry)
    return removed


# --------------------------------------------------------------------------- no write through a link


def _open_own_file(path: Path, flags: int, what: str) -> int:
    """Open (creating) a file torchdroid writes in place, never through a symlink and never a hard link to
    another file: a link planted at its name is refused, the linked file untouched."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666 & ~_umask())
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise _link_refused(path, what, f"it is a symbolic link to {os.readlink(path)}") from e
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        why = (f"it is a hard link ({st.st_nlink} names share the file)" if stat.S_ISREG(st.st_mode)
               else "it is not a regular file")
        raise _link_refused(path, what, why)
    return fd


def _link_refused(path: Path, what: str, why: str) -> UsageError:
    return UsageError(f"refusing to write {what} {path}: {why}",
                      cause="writing it would change the file the link points at, which torchdroid did not write",
                      remedy=f"remove {path} (only the link: `rm {path}`) and run again")


def open_append(path: PathLike, what: str = "the log file"):
    """A text file opened for appending (a log), never through a link (see ``_open_own_file``)."""
    fd = _open_own_file(Path(path), os.O_WRONLY | os.O_APPEND, what)
    return os.fdopen(fd, "a", encoding="utf-8", errors="replace")


# --------------------------------------------------------------------------- one writer at a time

_held: Dict[str, int] = {}
_held_guard = threading.Lock()


def lock_path_for(directory: PathLike) -> Path:
    """Where the lock of an output directory lives: beside it (so the directory itself can be replaced)."""
    directory = Path(os.path.abspath(directory))
    return directory.parent / f".{directory.name}{LOCK_SUFFIX}"


def _lock_holder(fd: int, wait: float = 1.0) -> str:
    """Who holds the lock, as its holder wrote it just after taking it (read again for up to ``wait`` seconds: a
    second run can look between the holder's flock and its write)."""
    deadline = time.monotonic() + wait
    info = _holder_info(fd)
    while "pid" not in info and time.monotonic() < deadline:
        time.sleep(0.05)
        info = _holder_info(fd)
    if "pid" not in info:
        return "pid unknown"
    return f"{info.get('command', '?')} pid {info.get('pid')} since {info.get('since', '?')}"


def _holder_info(fd: int) -> dict:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _try_flock(fd: int, wait: float) -> bool:
    import fcntl

    deadline = time.monotonic() + max(0.0, wait)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)


@contextlib.contextmanager
def output_lock(directory: PathLike, command: str, wait: float = 0.0, lock: Optional[Path] = None) -> Iterator[Path]:
    """Hold the one-writer lock of ``directory`` (see the module docstring); yields the lock file's path.
    ``lock``: the lock file, when not beside the directory (:func:`build_lock`'s, inside the build directory)."""
    directory = Path(directory)
    lock = Path(lock) if lock is not None else lock_path_for(directory)
    key = str(lock)
    with _held_guard:
        if _held.get(key):
            _held[key] += 1
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield lock
        finally:
            with _held_guard:
                _held[key] -= 1
        return
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_own_file(lock, os.O_RDWR, "the lock file")
    except OSError as e:
        if e.errno in _FULL_ERRNOS:
            raise _no_space_error(lock.parent, "the lock file", e) from e
        raise UsageError(f"cannot create the lock file {lock} for {directory}", cause=f"{e.strerror or e}",
                         remedy="choose an output directory whose parent is writable") from e
    try:
        if not _try_flock(fd, wait):
            raise BusyError(
                f"busy: another torchdroid run ({_lock_holder(fd)}) is writing here: {directory}",
                cause="two runs writing one directory would mix their files and records",
                remedy="wait for that run to finish and run again (or write into another output directory)",
            )
        info = {"pid": os.getpid(), "command": command,
                "since": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()}
        with contextlib.suppress(OSError):  # who holds it is for a second run's message: a full disk (clean) is fine
            data = json.dumps(info).encode()
            os.pwrite(fd, data, 0)  # then cut what is left of an earlier holder's: never empty in between
            os.ftruncate(fd, len(data))
        with _held_guard:
            _held[key] = 1
        try:
            remove_stale_partials(directory)
            remove_stale_partials(directory.parent, only_for=directory.name)
            yield lock
        finally:
            with _held_guard:
                _held.pop(key, None)
    finally:
        os.close(fd)  # releases the flock


BUILD_LOCK = ".torchdroid-build.lock"
# the tasks that write under a build directory: one at a time per build directory, across tasks
BUILD_WRITERS = ("clean", "deploy", "deploy-executorch", "bench", "bench-executorch", "convert", "make-app", "report")


@contextlib.contextmanager
def build_lock(build_dir: PathLike, task: str) -> Iterator[Optional[Path]]:
    """The one lock of a build directory, held by every task of :data:`BUILD_WRITERS` while it runs (re-entrant:
    ``all`` runs them in one process): ``clean --what results`` never removes what a running deploy writes, two
    ``bench-executorch`` never time each other.  A second run gets :class:`BusyError` "busy: another torchdroid run
    (invoke <task> pid N since T)"; the kernel releases the lock of a run that died, so a stale lock file (its pid
    gone) is taken over.  Other tasks (verify, doctor, build-android with its own locks) pass through."""
    if task not in BUILD_WRITERS:
        yield None
        return
    build_dir = Path(build_dir)
    with output_lock(build_dir, f"invoke {task}", lock=build_dir / BUILD_LOCK) as held:
        yield held


# --------------------------------------------------------------------------- ownership


def check_not_inputs(out: PathLike, inputs: Iterable[Optional[PathLike]], what: str = "--out") -> None:
    """Refuse an output directory that is, or contains, one of the command's inputs (exit 2)."""
    out_r = Path(out).expanduser().resolve()
    for item in inputs:
        if item is None:
            continue
        inp = Path(item).expanduser().resolve()
        if inp.is_relative_to(out_r):
            raise UsageError(
                f"the output directory {out} ({what}) {'is' if inp == out_r else 'contains'} an input of this command: {item}",
                cause="writing or replacing it would destroy the input",
                remedy=f"choose a different {what} (e.g. a new directory next to it); --force never deletes inputs",
            )


def is_owned(directory: PathLike) -> bool:
    return (Path(directory) / OWNER_MARKER).is_file()


def mark_owned(directory: PathLike, stage: str) -> Path:
    """Write the ownership marker into ``directory`` (e.g. into ``atomic_dir``'s temporary before the rename):
    the stage that owns it and the manifest of the files torchdroid wrote there (``files``, see
    :func:`record_written`; an existing marker's manifest is kept)."""
    body = {"kind": OWNER_KIND, "stage": stage,
            "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            "note": "torchdroid wrote this directory; it removes or replaces only the files listed here whose "
                    "sha256 still matches",
            "files": _read_marker(Path(directory)).get("files") or {}}
    with _manifest_guard:
        return atomic_write_json(Path(directory) / OWNER_MARKER, body)


def _ours(entry: Path) -> bool:
    """Hidden names torchdroid itself leaves in a directory: marker, probes, locks, its temporaries."""
    name = entry.name
    return name == OWNER_MARKER or name.startswith(".torchdroid-") or (
        name.startswith(".") and (name.endswith(PARTIAL_SUFFIX) or name.endswith(LOCK_SUFFIX)))


def foreign_files(directory: PathLike) -> List[str]:
    """Names in ``directory`` torchdroid did not put there (empty when the directory is owned)."""
    directory = Path(directory)
    if not directory.is_dir() or is_owned(directory):
        return []
    return sorted(e.name for e in directory.iterdir() if not _ours(e))


# which task's outputs a directory holds: a task writes only into a directory of its own kind
ROLES = {"convert": "models", "convert-executorch": "models", "make-app": "app", "deploy": "results",
         "deploy-executorch": "results", "report": "results", "bench": "bench", "bench-executorch": "bench"}
_FOUND_BY = (("results.sqlite", "", "deploy"), ("manifest.json", "torchdroid.convert-manifest", "convert"),
             ("torchdroid-app.json", "torchdroid.app-info", "make-app"))


def directory_owner(directory: PathLike) -> Optional[str]:
    """The task whose outputs ``directory`` holds: its marker's stage, or (an older torchdroid's directory, no
    marker) what its files show; None when neither says."""
    directory = Path(directory)
    stage = _read_marker(directory).get("stage") if directory.is_dir() else None
    if isinstance(stage, str) and stage:
        return stage
    for name, kind, owner in _FOUND_BY if directory.is_dir() else ():
        f = directory / name
        if f.is_file() and not f.is_symlink() and (not kind or _record_kind(f) == kind):
            return owner
    return None


def refuse_another_owner(directory: PathLike, stage: str, what: str = "--out") -> None:
    """Refuse (exit 2, ``--force`` or not) to write into a directory that holds another task's outputs:
    ``make-app --out build/results --force`` must not replace the deploy history with a Gradle project."""
    owner = directory_owner(directory)
    if owner is None or ROLES.get(owner, owner) == ROLES.get(stage, stage):
        return
    raise UsageError(
        f"refusing to write {stage}'s outputs into {directory} ({what}): it holds the outputs of `invoke {owner}`",
        cause=f"each task writes only into a directory of its own kind; `invoke {owner}` owns this one",
        remedy=f"choose another {what} for {stage} (its default under the build directory is its own), or move "
               f"{directory} away first")


def own_dir(directory: PathLike, stage: str) -> Path:
    """Mark a directory a task writes at a fixed place (deploy's results) as torchdroid's if it is not yet, so
    that what it writes there is recorded; refuses another task's directory."""
    directory = Path(directory)
    refuse_another_owner(directory, stage)
    if not is_owned(directory):
        ensure_writable_dir(directory, f"{stage} output directory")  # a file in the way: a usage error naming it
        mark_owned(directory, stage)
    return directory


def claim_output_dir(directory: PathLike, stage: str, *, force: bool = False,
                     inputs: Iterable[Optional[PathLike]] = (), adopt: Optional[Callable[[Path], bool]] = None,
                     what: str = "--out") -> Path:
    """Make ``directory`` an output directory torchdroid owns (see the module docstring); returns it."""
    directory = Path(directory)
    check_not_inputs(directory, inputs, what)
    refuse_another_owner(directory, stage, what)  # even with --force
    ensure_writable_dir(directory)
    if is_owned(directory):
        return directory
    foreign = foreign_files(directory)
    if foreign:
        _refuse_protected(directory, what, "write into")  # even with --force: ~, / and . are never output directories
    if foreign and not (adopt is not None and adopt(directory)) and not force:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise UsageError(
            f"the output directory {directory} ({what}) has files torchdroid did not write: {shown}",
            cause=f"torchdroid marks the directories it writes ({OWNER_MARKER}); this one is someone else's",
            remedy=f"choose a new or empty directory with {what}, or pass --force to write into it anyway "
                   "(torchdroid then writes only its own file names there)",
        )
    mark_owned(directory, stage)
    return directory


# --------------------------------------------------------------------------- what torchdroid wrote, per file

_manifest_guard = threading.RLock()  # deploy writes from threads: one read-modify-write of a marker at a time
LIVE, TREE = "live", "tree"  # recorded without a hash: a file written in place, a directory a tool fills
NOT_OURS = "not written by torchdroid"
CHANGED = "changed since torchdroid wrote it"


def _read_marker(directory: Path) -> Dict[str, Any]:
    try:
        data = json.loads((directory / OWNER_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def owned_root(path: PathLike) -> Optional[Path]:
    """The nearest directory above ``path`` that torchdroid owns (its marker), or None."""
    for parent in Path(os.path.abspath(path)).parents:
        if (parent / OWNER_MARKER).is_file():
            return parent
    return None


def record_written(path: PathLike, digest: Optional[str] = None, kind: str = "file") -> None:
    """Add ``path`` with its sha256 to the manifest of the directory torchdroid owns above it (nothing when no
    directory above it is torchdroid's, e.g. a report the user sent elsewhere).  Every atomic write calls it.
    ``kind``: ``file`` (its sha256 is checked before it is removed), ``live`` (a file written in place, the results
    database: by name only) or ``tree`` (a directory a tool of torchdroid's fills, Gradle's build/: all below it)."""
    path = Path(os.path.abspath(path))
    root = owned_root(path)
    if root is None:
        return
    entry = {"sha256": digest or sha256_file(path) if kind == "file" else None, "kind": kind}
    _update_manifest(root, {path.relative_to(root).as_posix(): entry})


def record_tree(directory: PathLike) -> None:
    """Record every regular file under the owned ``directory`` (one marker write: ``atomic_dir`` before its rename,
    so files its writers wrote in place are listed too)."""
    directory = Path(directory)
    found = {}
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not _ours(Path(root) / d)]
        for name in files:
            f = Path(root) / name
            if not _ours(f) and f.is_file() and not f.is_symlink():
                found[f.relative_to(directory).as_posix()] = {"sha256": sha256_file(f), "kind": "file"}
    _update_manifest(directory, found)


def _update_manifest(root: Path, entries: Dict[str, Any], drop: Iterable[str] = ()) -> None:
    with _manifest_guard:
        data = _read_marker(root)
        if not data:
            return
        files = data.get("files") if isinstance(data.get("files"), dict) else {}
        files.update(entries)
        for rel in drop:
            files.pop(rel, None)
        data["files"] = dict(sorted(files.items()))
        atomic_write_json(root / OWNER_MARKER, data)


def forget_written(root: PathLike, rels: Iterable[str]) -> None:
    """Drop removed files from the manifest of ``root``."""
    _update_manifest(Path(root), {}, drop=list(rels))


def record_removed(path: PathLike) -> None:
    """Drop ``path`` (removed by the task that wrote it) from the manifest of the directory torchdroid owns above
    it, so that a file the user puts there later under that name is not taken for torchdroid's."""
    path = Path(os.path.abspath(path))
    root = owned_root(path)
    if root is not None:
        forget_written(root, [path.relative_to(root).as_posix()])


@dataclasses.dataclass
class Ownership:
    """A directory's files sorted by the manifest: ``ours`` may be removed (written by torchdroid, unchanged),
    ``kept`` (relative name, why) are the user's or edited and are never removed."""

    root: Path
    ours: List[str] = dataclasses.field(default_factory=list)
    kept: List[Tuple[str, str]] = dataclasses.field(default_factory=list)

    def kept_lines(self) -> List[str]:
        return [f"{self.root / rel} ({why})" for rel, why in self.kept]


def ownership(directory: PathLike) -> Optional[Ownership]:
    """Every file under ``directory`` judged against its manifest; None when the directory has no manifest (not
    torchdroid's, or an older torchdroid's: its callers fall back to judging the whole directory)."""
    directory = Path(directory)
    if directory.is_symlink() or not directory.is_dir():
        return None
    files = _read_marker(directory).get("files")
    if not isinstance(files, dict):
        return None
    found = Ownership(directory)
    for root, dirs, names in os.walk(directory):
        here = Path(root)
        for name in sorted(names) + sorted(d for d in dirs if (here / d).is_symlink()):
            entry = here / name
            rel = entry.relative_to(directory).as_posix()
            if _in_tree(rel, files):
                found.ours.append(rel)
            elif not _ours(entry):
                _judge(found, rel, entry, files.get(rel))
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()]
    return found


def _in_tree(rel: str, files: Dict[str, Any]) -> bool:
    parts = rel.split("/")
    return any(isinstance(files.get("/".join(parts[:n])), dict) and files["/".join(parts[:n])].get("kind") == TREE
               for n in range(1, len(parts)))


def _judge(found: Ownership, rel: str, entry: Path, rec: Any) -> None:
    if not isinstance(rec, dict):
        found.kept.append((rel, NOT_OURS))
    elif entry.is_symlink() or not entry.is_file():
        found.kept.append((rel, "replaced by a link" if entry.is_symlink() else NOT_OURS))
    elif rec.get("kind") == LIVE or rec.get("sha256") == sha256_file(entry):
        found.ours.append(rel)
    else:
        found.kept.append((rel, CHANGED))


YOURS_SUFFIX = ".yours"  # an edited file the new directory writes again: the user's version, kept beside it


def carry_over_kept(old: Path, new: Path) -> List[str]:
    """Before ``new`` replaces ``old`` (``atomic_dir``): every file of ``old`` that is not torchdroid's unchanged
    output goes into ``new`` at its place, unrecorded (still the user's); where ``new`` has a file of that name with
    other content, the user's goes beside it as ``<name>.yours``.  Each is named once on the console; returns them."""
    found = ownership(old)
    if found is None:
        return []
    lines = []
    for rel, why in found.kept:
        src, dst = old / rel, new / rel
        if dst.is_file() and not dst.is_symlink() and src.is_file() and sha256_file(src) == sha256_file(dst):
            continue
        if dst.exists() or dst.is_symlink():
            dst = dst.with_name(dst.name + YOURS_SUFFIX)
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
        lines.append(f"kept {old / dst.relative_to(new)} ({why})")
    for line in lines:
        log.warning("%s", line)
    return lines


# --------------------------------------------------------------------------- the one guard of every deleter

RECORD_KIND_PREFIX = "torchdroid"


def protected_reason(path: PathLike) -> Optional[str]:
    """Why ``path`` (or what a symlink there points at) must never be deleted or replaced, or None.

    The file system root, the home directory, the working directory, and every directory holding one of
    them: removing any of these loses files torchdroid never wrote."""
    given = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    seen = [given]
    with contextlib.suppress(OSError, RuntimeError):
        seen.append(given.resolve())
    places = []
    with contextlib.suppress(OSError, RuntimeError, KeyError):
        home = Path.home()
        places += [("your home directory", Path(os.path.abspath(home))), ("your home directory", home.resolve())]
    with contextlib.suppress(OSError):
        cwd = Path.cwd()
        places += [("the working directory", cwd), ("the working directory", cwd.resolve())]
    for p in seen:
        link = "" if p == given else f" (the link {given} points there)"
        if p == Path(p.anchor):
            return f"it is the file system root{link}"
        for name, place in places:
            if p == place:
                return f"it is {name}{link}"
            if place.is_relative_to(p):
                return f"it holds {name} ({place}){link}"
    return None


def _refuse_protected(path: PathLike, what: str, verb: str) -> None:
    why = protected_reason(path)
    if why:
        raise UsageError(f"refusing to {verb} {path} ({what}): {why}",
                         cause="it holds files torchdroid did not write; --force never applies to it",
                         remedy=f"name a directory of its own for {what} (e.g. <build_dir>/app), or fix a typo in the path")


def checkout_changes(path: PathLike) -> List[str]:
    """Local changes of the git checkouts at ``path`` and directly below it (build-android's definition:
    modified tracked files, in submodules too); a checkout git cannot read counts as changed."""
    path = Path(path)
    if path.is_symlink() or not path.is_dir():
        return []
    found: List[str] = []
    candidates = [path] + sorted(p for p in path.iterdir() if p.is_dir() and not p.is_symlink())
    for repo in candidates:
        if not (repo / ".git").exists():
            continue
        from .tools.git import Git  # git only when there is a checkout

        try:
            changes = Git.locate().local_changes(repo)
        except Exception as e:  # noqa: BLE001 - no git, or a broken checkout: it cannot be shown unchanged
            found.append(f"{repo}: cannot read its state ({getattr(e, 'what', e)})")
            continue
        found += [f"{repo}: {c.strip()}" for c in changes]
    return found


def _record_kind(path: Path) -> str:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > (16 << 20):
            return ""
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return ""
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) else ""


def is_torchdroid_record(path: PathLike) -> bool:
    """A JSON file whose ``kind`` is one of torchdroid's records (manifest, build-info, app-info, results...)."""
    return _record_kind(Path(path)).startswith(RECORD_KIND_PREFIX)


def written_by_torchdroid(path: PathLike, depth: int = 2) -> bool:
    """Evidence that torchdroid wrote ``path``: a symlink (removed as a link), its ownership marker, a record
    of its own at the top, or nothing but torchdroid's own hidden names (and, ``depth`` levels down,
    directories that are torchdroid's by the same rules)."""
    path = Path(path)
    if path.is_symlink():
        return True
    if path.is_file():
        return path.suffix == ".json" and is_torchdroid_record(path)
    if not path.is_dir():
        return not path.exists()
    if is_owned(path):
        return True
    entries = [e for e in path.iterdir() if not _ours(e)]
    if any(e.suffix == ".json" and is_torchdroid_record(e) for e in entries):
        return True
    return depth > 0 and all(e.is_dir() and not e.is_symlink() and written_by_torchdroid(e, depth - 1)
                             for e in entries)


def check_removable(path: PathLike, what: str, *, named: bool = False,
                    ours: Optional[Callable[[Path], bool]] = None, verb: str = "remove") -> Path:
    """The one guard every deleter calls before it deletes or replaces ``path`` (see the module docstring).

    ``named``: the user named this path explicitly (``--out X --force``): ownership is not asked for, the
    other checks still apply.  ``ours``: the caller's own recogniser of what it writes (tried before the
    generic ``written_by_torchdroid``).  Raises :class:`UsageError` (exit 2); returns ``path``."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        return path
    _refuse_protected(path, what, verb)
    changes = checkout_changes(path)
    if changes:
        raise UsageError(
            f"refusing to {verb} {path} ({what}): it holds a git checkout with local changes",
            cause="; ".join(changes[:5]) + (f" and {len(changes) - 5} more" if len(changes) > 5 else ""),
            remedy="commit or stash them (`git stash`), or remove the checkout yourself if they are not needed")
    if named or (ours is not None and ours(path)) or written_by_torchdroid(path):
        return path
    shown = ", ".join(foreign_files(path)[:5]) if path.is_dir() else path.name
    raise UsageError(
        f"refusing to {verb} {path} ({what}): torchdroid did not write it ({shown})",
        cause=f"it has no ownership marker ({OWNER_MARKER}) nor a torchdroid record, so it is someone else's",
        remedy="move your files out of the build directory (or set build_dir / INVOKE_BUILD_DIR to a directory "
               "of torchdroid's own), or remove it yourself")
