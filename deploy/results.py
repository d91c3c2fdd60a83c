"""The results store: SQLite history across runs, devices, commits and variants; CSV/JSON exports."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import fields
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from toolchain.errors import RecordError
from toolchain.fsutil import LIVE, as_usage_error, atomic_write_csv, own_dir, record_written
from toolchain.hardware_records import Placement
from toolchain.numerics_records import NumericsVerdict
from toolchain.record_base import RecordMissing, schema_error
from toolchain.records import DeployResults, ResultRow, deploy_results_path
from toolchain.stats import SLOW_DOWN, compare

__all__ = ["DB_NAME", "Line", "ResultRow", "ResultStore", "export", "format_lines", "over_cpu", "speedups"]

DB_NAME = "results.sqlite"
SCHEMA = 1
COLUMNS = [f.name for f in fields(ResultRow)]
_TYPES = {f.name: {int: "INTEGER", float: "REAL"}.get(_t, "TEXT") for f in fields(ResultRow)
          for _t in [{"int": int, "Optional[int]": int, "float": float, "Optional[float]": float}.get(str(f.type))]}
_STORED = [c for c in COLUMNS if c not in ("run_id", "started")]


def _full_disk(e: sqlite3.Error, path: Path):
    """SQLite's "database or disk is full" as the full-disk error naming the database and its filesystem (not
    "not a torchdroid results database"); None for any other error."""
    if "disk is full" not in str(e) and "disk I/O error" not in str(e):
        return None
    import errno
    import os

    code = errno.ENOSPC if "disk is full" in str(e) else errno.EIO
    return as_usage_error(OSError(code, os.strerror(code), str(path)))


class ResultStore:
    def __init__(self, path: Path):
        self.path = Path(path)

    def _foreign(self, timeout: float) -> Optional[str]:
        """Why an existing, non-empty file at the path (or behind a symlink there) is not a torchdroid results
        database, read without writing a byte (None: it is one, or there is nothing yet)."""
        try:
            if self.path.stat().st_size == 0:
                return None
        except FileNotFoundError:
            return None
        try:
            with closing(sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout)) as con:
                row = con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or _full_disk(e, self.path) is not None:
                return None  # busy, or a full disk: the writing connection below says so
            return str(e)
        except sqlite3.DatabaseError as e:
            return str(e)
        return None if row else "it has no torchdroid schema record"

    def _connect(self, timeout: float = 30) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        why = self._foreign(timeout)
        if why:
            raise RecordError(f"{self.path} is not a torchdroid results database", cause=why,
                              remedy="move it away (or set deploy.results to another directory)")
        own_dir(self.path.parent, "deploy")  # what deploy and report write there is recorded (clean keeps the rest)
        try:
            con = sqlite3.connect(self.path, timeout=timeout)
            con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
            (schema,) = con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            con.commit()
            record_written(self.path, kind=LIVE)
        except sqlite3.OperationalError as e:
            full = _full_disk(e, self.path)
            if full is not None:
                raise full from e
            if "locked" not in str(e):
                raise RecordError(f"{self.path} is not a torchdroid results database", cause=str(e),
                                  remedy="move it away (or set deploy.results to another directory)") from e
            raise RecordError(f"the results database {self.path} is busy", cause=str(e),
                              remedy="another deploy or report is writing it: wait for it and try again") from e
        except sqlite3.DatabaseError as e:
            raise RecordError(f"{self.path} is not a torchdroid results database", cause=str(e),
                              remedy="move it away (or set deploy.results to another directory)") from e
        if schema != str(SCHEMA):
            raise schema_error(self.path, int(schema) if schema.isdigit() else schema, SCHEMA,
                               "set deploy.results (--results) to a new directory")
        con.execute("CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT, "
                    "project TEXT, binary_commit TEXT, settings TEXT)")
        cols = ", ".join(f"{c} {_TYPES[c]}" for c in _STORED)
        con.execute(f"CREATE TABLE IF NOT EXISTS results (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                    f"run_id INTEGER REFERENCES runs(id), {cols})")
        have = {r[1] for r in con.execute("PRAGMA table_info(results)")}
        for c in _STORED:  # a store written before a column existed: add it (old rows read NULL)
            if c not in have:
                con.execute(f"ALTER TABLE results ADD COLUMN {c} {_TYPES[c]}")
        con.execute("CREATE TABLE IF NOT EXISTS devices (run_id INTEGER REFERENCES runs(id), serial TEXT, facts TEXT)")
        con.commit()
        return con

    def add_run(self, started: str, project: str, binary_commit: str, settings: dict, rows: Sequence[ResultRow],
                devices: Sequence[dict] = ()) -> int:
        """A whole run at once, all or nothing: ``begin_run`` then ``add_rows`` (nonsense rows are refused before either;
        a run whose rows could not be added is dropped again)."""
        check_rows(rows)
        run_id = self.begin_run(started, project, binary_commit, settings)
        try:
            self.add_rows(run_id, started, rows, devices)
        except BaseException:
            self.drop_run(run_id)
            raise
        return run_id

    def begin_run(self, started: str, project: str, binary_commit: str, settings: dict,
                  busy_wait: float = 5.0) -> int:
        """Before any device work: prove the store is a torchdroid database, readable in full, not locked and
        writable, and reserve the run's id (its rows are added per device with ``add_rows``)."""
        try:
            con = self._connect(timeout=busy_wait)
        except OSError as e:
            raise RecordError(f"cannot open the results database {self.path}", cause=f"{e.strerror or e}",
                              remedy="make the results directory writable, or set deploy.results (--results) to "
                                     "another directory") from e
        try:
            (check,) = con.execute("PRAGMA quick_check").fetchone()
            if check != "ok":
                raise RecordError(f"the results database {self.path} is damaged", cause=f"SQLite: {check}",
                                  remedy="move it away (its runs stay readable in the run-NNNN.csv/json beside it) "
                                         "or set deploy.results to another directory, then deploy again")
            with con:
                cur = con.execute("INSERT INTO runs (started, project, binary_commit, settings) VALUES (?,?,?,?)",
                                  (started, project, binary_commit, json.dumps(settings, default=str)))
            return int(cur.lastrowid)
        except sqlite3.OperationalError as e:
            full = _full_disk(e, self.path)
            if full is not None:
                raise full from e
            busy = "locked" in str(e) or "busy" in str(e)
            raise RecordError(f"the results database {self.path} is {'busy' if busy else 'not writable'}",
                              cause=str(e),
                              remedy="another deploy or report is writing it: wait for it and deploy again" if busy
                              else "make it writable, or set deploy.results (--results) to another directory") from e
        except sqlite3.DatabaseError as e:
            raise RecordError(f"the results database {self.path} is damaged", cause=str(e),
                              remedy="move it away or set deploy.results to another directory, then deploy again"
                              ) from e
        finally:
            con.close()

    def add_rows(self, run_id: int, started: str, rows: Sequence[ResultRow], devices: Sequence[dict] = ()) -> None:
        """One device's rows (and conditions) into a run ``begin_run`` reserved."""
        check_rows(rows)
        try:
            self._insert(run_id, rows, devices)
        except sqlite3.OperationalError as e:
            full = _full_disk(e, self.path)
            if full is not None:
                raise full from e
            raise
        for r in rows:
            r.run_id, r.started = run_id, started

    def _insert(self, run_id: int, rows: Sequence[ResultRow], devices: Sequence[dict]) -> None:
        with closing(self._connect()) as con:
            with con:
                con.executemany(
                    f"INSERT INTO results (run_id, {', '.join(_STORED)}) VALUES (?, {', '.join('?' * len(_STORED))})",
                    [(run_id, *[getattr(r, c) for c in _STORED]) for r in rows])
                con.executemany("INSERT INTO devices (run_id, serial, facts) VALUES (?,?,?)",
                                [(run_id, d.get("serial", ""), json.dumps(d, default=str)) for d in devices])

    def serials(self, run_id: int) -> set:
        """The devices the database holds rows of in ``run_id`` (each device's rows are added at once)."""
        if not self.path.is_file():
            return set()
        with closing(self._connect()) as con:
            return {s for (s,) in con.execute("SELECT DISTINCT serial FROM results WHERE run_id = ?", (run_id,))}

    def import_rows(self, run_id: int, header: dict, rows: Sequence[ResultRow], devices: Sequence[dict]) -> None:
        """Rows a deploy measured but did not store (from its journal, deploy/journal.py) into their run: the run
        made again under its own id when it is not in the database any more."""
        check_rows(rows)
        with closing(self._connect()) as con:
            with con:
                con.execute("INSERT OR IGNORE INTO runs (id, started, project, binary_commit, settings) "
                            "VALUES (?,?,?,?,?)", (run_id, header.get("started", ""), header.get("project", ""),
                                                   header.get("binary_commit", ""),
                                                   json.dumps(header.get("settings") or {}, default=str)))
        self.add_rows(run_id, header.get("started", ""), rows, devices)

    def drop_run(self, run_id: int) -> None:
        """Forget a run ``begin_run`` reserved that ended without a row (Ctrl-C before any benchmark completed)."""
        with closing(self._connect()) as con:
            with con:
                con.execute("DELETE FROM devices WHERE run_id = ?", (run_id,))
                con.execute("DELETE FROM results WHERE run_id = ?", (run_id,))
                con.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    def runs(self) -> List[dict]:
        if not self.path.is_file():
            return []
        with closing(self._connect()) as con:
            return [dict(zip(("id", "started", "project", "binary_commit"), r))
                    for r in con.execute("SELECT id, started, project, binary_commit FROM runs ORDER BY id")]

    def settings(self, run_id: int) -> dict:
        """The deploy settings recorded with a run (``models``, ``results``, protocol...); {} when unreadable."""
        with closing(self._connect()) as con:
            found = con.execute("SELECT settings FROM runs WHERE id = ?", (run_id,)).fetchone()
        try:
            value = json.loads(found[0]) if found and found[0] else {}
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def devices(self, run_id: int) -> List[dict]:
        """The device conditions recorded with a run (SoC, governor, thermal, battery before and after)."""
        with closing(self._connect()) as con:
            return [json.loads(f) for (f,) in con.execute("SELECT facts FROM devices WHERE run_id = ?", (run_id,))]

    def rows(self, run_id: Optional[int] = None) -> List[ResultRow]:
        """Rows of one run (default: the latest); ``run_id=0`` means every run."""
        if not self.path.is_file():
            raise RecordError(f"no results database at {self.path}", remedy="run `invoke deploy` first")
        with closing(self._connect()) as con:
            if run_id is None:
                latest = con.execute("SELECT MAX(id) FROM runs").fetchone()[0]
                if latest is None:
                    raise RecordError(f"{self.path} holds no runs yet", remedy="run `invoke deploy` first")
                run_id = latest
            names = [c for c in COLUMNS if c != "started"]
            sql = (f"SELECT {', '.join('results.' + c for c in names)}, runs.started FROM results "
                   "JOIN runs ON runs.id = results.run_id")
            args: tuple = ()
            if run_id:
                sql += " WHERE results.run_id = ?"
                args = (run_id,)
            out = [_row(dict(zip(names + ["started"], r))) for r in con.execute(sql + " ORDER BY results.id", args)]
            if run_id and not out:
                known = ", ".join(str(r["id"]) for r in self.runs()) or "none"
                raise RecordError(f"no results for run {run_id} in {self.path}", remedy=f"pick one of: {known}")
            return out


