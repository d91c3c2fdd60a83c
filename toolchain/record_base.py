"""The one record base: every JSON record torchdroid writes has a kind, a schema, one atomic writer and one reader.

A record kind is a small declaration on :class:`Record`: ``KIND``, ``SCHEMA``, ``REMEDY`` (the command that
remakes the file) and its body (:meth:`Record.body` / :meth:`Record.from_body`).  The reader refuses what it
would have to guess about, each time with a typed error that names that command:

* :class:`RecordMissing` -- no file there;
* :class:`RecordUnreadable` -- not JSON, not text, not readable;
* :class:`RecordWrongKind` -- another kind of record, or someone else's file;
* :class:`RecordSchemaOlder` / :class:`RecordSchemaNewer` -- written by an earlier / a later torchdroid;
* :class:`RecordMalformed` -- the right kind and schema, but a field is missing or of the wrong type, or the record
  contradicts itself (:meth:`Record.contradictions`: a count above its total, a status its own details deny).

Nothing is deleted: a file an earlier torchdroid wrote stays as it is until the command named in the error
writes its replacement (atomically, :func:`toolchain.fsutil.atomic_write_json`).
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import fields
from pathlib import Path
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Type, TypeVar

from .errors import RecordError
from .fsutil import atomic_write_json

R = TypeVar("R", bound="Record")
MALFORMED = (KeyError, TypeError, ValueError, AttributeError)  # what a body with a wrong field raises


class RecordMissing(RecordError):
    """There is no record at the path."""


class RecordUnreadable(RecordError):
    """The file is there but is not readable JSON."""


class RecordWrongKind(RecordError):
    """The file is JSON but not a record of the expected kind (another record, or not torchdroid's)."""


class RecordSchemaOlder(RecordError):
    """An earlier torchdroid wrote the record, in a schema this one does not read."""


class RecordSchemaNewer(RecordError):
    """A later torchdroid wrote the record, in a schema this one does not know."""


class RecordMalformed(RecordError):
    """The record has the right kind and schema, but a field is missing or of the wrong type (edited by hand)."""


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def schema_error(path: Path, found: Any, schema: int, remedy: str) -> RecordError:
    """The typed error of a record (or store) in another schema than ``schema``: older or newer."""
    what = f"{path} has schema {found!r}; this torchdroid reads schema {schema}"
    if isinstance(found, int) and not isinstance(found, bool) and found > schema:
        return RecordSchemaNewer(what, cause="a later torchdroid wrote it", remedy=f"use that torchdroid, or {remedy}")
    return RecordSchemaOlder(what, cause="an earlier torchdroid wrote it; the file is left as it is", remedy=remedy)


def read_record(path: Path, kind: str, schema: int, remedy: str, reads: Sequence[int] = ()) -> Dict[str, Any]:
    """The one reader: the JSON object at ``path`` if it is a ``kind`` record of ``schema`` (or of an earlier schema
    in ``reads``, which the kind still reads), else a typed error."""
    path = Path(path)
    if not path.is_file():
        raise RecordMissing(f"no {kind} record at {path}", remedy=remedy)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordUnreadable(f"the record {path} cannot be read", cause=f"{type(e).__name__}: {e}",
                               remedy=remedy) from e
    found = data.get("kind") if isinstance(data, dict) else None
    if found != kind:
        raise RecordWrongKind(f"{path} is not a {kind} record (kind={found!r})", remedy=remedy)
    if data.get("schema") != schema and data.get("schema") not in reads:
        raise schema_error(path, data.get("schema"), schema, remedy)
    return data


def write_record(path: Path, kind: str, schema: int, body: Dict[str, Any]) -> Path:
    """The one writer: ``kind``, ``schema``, the time and ``body``, atomically."""
    data = {"kind": kind, "schema": schema, "written": now_iso()}
    data.update(body)
    return atomic_write_json(path, data)


def item_problems(name: str, items: Optional[Sequence["FlatRecord"]]) -> List[str]:
    """Each item's problems, prefixed with where it is (``hardware[2]: ...``)."""
    return [f"{name}[{i}]: {p}" for i, item in enumerate(items or []) for p in item.problems()]


class FlatRecord:
    """A dataclass written as its fields and read back from them; keys it does not know (a newer writer's) are
    left out."""

    def to_dict(self) -> Dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]):
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def problems(self) -> List[str]:
        """What makes this item contradict itself (a count above its total, a status its own details deny);
        empty when it is consistent."""
        return []


class Record:
    """A record kind: declare ``KIND``, ``SCHEMA``, ``REMEDY`` and the body; :meth:`load` and :meth:`write`
    do the rest (kind, schema, typed errors, atomic write)."""

    KIND: ClassVar[str] = ""
    SCHEMA: ClassVar[int] = 1
    REMEDY: ClassVar[str] = ""  # the command that remakes the file ("run `invoke deploy` again ...")
    READS: ClassVar[Tuple[int, ...]] = ()  # earlier schemas the kind still reads (what they lack gets its default)

    def body(self) -> Dict[str, Any]:
        """The record's keys besides kind, schema and written."""
        raise NotImplementedError

    @classmethod
    def from_body(cls: Type[R], data: Dict[str, Any], path: Path) -> R:
        """The record from what :meth:`body` wrote (``data`` has kind and schema checked); raise any of
        ``MALFORMED`` for a bad field."""
        raise NotImplementedError

    @classmethod
    def malformed_remedy(cls, data: Dict[str, Any], path: Path) -> str:
        """What to run when the body cannot be read (default: ``REMEDY``)."""
        return cls.REMEDY

    @classmethod
    def locate(cls, location: Path) -> Path:
        """The path helper: where the record of ``location`` (a directory or the file itself) is."""
        return Path(location)

    @classmethod
    def exists(cls, location: Path) -> bool:
        return cls.locate(location).is_file()

    @classmethod
    def load(cls: Type[R], location: Path, remedy: Optional[str] = None) -> R:
        """The one reader of the kind (``remedy``: a reader's own fix, naming its task's options)."""
        path = cls.locate(location)
        data = read_record(path, cls.KIND, cls.SCHEMA, remedy or cls.REMEDY, cls.READS)
        try:
            record = cls.from_body(data, path)
        except MALFORMED as e:
            raise RecordMalformed(f"the {cls.KIND} record {path} is incomplete or malformed",
                                  cause=f"{type(e).__name__}: {e}",
                                  remedy=remedy or cls.malformed_remedy(data, path)) from e
        problems = record.contradictions()
        if problems:
            shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            raise RecordMalformed(f"the {cls.KIND} record {path} contradicts itself (edited by hand, or damaged)",
                                  cause=shown, remedy=remedy or cls.malformed_remedy(data, path))
        return record

    def contradictions(self) -> List[str]:
        """What makes the record contradict itself, checked by :meth:`load` (counts, statuses, the items'
        own :meth:`FlatRecord.problems`); empty when it is consistent."""
        return []

    def write(self, path: Optional[Path] = None) -> Path:
        """The one writer of the kind: to ``path``, or to the record's own ``path``."""
        return write_record(Path(path or getattr(self, "path")), self.KIND, self.SCHEMA, self.body())
