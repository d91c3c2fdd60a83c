"""The run's journal: every measured row on disk the moment it exists, before any other write of the run.

``<results>/journal-run-NNNN.jsonl`` holds one JSON document per line: the run's header (``kind: run``), each
row as it is measured (``kind: row``, appended and fsynced at once) and each device's conditions (``kind:
device``).  Its space is reserved when the run starts (``posix_fallocate`` of ``RESERVE`` bytes; the unused tail is
NUL bytes), so a disk that fills during the run still takes the rows.  The journal is removed once the results
database holds every row of the run; a run that ended before that (a full disk, a busy database, a crash or a
SIGKILL) leaves it, and the next deploy imports it (:func:`import_journals`): the devices whose rows the database
lacks are added to their run, the run's CSV/JSON written again.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any, List, Optional, Tuple

from toolchain.errors import TorchdroidError
from toolchain.fsutil import LIVE, record_removed, record_written
from toolchain.records import ResultRow

from .results import ResultStore, export_again, run_document

log = logging.getLogger(__name__)

RESERVE = 1 << 20  # bytes reserved at the start and whenever the rows reach the end of what was reserved
_NAME = re.compile(r"^journal-run-(\d{4,})\.jsonl$")


def journal_path(results: Path, run_id: int) -> Path:
    return Path(results) / f"journal-run-{run_id:04d}.jsonl"


class Journal:
    """The append-only journal of one run (one writer: the deploy that reserved the run's id)."""

    def __init__(self, path: Path, fd: int):
        self.path, self._fd, self._end, self._reserved = path, fd, 0, 0
        self.failed: Optional[str] = None  # why a line could not be written (then the journal is incomplete)
        self._guard = threading.Lock()

    @classmethod
    def create(cls, results: Path, run_id: int, header: dict) -> "Journal":
        """The journal of a run whose id was just reserved, its space reserved and its header on disk; an
        ``OSError`` (a full disk) is raised: the run cannot promise to keep its rows."""
        path = journal_path(results, run_id)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        journal = cls(path, fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # in use: the next deploy's import leaves it alone
            journal._reserve()
            journal._append([dict(header, kind="run", run_id=run_id)])
        except OSError as e:
            journal.close(remove=True)
            raise OSError(e.errno, e.strerror, str(path)) from e  # the message names the journal and its filesystem
        _manifest(record_written, path, kind=LIVE)
        return journal

    def _reserve(self) -> None:
        try:
            os.posix_fallocate(self._fd, self._reserved, RESERVE)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):  # a filesystem without it: appends grow
                raise
        self._reserved += RESERVE

    def _append(self, docs: List[dict]) -> None:
        data = "".join(json.dumps(d, default=str) + "\n" for d in docs).encode()
        if self._end + len(data) > self._reserved:
            self._reserve()
        os.pwrite(self._fd, data, self._end)
        os.fsync(self._fd)
        self._end += len(data)

    def add(self, docs: List[dict]) -> bool:
        """Append lines (rows, a device's conditions) and fsync; False (and ``failed`` says why) when the disk
        did not take them: the rows then live in memory only until another write of the run keeps them."""
        with self._guard:
            if self._fd < 0:
                return False
            try:
                self._append(docs)
                return True
            except OSError as e:
                self.failed = f"{e.strerror or e} while writing {self.path}"
                log.warning("could not append %d line(s) to the journal %s: %s", len(docs), self.path, e)
                return False

    def rows(self, rows: List[ResultRow]) -> bool:
        return self.add([{"kind": "row", "row": r.to_dict()} for r in rows])

    def close(self, remove: bool) -> None:
        """Close it; ``remove``: every row is in the results database, the journal is not needed any more."""
        with self._guard:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            if remove:
                self.path.unlink(missing_ok=True)
                _manifest(record_removed, self.path)


def _manifest(change, path: Path, **kw) -> None:
    """The journal in (or out of) its results directory's manifest (``clean --what results`` removes it as
    torchdroid's).  A disk too full for the manifest leaves the journal unlisted: then ``clean`` keeps it as the
    user's, never the other way round, and the run goes on (its rows matter more than the listing)."""
    try:
        change(path, **kw)
    except (OSError, TorchdroidError) as e:
        log.warning("could not update the manifest of %s for the journal %s: %s", path.parent, path.name,
                    getattr(e, "what", None) or e)


def _lines(path: Path) -> List[dict]:
    """The journal's whole lines up to the unused reserved space; a line cut by a crash is left out."""
    data = path.read_bytes().split(b"\0", 1)[0]
    out = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def _of_kind(docs: List[dict], kind: str, key: str, typ: type) -> List[dict]:
    return [d for d in docs if d.get("kind") == kind and isinstance(d.get(key), typ)]


def _rows(dicts: List[Any]) -> List[ResultRow]:
    return [ResultRow.from_dict(r) for r in dicts if isinstance(r, dict)]


def read_journal(path: Path) -> Tuple[Optional[dict], List[ResultRow], List[dict]]:
    """``(header, rows, device conditions)`` of a journal: a device's final rows (its ``device`` line) replace the
    rows appended while it ran."""
    docs = _lines(path)
    headers = _of_kind(docs, "run", "run_id", int)
    done = _of_kind(docs, "device", "rows", list)
    finished = {str(d.get("serial")) for d in done}
    rows = [r for r in _rows([d["row"] for d in _of_kind(docs, "row", "row", dict)]) if r.serial not in finished]
    final = _rows([r for d in done for r in d["rows"]])
    devices = [d["facts"] for d in _of_kind(done, "device", "facts", dict)]
    return (headers[0] if headers else None), rows + final, devices


def import_journals(store: ResultStore, results: Path) -> List[str]:
    """Every journal an earlier deploy left in ``results``: the rows of each device the results database lacks
    are added to their run and the run's CSV/JSON written again; the journal is removed once the database has
    them.  Returns one line per journal for the run's output (what was imported, or why not)."""
    lines = []
    for path in sorted(p for p in Path(results).glob("journal-run-*.jsonl") if _NAME.match(p.name)):
        try:
            lines.append(_import(store, results, path))
        except (TorchdroidError, sqlite3.Error, OSError, ValueError) as e:
            lines.append(f"the journal {path} of an earlier deploy could not be imported "
                         f"({getattr(e, 'what', None) or e}); its rows stay in it, the next deploy tries again")
    return [line for line in lines if line]


def _import(store: ResultStore, results: Path, path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return ""  # a deploy running now writes it (another one in the same results directory)
        return _import_unlocked(store, results, path)
    finally:
        os.close(fd)


def _import_unlocked(store: ResultStore, results: Path, path: Path) -> str:
    header, rows, devices = read_journal(path)
    if header is None or not isinstance(header.get("run_id"), int):
        return f"{path} is not a torchdroid journal (no run header): left as it is"
    run_id = header["run_id"]
    have = store.serials(run_id)
    missing = [r for r in rows if r.serial not in have]
    if missing:
        serials = {r.serial for r in missing}
        store.import_rows(run_id, header, missing, [d for d in devices if d.get("serial") in serials])
        doc, unreadable = run_document(results, run_id)
        export_again(store.rows(run_id), results, run_id, store.devices(run_id), doc, unreadable)
    path.unlink()
    _manifest(record_removed, path)
    if not missing:
        return ""
    return (f"{len(missing)} row(s) of run {run_id} an earlier deploy measured but did not store were imported "
            f"from {path.name} into {store.path} (and run-{run_id:04d}.csv/.json)")
