"""Per-file ownership (issue 34 item 1), generated over file layouts: in a directory torchdroid owns, `clean` and a
forced replacement remove only the files its manifest lists with an unchanged sha256; a file the user added, one
they edited, one replaced by a link stays byte for byte and is named (also by `-n`); no task writes into a
directory another task owns."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolchain.errors import UsageError
from toolchain.fsutil import (
    CHANGED,
    NOT_OURS,
    OWNER_MARKER,
    atomic_dir,
    atomic_write_bytes,
    claim_output_dir,
    mark_owned,
    ownership,
    refuse_another_owner,
)
from workflow.clean import execute, plan_clean

PART = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)
REL = st.lists(PART, min_size=1, max_size=3).map("/".join)
ACTIONS = ("keep", "edit", "delete", "link")


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _layout(models: Path, ours, user, actions):
    """torchdroid writes ``ours`` (atomically, so recorded); the user then edits, deletes or links some of them and
    adds ``user``.  Returns (paths torchdroid may remove, {path: sha256} the user must keep)."""
    mark_owned(models, "convert")
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
       actions=st.lists(st.sampled_from(ACTIONS), max_size=6))
def test_clean_removes_only_unchanged_files_torchdroid_wrote_and_names_the_rest(ours, user, actions):
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp) / "build"
        (build.parent / "elsewhere").write_text("the link's target")
        models = build / "models"
        models.mkdir(parents=True)
        removable, kept = _layout(models, ours, user, actions)
        links = [p for p in models.rglob("*") if p.is_symlink()]
        preview = plan_clean(build, ("outputs",))
        named = "\n".join(preview.kept())
        for path in kept:
            assert str(path) in named, f"-n does not name {path}"
        for link in links:
            assert str(link) in named
        assert all(p.exists() for p in removable), "the preview removed something"
        execute(plan_clean(build, ("outputs",)))
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
