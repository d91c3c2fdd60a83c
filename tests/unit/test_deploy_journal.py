"""Measured rows are safe before anything else (issue 34 item 3): the disk fills at each write point of deploy's
recording in turn (generated over the write points of a fault-free run) and stays full; whatever happens then,
every row measured survives (the next deploy imports the journal into the database) and each message names only
files that hold every row."""

from __future__ import annotations

import contextlib
import csv
import errno
import os
import sqlite3
from pathlib import Path

import pytest

from deploy.device_run import DeviceReport
from deploy.formats import chosen
from deploy.journal import import_journals, journal_path, read_journal
from deploy.keeper import Keeper
from deploy.orchestrate import record
from deploy.plan import DeployPlan, DeploySettings
from deploy.results import DB_NAME, ResultStore
from tests.deploy_support.report_rows import row
from toolchain.errors import TorchdroidError
from toolchain.fsutil import OWNER_MARKER
from workflow.clean import execute, plan_clean

DEVICES = {"A": ("cpu", "nnapi"), "B": ("cpu", "nnapi")}


class FullDisk:
    """From the ``full_from``-th write on, every write fails as on a full disk: ``os.replace``/``os.fsync``
    (atomic writes), ``posix_fallocate`` and ``pwrite`` beyond what was reserved (the journal), and the results
    database's writes (SQLITE_FULL).  Writes into space reserved before (``posix_fallocate``) still succeed, as they
    do on a real filesystem.  ``full_from=None`` counts the write points only."""

    def __init__(self, monkeypatch, full_from=None):
        self.full_from, self.seen, self.reserved = full_from, 0, {}
        real = {name: getattr(os, name) for name in ("replace", "fsync", "posix_fallocate", "pwrite")}

        def point(name, fd=None, end=None):
            self.seen += 1
            if fd is not None and end is not None and end <= self.reserved.get(fd, 0):
                return  # into reserved space: the blocks are the file's already
            if self.full_from is not None and self.seen >= self.full_from:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)

        def fallocate(fd, offset, length):
            point("posix_fallocate")
            real["posix_fallocate"](fd, offset, length)
            self.reserved[fd] = max(self.reserved.get(fd, 0), offset + length)

        def pwrite(fd, data, offset):
            point("pwrite", fd, offset + len(data))
            return real["pwrite"](fd, data, offset)

        def fsync(fd):
            point("fsync", fd, 0)  # the journal's blocks are reserved: its fsync allocates nothing
            return real["fsync"](fd)

        def replace(src, dst, **kw):
            point("replace")
            return real["replace"](src, dst, **kw)

        monkeypatch.setattr(os, "posix_fallocate", fallocate)
        monkeypatch.setattr(os, "pwrite", pwrite)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)
        connect = sqlite3.connect

        def connecting(*args, **kw):
            return _Connection(connect(*args, **kw), self)

        monkeypatch.setattr(sqlite3, "connect", connecting)

    def statement(self, sql: str) -> None:
        """A statement that changes the database is a write point (SQLITE_FULL on a full disk)."""
        if sql.lstrip().split(" ", 1)[0].upper() in ("INSERT", "DELETE", "UPDATE", "ALTER"):
            self.seen += 1
            if self.full_from is not None and self.seen >= self.full_from:
                raise sqlite3.OperationalError("database or disk is full")


class _Connection:
    """A sqlite3 connection whose writing statements go through FullDisk first."""

    def __init__(self, con, disk: FullDisk):
        self._con, self._disk = con, disk

    def execute(self, sql, *args):
        self._disk.statement(sql)
        return self._con.execute(sql, *args)

    def executemany(self, sql, *args):
        self._disk.statement(sql)
        return self._con.executemany(sql, *args)

    def __enter__(self):
        self._con.__enter__()
        return self

    def __exit__(self, *exc):
        return self._con.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._con, name)


def _deploy(root: Path):
    """Two devices, two rows each, measured one by one, recorded as deploy does; returns what happened."""
    s = DeploySettings(models=root / "models", results=root / "results")
    s.results.mkdir(parents=True, exist_ok=True)
    plan = DeployPlan(None, [], None)
    try:
        keeper = Keeper.open(s, plan, "2026-11-27T10:00:00+00:00")
    except (TorchdroidError, OSError) as e:
        return None, [], e
    reports, measured = [], []
    for serial, backends in DEVICES.items():
        rep = DeviceReport(serial, on_row=keeper.measured)
        for backend in backends:
            rep.add_row(row(serial, backend, "ok", 10.0))
            measured.append((serial, backend))
        keeper.device_done(rep)
        reports.append(rep)
    try:
        record(s, plan, reports, keeper, "/data/local/tmp/torchdroid/p", chosen(["torchscript"]))
    except (TorchdroidError, OSError) as e:
        return keeper, measured, e
    return keeper, measured, None