def _row(values: dict) -> ResultRow:
    """A stored row; one stored before the format column existed (NULL there) is a TorchScript one."""
    return ResultRow(**{**values, "format": values.get("format") or "torchscript"})


def check_rows(rows: Sequence[ResultRow]) -> None:
    """Refuse to store nonsense: an ``ok`` row without positive latencies, a failed row without a reason."""
    bad = [(r, p) for r in rows for p in r.problems()]
    if bad:
        r, p = bad[0]
        raise RecordError(f"refusing to store {len(bad)} invalid result row(s): {r.serial} {r.model_file or r.source}: "
                          f"{p}", cause="the benchmark produced no usable numbers (0 iterations?) or a bug",
                          remedy="run `invoke deploy --iter N` again with N >= 1; report it if it repeats")


def export(rows: Sequence[ResultRow], out_dir: Path, stem: str, devices: Sequence[dict] = (),
           numerics: Optional[List[NumericsVerdict]] = None,
           hardware: Optional[List[Placement]] = None, executorch: Optional[dict] = None) -> Dict[str, Path]:
    """The run's one JSON document (``<stem>.json``) and its CSV twin of the rows (``<stem>.csv``), atomically."""
    out_dir = Path(out_dir)
    csv_path = atomic_write_csv(out_dir / f"{stem}.csv", rows, COLUMNS)
    run_id = rows[0].run_id if rows else None
    started = rows[0].started if rows else ""
    json_path = DeployResults(run_id, started, list(rows), speedups(rows), list(devices), numerics, hardware,
                              dict(executorch or {})).write(deploy_results_path(out_dir, stem))
    return {"csv": csv_path, "json": json_path}


