"""Per-file ownership (issue 34 item 1), generated over file layouts: in a directory torchdroid owns, `clean` and a
forced replacement remove only the files its manifest lists with an unchanged sha256; a file the user added, one
they edited, one replaced by a link stays byte for byte and is named (also by `-n`); no task writes into a
directory another task owns."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolchain.errors import UsageError
from toolchain.fsutil import (
    CHANGED,
    LIVE,
    NOT_OURS,
    OWNER_MARKER,
    atomic_dir,
    atomic_write_bytes,
    claim_output_dir,
    mark_owned,
    ownership,
    record_written,
    refuse_another_owner,
)
from toolchain.logs import rotate_logs, setup_logging
from workflow.clean import execute, plan_clean

PART = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)
REL = st.lists(PART, min_size=1, max_size=3).map("/".join)
ACTIONS = ("keep", "edit", "delete", "link")


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


# the directories clean judges per file: (name under the build directory, the task that owns it, clean --what)
OWNED = [("models", "convert", "outputs"), ("bench", "bench", "outputs"), ("bench", "bench-executorch", "outputs"),
         ("cache", "cache", "caches")]


def _layout(models: Path, ours, user, actions, stage: str = "convert"):
    """torchdroid writes ``ours`` (atomically, so recorded); the user then edits, deletes or links some of them and
    adds ``user``.  Returns (paths torchdroid may remove, {path: sha256} the user must keep)."""
    mark_owned(models, stage)
    written = []
    for rel in ours:
        target = models / rel
        if any(p.exists() and not p.is_dir() for p in target.parents) or target.is_dir():
            continue
        atomic_write_bytes(target, f"model {rel}".encode())
        written.append(target)
    removable, kept = [], {}
    for target, action in zip(written, actions):
        if action == "edit":
            target.write_bytes(b"my edit")
            kept[target] = _digest(target)
        elif action == "delete":
            target.unlink()
        elif action == "link":
            target.unlink()
            target.symlink_to(models.parent / "elsewhere")
        else:
            removable.append(target)
    for target in written[len(actions):]:
        removable.append(target)
    for rel in user:
        target = models / f"user-{rel}"
        if target.exists() or any(p.exists() and not p.is_dir() for p in target.parents):
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"notes {rel}")
        kept[target] = _digest(target)
    return removable, kept


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ours=st.lists(REL, min_size=1, max_size=6, unique=True), user=st.lists(REL, max_size=4, unique=True),
       actions=st.lists(st.sampled_from(ACTIONS), max_size=6), where=st.sampled_from(OWNED))
def test_clean_removes_only_unchanged_files_torchdroid_wrote_and_names_the_rest(ours, user, actions, where):
    name, stage, what = where
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp) / "build"
        (build.parent / "elsewhere").write_text("the link's target")
        models = build / name
        models.mkdir(parents=True)
        removable, kept = _layout(models, ours, user, actions, stage)
        links = [p for p in models.rglob("*") if p.is_symlink()]
        preview = plan_clean(build, (what,))
        named = "\n".join(preview.kept())
        for path in kept:
            assert str(path) in named, f"-n does not name {path}"
        for link in links:
            assert str(link) in named
        assert all(p.exists() for p in removable), "the preview removed something"
        execute(plan_clean(build, (what,)))
        for path, digest in kept.items():
            assert path.is_file() and _digest(path) == digest, f"{path} was lost or changed"
        assert all(link.is_symlink() for link in links)
        assert not [p for p in removable if p.exists()], "a file torchdroid wrote was left"
        assert (build.parent / "elsewhere").read_text() == "the link's target"
        if not kept and not links:
            assert not models.exists()


def test_the_reasons_say_which_files_are_the_users_and_which_were_edited(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    mark_owned(models, "convert")
    atomic_write_bytes(models / "a.pt", b"a")
    atomic_write_bytes(models / "b.pt", b"b")
    (models / "b.pt").write_bytes(b"edited")
    (models / "NOTES.txt").write_text("mine")
    found = ownership(models)
    assert found.ours == ["a.pt"]
    assert sorted(found.kept) == [("NOTES.txt", NOT_OURS), ("b.pt", CHANGED)]


def test_a_forced_replacement_keeps_the_users_files_and_edits(tmp_path):
    """make-app --force (atomic_dir) on an app with the user's edit and an added file: the added file stays where it
    was, the edited one beside the new one as <name>.yours; neither is recorded as torchdroid's."""
    app = tmp_path / "app"
    with atomic_dir(app, stage="make-app") as tmp:
        atomic_write_bytes(tmp / "src" / "Main.java", b"class Main {}")
        (tmp / "build.gradle").write_text("plugins {}")  # written in place: recorded when the directory is done
    assert ownership(app).kept == []
    (app / "src" / "Main.java").write_text("class Main { /* mine */ }")
    (app / "TODO.md").write_text("mine")
    with atomic_dir(app, force=True, stage="make-app") as tmp:
        atomic_write_bytes(tmp / "src" / "Main.java", b"class Main { int v2; }")
    assert (app / "TODO.md").read_text() == "mine"
    assert (app / "src" / "Main.java.yours").read_text() == "class Main { /* mine */ }"
    assert (app / "src" / "Main.java").read_text() == "class Main { int v2; }"
    assert sorted(ownership(app).kept) == [("TODO.md", NOT_OURS), ("src/Main.java.yours", NOT_OURS)]