def _holds_every_row(place: str, keeper: Keeper, measured) -> bool:
    want = sorted(measured)
    if place.startswith(str(keeper.store.path)):
        return sorted((r.serial, r.backend) for r in keeper.store.rows(keeper.run_id)) == want
    if place.endswith(".csv/.json"):
        with open(f"{keeper.results / keeper.stem}.csv") as f:
            return sorted((r["serial"], r["backend"]) for r in csv.DictReader(f)) == want
    if place.startswith("the journal "):
        return sorted((r.serial, r.backend) for r in read_journal(keeper.journal.path)[1]) == want
    return False


def _write_points(tmp_path, monkeypatch) -> int:
    with monkeypatch.context() as m:
        disk = FullDisk(m)
        keeper, measured, error = _deploy(tmp_path / "count")
    assert error is None and len(measured) == 4
    assert not journal_path(keeper.results, keeper.run_id).exists()  # a run that stored everything leaves none
    return disk.seen


def test_the_disk_fills_at_each_write_point_and_no_measured_row_is_lost(tmp_path, monkeypatch):
    points = _write_points(tmp_path, monkeypatch)
    assert points > 10
    for full_from in range(1, points + 2):
        root = tmp_path / f"full-from-{full_from}"
        root.mkdir()
        with monkeypatch.context() as m:
            FullDisk(m, full_from)
            keeper, measured, error = _deploy(root)
            where = keeper.where() if keeper is not None else ""
        if keeper is not None:  # each place the messages name holds every row (looked at with the disk freed)
            lying = [p for p in where.split(" and ") if not _holds_every_row(p, keeper, measured)]
            assert not lying, (full_from, where, error)
            if error is not None:  # the run's error says where the rows are
                assert where in str(error), (full_from, str(error))
        if keeper is None:  # the disk was full before any device work: no run, no journal left behind
            assert isinstance(error, (TorchdroidError, OSError)), full_from
            assert not list((root / "results").glob("journal-run-*")), full_from
            continue
        # the disk is freed; the next deploy imports what the run did not store
        store = ResultStore(root / "results" / DB_NAME)
        import_journals(store, root / "results")
        got = sorted((r.serial, r.backend) for r in store.rows(keeper.run_id))
        assert got == sorted(measured), (full_from, error)
        assert not list((root / "results").glob("journal-run-*")), full_from


def test_a_deploy_killed_after_a_row_was_measured_leaves_it_to_the_next(tmp_path):
    s = DeploySettings(models=tmp_path / "models", results=tmp_path / "results")
    s.results.mkdir()
    keeper = Keeper.open(s, DeployPlan(None, [], None), "2026-11-27T10:00:00+00:00")
    rep = DeviceReport("A", on_row=keeper.measured)
    rep.add_row(row("A", "cpu", "ok", 10.0))  # measured; then SIGKILL: nothing else of the run happens
    with contextlib.suppress(OSError):
        os.close(keeper.journal._fd)  # what the kernel does at the process's end
    lines = import_journals(ResultStore(s.results / DB_NAME), s.results)
    assert lines and "1 row(s) of run 1" in lines[0] and "journal-run-0001.jsonl" in lines[0], lines
    assert [(r.serial, r.backend) for r in ResultStore(s.results / DB_NAME).rows(1)] == [("A", "cpu")]
    assert (s.results / "run-0001.csv").is_file() and not journal_path(s.results, 1).exists()


def test_a_journal_a_running_deploy_writes_is_not_imported(tmp_path):
    s = DeploySettings(models=tmp_path / "models", results=tmp_path / "results")
    s.results.mkdir()
    keeper = Keeper.open(s, DeployPlan(None, [], None), "2026-11-27T10:00:00+00:00")
    DeviceReport("A", on_row=keeper.measured).add_row(row("A", "cpu", "ok", 10.0))
    assert import_journals(ResultStore(s.results / DB_NAME), s.results) == []
    assert journal_path(s.results, 1).exists()
    keeper.discard()
    assert not journal_path(s.results, 1).exists()