def export_again(rows: Sequence[ResultRow], out_dir: Path, run_id: int, devices: Sequence[dict],
                 doc: Optional[DeployResults], unreadable: str = "") -> Dict[str, Path]:
    """A run's CSV/JSON again from the store (report), the document's checks kept; a document that cannot be read
    (``unreadable``: an earlier torchdroid's) is left as it is and only its CSV twin is written."""
    stem = f"run-{run_id:04d}"
    if unreadable:
        return {"csv": atomic_write_csv(Path(out_dir) / f"{stem}.csv", rows, COLUMNS)}
    return export(rows, out_dir, stem, devices, doc.numerics if doc else None, doc.hardware if doc else None,
                  doc.executorch if doc else None)


def run_document(results_dir: Path, run_id: Optional[int]) -> Tuple[Optional[DeployResults], str]:
    """The run's JSON document (``run-NNNN.json``; run None: ``latest.json``); ``(None, "")`` when there is none,
    ``(None, why)`` when it cannot be read (an earlier torchdroid's is left as it is: ``why`` names the command that
    remakes it)."""
    try:
        stem = "latest" if run_id is None else f"run-{run_id:04d}"
        return DeployResults.load(deploy_results_path(results_dir, stem)), ""
    except RecordMissing:
        return None, ""
    except RecordError as e:
        return None, f"{e.what} ({e.cause}); {e.remedy}" if e.cause else f"{e.what}; {e.remedy}"


