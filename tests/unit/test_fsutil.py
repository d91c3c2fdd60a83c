"""The shared file-safety helpers: ownership, one writer, disk space, torch's save, stale partials."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolchain import fsutil
from toolchain.errors import BusyError, NoSpaceError, UsageError
from toolchain.fsutil import (
    OWNER_MARKER,
    as_usage_error,
    atomic_path,
    atomic_write_bytes,
    check_not_inputs,
    claim_output_dir,
    ensure_space,
    lock_path_for,
    output_lock,
    remove_stale_partials,
)

ROOT = Path(__file__).resolve().parents[2]


def test_claim_new_and_empty_directories_marks_them(tmp_path):
    new = claim_output_dir(tmp_path / "a" / "models", "convert")
    assert (new / OWNER_MARKER).is_file()
    assert json.loads((new / OWNER_MARKER).read_text())["stage"] == "convert"
    empty = tmp_path / "empty"
    empty.mkdir()
    claim_output_dir(empty, "convert")
    assert (empty / OWNER_MARKER).is_file()


def test_claim_refuses_foreign_files_unless_force_or_adopted(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "thesis.txt").write_text("years of work")
    with pytest.raises(UsageError) as ei:
        claim_output_dir(d, "convert")
    assert "thesis.txt" in str(ei.value) and "--force" in str(ei.value)
    assert not (d / OWNER_MARKER).exists()
    claim_output_dir(d, "convert", adopt=lambda p: (p / "thesis.txt").read_text() == "years of work")
    assert (d / OWNER_MARKER).is_file()
    d2 = tmp_path / "other"
    d2.mkdir()
    (d2 / "x").write_text("x")
    claim_output_dir(d2, "convert", force=True)
    assert (d2 / "x").read_text() == "x"  # force writes into it; it deletes nothing


def test_force_never_accepts_an_input_as_output(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / OWNER_MARKER).write_text("{}")
    with pytest.raises(UsageError, match="is an input"):
        claim_output_dir(models, "make-app", force=True, inputs=[models])
    with pytest.raises(UsageError, match="contains an input"):
        check_not_inputs(tmp_path, [models])
    check_not_inputs(models / "app", [models])  # an output inside an input destroys nothing
    check_not_inputs(tmp_path / "app", [None, models])


def test_lock_refuses_a_second_writer_and_names_the_holder(tmp_path):
    out = tmp_path / "models"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from toolchain.fsutil import output_lock
        with output_lock({str(out)!r}, "convert"):
            print("locked", flush=True)
            time.sleep(30)
    """)
    pid, refused = _refused_while_held(script, out)
    assert f"pid {pid}" in str(refused) and "busy" in str(refused)
    assert refused.exit_code == 2
    with output_lock(out, "convert") as lock:  # the kernel released a dead holder's lock
        assert lock == lock_path_for(out)
        with output_lock(out, "convert"):  # re-entrant in one process
            pass


def test_a_second_writer_that_looks_before_the_holder_wrote_its_name_still_names_it(tmp_path):
    """The holder writes who it is just after its flock; a second run looking in between said "pid unknown" (CI:
    test_two_deploys_at_once_one_is_busy under load).  Here the holder takes the lock and writes 0.3 s later."""
    out = tmp_path / "models"
    lock = lock_path_for(out)
    script = textwrap.dedent(f"""
        import fcntl, json, os, time
        os.makedirs({str(lock.parent)!r}, exist_ok=True)
        fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(0.3)
        os.pwrite(fd, json.dumps({{"pid": os.getpid(), "command": "invoke deploy", "since": "now"}}).encode(), 0)
        time.sleep(30)
    """)
    pid, refused = _refused_while_held(script, out)
    assert f"invoke deploy pid {pid}" in str(refused), str(refused)


def _refused_while_held(script: str, out: Path):
    """Run ``script`` (it prints "locked" once it holds ``out``'s lock), take the lock meanwhile: (its pid, the
    BusyError)."""
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(BusyError) as ei:
            with output_lock(out, "convert"):
                pass
        return holder.pid, ei.value
    finally:
        holder.kill()
        holder.wait()


def test_stale_partials_of_dead_runs_are_removed_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".model.pt.td{dead.pid}.abcd1234.partial"
    stale.write_bytes(b"half")
    live = tmp_path / f".model.pt.td{os.getpid()}.efgh5678.partial"
    live.write_bytes(b"being written")
    old_dir = tmp_path / f".app.td{dead.pid}.zz.partial"
    old_dir.mkdir()
    (old_dir / "f").write_text("x")
    user = tmp_path / "notes.partial"  # not hidden: not ours
    user.write_text("mine")
    removed = remove_stale_partials(tmp_path)
    assert sorted(removed) == sorted([stale, old_dir])
    assert live.exists() and user.exists() and not stale.exists() and not old_dir.exists()


