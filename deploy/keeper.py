"""Every measured row kept the moment it exists, and messages that say where it is.

Before any device work the run's id is reserved in the results database and its journal created with its space
reserved (deploy/journal.py).  Each row is appended to the journal (fsync) as it is measured; when a device is
done its final rows (with the throttling flags) and conditions go to the journal, the run's CSV/JSON and the
database.  A later write that fails (a full disk, a busy database) loses nothing: the rows stay where they
already are, each message names only the files that hold them, and the journal, kept until the database has
every row, is imported by the next deploy.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from dataclasses import asdict
from pathlib import Path
from typing import List, Tuple

from toolchain.errors import RecordError, TorchdroidError
from toolchain.fsutil import as_usage_error
from toolchain.records import ResultRow, deploy_results_path

from .device_run import DeviceReport
from .journal import Journal
from .plan import DeployPlan, DeploySettings, project_name
from .results import DB_NAME, ResultStore, export

log = logging.getLogger(__name__)

WRITE_ERRORS = (TorchdroidError, OSError)  # what a write of the run's files raises on a full disk


class Keeper:
    """The run's rows from the moment each is measured: journal, CSV/JSON and database (see the module text)."""

    def __init__(self, s: DeploySettings, store: ResultStore, run_id: int, started: str, journal: Journal):
        self.s, self.store, self.run_id, self.started, self.journal = s, store, run_id, started, journal
        self.results = Path(s.results)
        self.rows: List[ResultRow] = []
        self.devices: List[dict] = []
        self.unstored: List[Tuple[List[ResultRow], List[dict]]] = []
        self.exported = False  # the run's CSV/JSON on disk hold every row kept so far
        self._guard = threading.Lock()

    @classmethod
    def open(cls, s: DeploySettings, plan: DeployPlan, started: str) -> "Keeper":
        """Reserve the run's id and create its journal; a disk that cannot take the journal stops the run here,
        before any device work (the reserved id is given back)."""
        store = ResultStore(Path(s.results) / DB_NAME)
        # absolute paths: report compares the run's models directory with deploy-executorch's, from any directory
        settings = {k: (str(v.resolve()) if isinstance(v, Path) else v) for k, v in asdict(s).items()}
        project = project_name(s.project)
        run_id = store.begin_run(started, project, plan.commit, settings)
        try:
            journal = Journal.create(Path(s.results), run_id, {"started": started, "project": project,
                                                               "binary_commit": plan.commit, "settings": settings})
        except BaseException:
            with contextlib.suppress(TorchdroidError, sqlite3.Error):
                store.drop_run(run_id)
            raise
        return cls(s, store, run_id, started, journal)

    @property
    def stem(self) -> str:
        return f"run-{self.run_id:04d}"

    def _own(self, rep: DeviceReport, row: ResultRow) -> None:
        row.server = rep.server
        row.run_id, row.started = self.run_id, self.started

    def measured(self, rep: DeviceReport, row: ResultRow) -> None:
        """A row the moment it exists (``DeviceReport.on_row``, in the device's worker): onto the disk first."""
        self._own(rep, row)
        self.journal.rows([row])

    def device_done(self, rep: DeviceReport) -> None:
        for r in rep.rows:
            self._own(rep, r)
        devices = [rep.conditions.to_dict()] if rep.conditions is not None else []
        self.journal.add([{"kind": "device", "serial": rep.serial, "facts": devices[0] if devices else None,
                           "rows": [r.to_dict() for r in rep.rows]}])
        with self._guard:
            self.rows += rep.rows
            self.devices += devices
            try:  # the CSV/JSON first: they never wait on SQLite
                export(self.rows, self.results, self.stem, self.devices)
                self.exported = True
            except WRITE_ERRORS as e:  # a full disk: the journal and the store may still hold them; the end says so
                self.exported = False
                log.warning("could not write %s.csv/.json after %s: %s", self.results / self.stem, rep.serial,
                            getattr(e, "what", e))
            try:
                self._store_unstored()
                self.store.add_rows(self.run_id, self.started, rep.rows, devices)
            except TorchdroidError as e:
                self._unstored(rep.rows, devices, e.what)
            except sqlite3.Error as e:
                self._unstored(rep.rows, devices, f"{type(e).__name__}: {e}")

    def _store_unstored(self) -> None:
        while self.unstored:
            rows, devs = self.unstored[0]
            self.store.add_rows(self.run_id, self.started, rows, devs)
            self.unstored.pop(0)

    def where(self) -> str:
        """The files that hold every row of the run now (for the messages); never a file that does not."""
        places = [] if self.unstored else [f"{self.store.path} (run {self.run_id})"]
        if self.exported:
            places.append(f"{self.results / self.stem}.csv/.json")
        if self.journal.failed is None and self.journal.path.exists():
            places.append(f"the journal {self.journal.path} (the next deploy imports it)")
        return " and ".join(places) or "no file: the disk took none of them, the tables printed above are all there is"

    def _unstored(self, rows: List[ResultRow], devices: List[dict], why: str) -> None:
        self.unstored.append((list(rows), devices))
        log.warning("the results database %s did not take %d row(s) now (%s); they are kept in %s and tried again "
                    "at the end of the run", self.store.path, len(rows), why, self.where())

    def discard(self) -> None:
        """The run ended before any row: forget its reserved id, its journal and the CSV/JSON written for it."""
        for path in (self.results / f"{self.stem}.csv", deploy_results_path(self.results, self.stem)):
            path.unlink(missing_ok=True)
        self.journal.close(remove=True)
        try:
            self.store.drop_run(self.run_id)
        except (TorchdroidError, sqlite3.Error) as e:  # the run stays empty in the history: say so in the log
            log.warning("could not remove the empty run %d from %s: %s", self.run_id, self.store.path,
                        getattr(e, "what", e))

    def finish(self) -> None:
        """The rows the store did not take during the run; the journal removed once the store has every row.
        Raises when the store still does not take them (naming where they are)."""
        with self._guard:
            try:
                self._store_unstored()
            except (TorchdroidError, sqlite3.Error) as e:
                self.journal.close(remove=False)
                raise RecordError(f"the results database {self.store.path} did not take run {self.run_id}'s rows",
                                  cause=getattr(e, "what", str(e)),
                                  remedy=f"every row is kept in {self.where()}; free the database (another deploy "
                                         "or report?) or the disk, and deploy again: it imports the journal") from e
            self.journal.close(remove=True)

    def not_exported(self, e: BaseException) -> TorchdroidError:
        """A failed write of the run's CSV/JSON (``e``) as the run's error, saying where the rows are."""
        err = e if isinstance(e, TorchdroidError) else as_usage_error(e) if isinstance(e, OSError) else None
        if err is None:  # not the environment's doing (a bug): its own traceback, the rows named in the log
            log.error("every row of run %d is kept in %s", self.run_id, self.where())
            return RecordError(f"writing run {self.run_id}'s CSV/JSON failed: {type(e).__name__}: {e}",
                               remedy=f"every row is kept in {self.where()}; report this")
        err.remedy = f"{err.remedy + '; ' if err.remedy else ''}every row of run {self.run_id} is kept in {self.where()}"
        return err