def _pair(r: ResultRow) -> tuple:
    return r.run_id, r.serial, r.stem, r.mode, r.source


def over_cpu(rows: Sequence[ResultRow]) -> List[Optional[float]]:
    """Every speed-up the tool shows, per row: the ok TorchScript CPU median of the same run, device, model, mode
    (an ExecuTorch program's is its precision's: fp32 none, int8 full) and source over the row's median; None
    without an ok pair."""
    base = {_pair(r): r.median_ms for r in rows if r.format == "torchscript" and r.backend == "cpu" and r.status == "ok"}
    return [base[_pair(r)] / r.median_ms if r.status == "ok" and r.median_ms and base.get(_pair(r)) else None
            for r in rows]


def speedups(rows: Sequence[ResultRow]) -> List[dict]:
    """CPU vs NNAPI per device, model, mode and source: ``speedup = cpu_median / nnapi_median`` (:func:`over_cpu`).

    The phone times each backend in its own runs, not in alternated rounds: the one ratio is its own range, and
    ``nnapi_slower`` is :class:`toolchain.stats.Comparison`'s verdict of it."""
    by: Dict[tuple, Dict[str, Tuple[ResultRow, Optional[float]]]] = {}
    for r, sp in zip(rows, over_cpu(rows)):
        if r.backend in ("cpu", "nnapi"):  # a failed device's row has no backend
            by.setdefault(_pair(r), {})[r.backend] = (r, sp)
    out = []
    for (run_id, serial, stem, mode, source), pair in by.items():
        (cpu, _), (nnapi, sp) = pair.get("cpu", (None, None)), pair.get("nnapi", (None, None))
        ref = cpu or nnapi
        out.append({"run_id": run_id, "serial": serial, "device_model": ref.device_model, "stem": stem, "mode": mode,
                    "source": source, "cpu_ms": cpu.median_ms if cpu else None,
                    "nnapi_ms": nnapi.median_ms if nnapi else None, "speedup": sp,
                    "nnapi_slower": sp is not None and compare([sp]).verdict == SLOW_DOWN})
    return out