def test_clean_removes_a_journal_a_killed_deploy_left_and_keeps_the_users_file(tmp_path):
    """The journal is written in place, not by the atomic writer: it is in the results directory's manifest all
    the same, so `clean --what results` removes it as torchdroid's; a file of the user's beside it stays."""
    s = DeploySettings(models=tmp_path / "models", results=tmp_path / "build" / "results")
    s.results.mkdir(parents=True)
    keeper = Keeper.open(s, DeployPlan(None, [], None), "2026-11-27T10:00:00+00:00")
    DeviceReport("A", on_row=keeper.measured).add_row(row("A", "cpu", "ok", 10.0))
    os.close(keeper.journal._fd)  # killed after a row was measured: the journal stays for the next deploy
    (s.results / "analysis.md").write_text("mine")
    plan = plan_clean(tmp_path / "build", ["results"])
    execute(plan)
    assert not journal_path(s.results, 1).exists(), plan
    assert (s.results / "analysis.md").read_text() == "mine"


def test_a_journal_removed_by_its_run_leaves_the_manifest(tmp_path):
    """A user's file that later takes a removed journal's name is not taken for torchdroid's."""
    s = DeploySettings(models=tmp_path / "models", results=tmp_path / "results")
    s.results.mkdir()
    keeper = Keeper.open(s, DeployPlan(None, [], None), "2026-11-27T10:00:00+00:00")
    assert journal_path(s.results, 1).name in (s.results / OWNER_MARKER).read_text()
    keeper.discard()
    assert journal_path(s.results, 1).name not in (s.results / OWNER_MARKER).read_text()


@pytest.mark.parametrize("cut", [1, 7])
def test_a_line_cut_by_a_crash_is_left_out(tmp_path, cut):
    path = tmp_path / "journal-run-0001.jsonl"
    path.write_text('{"kind": "run", "run_id": 1}\n{"kind": "row", "row": {"serial": "A"' + "\0" * cut)
    header, rows, devices = read_journal(path)
    assert header == {"kind": "run", "run_id": 1} and rows == [] and devices == []


class _Runner:
    """A phone whose executor_runner runs every program in 2 ms an execution (pushes are stubbed apart)."""

    serial = "A"

    def shell(self, cmd, timeout=None):
        import re
        from types import SimpleNamespace

        runs = int(re.search(r"--num_executions=(\d+)", cmd).group(1)) if "--num_executions" in cmd else 0
        out = "".join(f"I 00:00:00.000 executorch:executor_runner.cpp:1] Iteration {i} of {runs}: 2.0 ms\n"
                      for i in range(1, runs + 1))
        return SimpleNamespace(ok=True, output=out, code=0, tail=lambda n: out.splitlines()[-n:])


def test_an_executorch_row_is_journaled_when_measured_and_the_next_deploy_imports_it(tmp_path, monkeypatch):
    """Before: an ExecuTorch program's row lived in memory until deploy-executorch wrote its own record at the end;
    a crash (or a full disk) after it was measured lost it (issue 34 item 3).  Now it is a row of the run: on the
    disk (the journal, fsynced) before anything else, imported by the next deploy."""
    from types import SimpleNamespace

    from deploy import executorch as et_bench
    from deploy.bench import BenchOptions
    from deploy.plan import BinaryPlan
    from deploy.preflight import DeviceFacts
    from tests.executorch_support.device import write_pte_models
    from toolchain.records import pte_files

    s = DeploySettings(models=write_pte_models(tmp_path / "models", variants=(("fp32", "xnnpack", 6000),)),
                       results=tmp_path / "results", formats=("executorch",),
                       options=BenchOptions(warmup=1, iters=2, repeat=1))
    s.results.mkdir()
    keeper = Keeper.open(s, DeployPlan(None, [], None), "2026-11-27T10:00:00+00:00")
    et = et_bench.ExecutorchPlan(tmp_path / "build-info.json", BinaryPlan(Path("executor_runner"), "arm64-v8a", "c", 0),
                                 pte_files(s.models), [])
    rep = DeviceReport("A", on_row=keeper.measured)
    run = SimpleNamespace(plan=SimpleNamespace(executorch=et, hashes=None), directory="/d", rep=rep, s=s,
                          facts=DeviceFacts.from_props("A", {"ro.product.model": "Pixel"}), dev=_Runner(),
                          status=lambda text: None, go_on=lambda: None)
    monkeypatch.setattr(et_bench, "push_all", lambda *a, **kw: [])
    et_bench.run_programs(run)  # measured; then SIGKILL: nothing else of the run happens
    with contextlib.suppress(OSError):
        os.close(keeper.journal._fd)  # what the kernel does at the process's end
    lines = import_journals(ResultStore(s.results / DB_NAME), s.results)
    assert lines and "1 row(s) of run 1" in lines[0], lines
    got = ResultStore(s.results / DB_NAME).rows(1)
    assert [(r.format, r.variant, r.status, r.median_ms) for r in got] == [("executorch", "fp32-xnnpack", "ok", 2.0)]
    assert "fp32-xnnpack" in (s.results / "run-0001.csv").read_text() and not journal_path(s.results, 1).exists()