def test_atomic_names_carry_the_pid(tmp_path):
    with atomic_path(tmp_path / "m.pt") as tmp:
        assert f".td{os.getpid()}." in tmp.name and tmp.name.endswith(".partial")
        tmp.write_bytes(b"x")


def test_ensure_space_names_what_how_much_and_where(tmp_path):
    with pytest.raises(NoSpaceError) as ei:
        ensure_space(tmp_path / "not-yet" / "x", 1 << 62, "the quant_full models")
    msg = str(ei.value)
    assert "quant_full" in msg and "needs about" in msg and "free" in msg and "fix:" in msg


def test_enospc_during_an_atomic_write_is_clean(tmp_path, monkeypatch):
    real_open = open

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    def fake_open(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        return Full(f) if "w" in mode and str(path).endswith(".partial") else f

    monkeypatch.setattr("builtins.open", fake_open)
    with pytest.raises(NoSpaceError) as ei:
        atomic_write_bytes(tmp_path / "manifest.json", b"{}")
    assert "manifest.json" in str(ei.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_torch_save_on_a_full_tmpfs_is_a_clean_error(tmp_path):
    """A real full filesystem: torch's own file writer would abort (exit 134); ours raises NoSpaceError."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        script = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(ROOT)!r})
            import torch
            from toolchain.errors import NoSpaceError
            from toolchain.fsutil import save_torch_module
            m = torch.jit.script(torch.nn.Linear(1024, 1024))  # 4 MB of weights
            try:
                save_torch_module(m, {str(mnt / 'm.pt')!r})
            except NoSpaceError as e:
                print("clean:", e.what)
        """)
        res = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr[-2000:]
        assert "clean: not enough disk space for m.pt" in res.stdout
        assert list(mnt.iterdir()) == []
        with pytest.raises(NoSpaceError):  # a write that runs out midway (no check before it)
            atomic_write_bytes(mnt / "record.json", b"x" * (3 << 20))
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)])


def test_module_docstring_documents_every_helper():
    doc = fsutil.__doc__
    for name in ("atomic_path", "claim_output_dir", "output_lock", "ensure_space", "save_torch_module",
                 "remove_stale_partials", "check_not_inputs"):
        assert name in doc


def test_a_full_disk_without_a_file_name_names_the_place_written_not_the_working_directory(tmp_path, monkeypatch):
    """Issue 34: an ENOSPC that names no file (a write() deep in a library) was reported for the working
    directory's filesystem ("49.6 GB free") instead of the full one: the caller says where it was writing."""
    build, elsewhere = tmp_path / "build", tmp_path / "cwd"
    build.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    problem = as_usage_error(OSError(errno.ENOSPC, "No space left on device"), near=build)
    assert isinstance(problem, NoSpaceError)
    text = f"{problem.what} {problem.cause}"
    assert str(build) in text and str(elsewhere) not in text
    assert "mounted at" in problem.cause  # the filesystem itself, by its mount point


def test_a_path_in_the_way_met_by_any_writer_names_what_is_in_the_way(tmp_path):
    """Issue 34 ("NotADirectoryError in verify"): a file where a directory goes (ENOTDIR, or EEXIST from
    mkdir(exist_ok=True)) or a directory where a file goes (EISDIR), met by any writer of a stage, is one usage
    error naming the path in the way, not a traceback; the same errno with nothing in the way stays a bug (None)."""
    (tmp_path / "f").write_text("mine")
    (tmp_path / "d").mkdir()
    cases = {errno.ENOTDIR: (tmp_path / "f" / "sub", "f is a file"), errno.EEXIST: (tmp_path / "f", "a file of that"),
             errno.EISDIR: (tmp_path / "d", "a directory of that")}
    for code, (where, words) in cases.items():
        problem = as_usage_error(OSError(code, os.strerror(code), str(where)))
        assert isinstance(problem, UsageError) and words in problem.what and str(where) in problem.what, code
    assert as_usage_error(OSError(errno.EEXIST, os.strerror(errno.EEXIST), str(tmp_path / "d"))) is None


def test_a_read_only_write_without_a_file_name_names_the_place_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    problem = as_usage_error(OSError(errno.EROFS, "Read-only file system"), near=tmp_path / "build")
    assert str(tmp_path / "build") in problem.what and "read-only" in problem.what