class Line:
    """A row of the formats' table: one row of the run (either format) as a person names it ("TorchScript CPU
    quant_none", "NNAPI quant_full", "ExecuTorch fp32-xnnpack"), with its speed-up over the CPU row of its
    precision (:func:`over_cpu`); the row's own fields read through it."""

    def __init__(self, row: ResultRow, speedup_vs_cpu: Optional[float] = None):
        self.row, self.speedup_vs_cpu = row, speedup_vs_cpu

    def __getattr__(self, name: str):  # serial, status, median_ms, samples...: the row's
        if "row" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["row"], name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Line) and (self.row, self.speedup_vs_cpu) == (other.row, other.speedup_vs_cpu)

    @property
    def runtime(self) -> str:
        r = self.row
        if r.format == "executorch":
            return f"ExecuTorch {r.variant}{' (traced)' if r.has_flag('traced') else ''}"
        return f"{'TorchScript CPU' if r.backend == 'cpu' else 'NNAPI'} {r.variant}"

    @property
    def precision(self) -> str:
        return "fp32" if self.row.mode == "none" else "int8"

    @property
    def note(self) -> str:
        return self.row.reason

    def to_dict(self) -> dict:
        r = self.row
        return {"serial": r.serial, "runtime": self.runtime, "precision": self.precision, "file": r.model_file,
                "status": r.status, "median_ms": r.median_ms, "p90_ms": r.p90_ms, "min_ms": r.min_ms,
                "samples": r.samples, "speedup_vs_cpu": self.speedup_vs_cpu, "note": self.note}


def format_lines(rows: Sequence[ResultRow]) -> List[Line]:
    """Per device with ExecuTorch programs in ``rows`` (a run's), its ok TorchScript binary CPU and NNAPI rows of
    the programs' models at the programs' precisions (quant_none, quant_full), then its programs, each line with its
    speed-up over the CPU row of its precision; the deploy summary and the report show these."""
    programs = [r for r in rows if r.format == "executorch"]
    stems = {r.stem for r in programs}
    out = []
    for serial in dict.fromkeys(r.serial for r in programs):
        out += [r for r in rows if r.serial == serial and _compared(r, stems)] + [r for r in programs if r.serial == serial]
    return [Line(r, sp) for r, sp in zip(out, over_cpu(out))]


def _compared(r: ResultRow, stems: set) -> bool:
    """A TorchScript row the programs are compared with: ok, the benchmark binary's, one of their models and
    precisions."""
    return (r.format == "torchscript" and r.source == "binary" and r.stem in stems and r.status == "ok"
            and r.variant in ("quant_none", "quant_full"))