@pytest.mark.parametrize("owner", ["deploy", "convert"])
def test_no_task_writes_into_a_directory_another_task_owns(tmp_path, owner):
    """make-app -o build/results --force must not replace the deploy history with a Gradle project."""
    results = tmp_path / "results"
    results.mkdir()
    mark_owned(results, owner)
    (results / "run-0001.csv").write_text("history")
    with pytest.raises(UsageError, match="holds the outputs of `invoke " + owner):
        with atomic_dir(results, force=True, stage="make-app"):
            pass
    with pytest.raises(UsageError):
        claim_output_dir(results, "make-app", force=True)
    assert (results / "run-0001.csv").read_text() == "history"


def test_an_older_results_directory_without_a_marker_is_recognised(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "results.sqlite").write_bytes(b"SQLite format 3\x00")
    with pytest.raises(UsageError, match="invoke deploy"):
        refuse_another_owner(results, "make-app")
    refuse_another_owner(results, "report")  # report writes its pages beside the history


def test_the_marker_lists_each_file_with_its_hash(tmp_path):
    mark_owned(tmp_path, "convert")
    atomic_write_bytes(tmp_path / "m.pt", b"weights")
    import json

    files = json.loads((tmp_path / OWNER_MARKER).read_text())["files"]
    assert files == {"m.pt": {"sha256": hashlib.sha256(b"weights").hexdigest(), "kind": "file"}}
    assert os.path.basename(OWNER_MARKER) not in files


LOG = st.builds(lambda task, day, pid: f"{task}-202001{day:02d}-000000-{pid}.log",
                st.sampled_from(["convert", "deploy", "bench"]), st.integers(1, 28), st.integers(1, 99999))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ours=st.lists(LOG, min_size=1, max_size=6, unique=True), user=st.lists(st.one_of(LOG, REL), max_size=4,
                                                                              unique=True),
       edited=st.lists(st.booleans(), max_size=6))
def test_clean_removes_only_the_logs_torchdroid_wrote_and_names_the_rest(ours, user, edited):
    """The log directory's manifest lists each run log (by name: it grows while its run writes it); a file the user
    put there, even one named like a run log, is kept and named by -n, and rotation never takes it either."""
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp) / "build"
        logs = build / "logs"
        logs.mkdir(parents=True)
        mark_owned(logs, "logs")
        for name in ours:
            (logs / name).write_text(f"run log {name}")
            record_written(logs / name, kind=LIVE)
        for name, edit in zip(ours, edited):
            if edit:  # a run log goes on growing: still torchdroid's
                with open(logs / name, "a") as f:
                    f.write("more lines")
        kept = {}
        for rel in user:
            target = logs / f"user-{rel}" if "/" in rel or rel in ours else logs / rel
            if target.exists() or rel in ours:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"notes {rel}")
            kept[target] = _digest(target)
        for p in logs.rglob("*"):
            os.utime(p, (0, 0))  # every file older than the limit
        rotate_logs(logs, keep=0)
        assert all(p.is_file() and _digest(p) == d for p, d in kept.items()), "rotation removed a user's file"
        for name in ours:
            (logs / name).write_text("again")
            os.utime(logs / name, (0, 0))
            record_written(logs / name, kind=LIVE)
        preview = plan_clean(build, ("logs",))
        named = "\n".join(preview.kept())
        assert all(str(p) in named for p in kept), f"-n does not name every file of the user's:\n{named}"
        assert sorted(p.name for p, _ in preview.targets) == sorted(ours)
        execute(preview)
        assert all(p.is_file() and _digest(p) == d for p, d in kept.items()), "clean removed a user's file"
        assert not [n for n in ours if (logs / n).exists()], "a log torchdroid wrote was left"
        assert not (ownership(logs).ours), "the manifest still lists removed logs"


def test_each_run_log_is_listed_in_the_log_directorys_manifest(tmp_path):
    """setup_logging marks build/logs and lists the run's log, taking an older torchdroid's logs as its own; a file
    the user adds later under a run log's name is the user's."""
    logs = tmp_path / "build" / "logs"
    logs.mkdir(parents=True)
    older = logs / "convert-20200101-000000-1.log"
    older.write_text("an older torchdroid's log")
    notes = logs / "notes.txt"
    notes.write_text("mine")
    path = setup_logging(tmp_path / "build", "clean")
    try:
        found = ownership(logs)
        assert found is not None and sorted(found.ours) == sorted([older.name, path.name])
        assert [rel for rel, _ in found.kept] == ["notes.txt"]
        copied = logs / "deploy-20200101-000000-2.log"
        copied.write_text("a log the user copied here")
        for p in (older, copied, notes):
            os.utime(p, (0, 0))
        plan = plan_clean(tmp_path / "build", ("logs",))
        assert [p for p, _ in plan.targets] == [older]
        assert any(str(copied) in line for line in plan.kept()) and any(str(notes) in line for line in plan.kept())
    finally:
        for h in list(logging.getLogger().handlers):
            if isinstance(h, logging.FileHandler) and h.baseFilename == str(path):
                logging.getLogger().removeHandler(h)
                h.close()


def test_the_remembered_weights_location_is_listed_in_the_caches_manifest(tmp_path, monkeypatch):
    """build/cache is torchdroid's per file: clean --what caches removes the memo it wrote and keeps (and names) a
    file the user put there, instead of refusing the whole clean."""
    import converter.models
    from workflow import weights

    monkeypatch.setattr(converter.models, "pretrained_location", lambda model: ("https://example/w.pth", tmp_path))
    build = tmp_path / "build"
    weights.location("mobilenet_v2", build)
    cache = build / "cache"
    mine = cache / "my-notes.txt"
    mine.write_text("mine")
    plan = plan_clean(build, ("caches",))
    assert [p for p, _ in plan.targets] == [cache] and any(str(mine) in line for line in plan.kept())
    execute(plan)
    assert mine.read_text() == "mine" and not (cache / weights.MEMO_NAME).exists()
