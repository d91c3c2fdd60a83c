"""Nothing of the user's is lost (issue 21 item 1): the one guard every deleter calls, locks never written
through a link, clean only removing what torchdroid wrote and holding the writers' locks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from toolchain.errors import BusyError, UsageError
from toolchain.fsutil import (
    OWNER_MARKER,
    atomic_dir,
    atomic_write_bytes,
    check_removable,
    claim_output_dir,
    lock_path_for,
    mark_owned,
    open_append,
    output_lock,
    protected_reason,
)
from workflow.clean import execute, plan_clean


@pytest.fixture()
def home(tmp_path, monkeypatch):
    """A home directory of the test's own (never the real one) and a working directory beside it."""
    h = tmp_path / "home"
    (h / "work").mkdir(parents=True)
    (h / "thesis.txt").write_text("years of work")
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.chdir(h / "work")
    return h


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def _checkout(path: Path, patched: bool) -> Path:
    path.mkdir(parents=True)
    _git("init", "-q", cwd=path)
    (path / "setup.py").write_text("print('upstream')\n")
    _git("add", "setup.py", cwd=path)
    _git("commit", "-q", "-m", "pin", cwd=path)
    if patched:
        (path / "setup.py").write_text("print('my patch')\n")
    return path


# --------------------------------------------------------------------------- clean


def test_clean_of_a_build_dir_torchdroid_never_wrote_removes_nothing(home):
    """INVOKE_BUILD_DIR pointing at the user's own project: models/, app/, src/ and results/ are theirs."""
    mine = home / "project"
    for rel, text in {"models/net.pt": "weights", "app/Main.java": "class Main {}", "src/lib/a.c": "int a;",
                      "results/table.csv": "a,b", "android/app/build.gradle": "plugins {}"}.items():
        (mine / rel).parent.mkdir(parents=True, exist_ok=True)
        (mine / rel).write_text(text)
    before = sorted(p for p in mine.rglob("*"))
    with pytest.raises(UsageError) as ei:
        plan_clean(mine, ("outputs", "caches", "results"))
    text = str(ei.value)
    assert "nothing was removed" in text
    for name in ("models", "app", "lib", "results", "android"):
        assert f"{mine}/{name}" in text or f"{mine}/src/{name}" in text, name
    assert sorted(p for p in mine.rglob("*")) == before


def test_clean_removes_what_torchdroid_wrote(home):
    build = home / "work" / "build"
    mark_owned((build / "models").mkdir(parents=True) or build / "models", "convert")
    atomic_write_bytes(build / "models" / "a.pt", b"x")  # as convert writes it: recorded in the manifest
    (build / "app").mkdir()
    (build / "app" / "torchdroid-app.json").write_text(json.dumps({"kind": "torchdroid.app-info"}))
    (build / "android" / "arm64-v8a" / "cmake").mkdir(parents=True)
    (build / "android" / "arm64-v8a" / "build.log").write_text("log")
    (build / "all.json").write_text(json.dumps({"kind": "torchdroid-all"}))
    _checkout(build / "src" / "pytorch-0123456789ab", patched=False)
    (build / "cache").mkdir()
    plan = plan_clean(build, ("outputs", "caches"))
    execute(plan)
    assert sorted(p.name for p in build.iterdir() if not p.name.startswith(".")) == ["src"]
    assert [p.name for p in (build / "src").iterdir() if not p.name.endswith(".torchdroid.lock")] == []


def test_clean_caches_keeps_a_checkout_with_the_users_patch(home):
    build = home / "work" / "build"
    repo = _checkout(build / "src" / "pytorch-0123456789ab", patched=True)
    with pytest.raises(UsageError) as ei:
        plan_clean(build, ("caches",))
    assert "local changes" in str(ei.value) and "setup.py" in str(ei.value)
    assert (repo / "setup.py").read_text() == "print('my patch')\n"


def test_clean_waits_for_no_one_and_deletes_nothing_under_a_running_writer(home):
    build = home / "work" / "build"
    claim_output_dir(build / "models", "convert")
    atomic_write_bytes(build / "models" / "a.pt", b"x")
    plan = plan_clean(build, ("outputs",))
    child = subprocess.Popen(
        ["python", "-c", "import sys,time; from toolchain.fsutil import output_lock\n"
         f"with output_lock({str(build / 'models')!r}, 'invoke convert'):\n print('held', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(BusyError, match="invoke convert"):
            execute(plan)
        assert (build / "models" / "a.pt").is_file()
    finally:
        child.kill()
        child.wait()


def test_clean_removes_only_torchdroids_log_names(home):
    logs = home / "work" / "build" / "logs"
    logs.mkdir(parents=True)
    ours, mine = logs / "convert-20200101-000000-1.log", logs / "notes.log"
    for p in (ours, mine):
        p.write_text("x")
        os.utime(p, (0, 0))
    execute(plan_clean(home / "work" / "build", ("logs",)))
    assert not ours.exists() and mine.read_text() == "x"


# --------------------------------------------------------------------------- make-app --force, convert --force


def test_atomic_dir_force_never_replaces_home(home):
    with pytest.raises(UsageError, match="home directory"):
        with atomic_dir(Path("~").expanduser(), force=True) as tmp:
            (tmp / "app").write_text("new")
    assert (home / "thesis.txt").read_text() == "years of work"


def test_claim_with_force_never_takes_home_or_the_working_directory(home):
    (home / "work" / "notes.md").write_text("mine")
    for where in (home, Path(".")):
        with pytest.raises(UsageError, match="refusing"):
            claim_output_dir(where, "convert", force=True)
    assert not (home / OWNER_MARKER).exists() and not (home / "work" / OWNER_MARKER).exists()


# --------------------------------------------------------------------------- no write through a link


def test_a_lock_path_that_links_to_a_users_file_is_refused_and_the_file_kept(tmp_path):
    out = tmp_path / "models"
    precious = tmp_path / "precious.txt"
    precious.write_text("do not truncate me")
    lock_path_for(out).symlink_to(precious)
    with pytest.raises(UsageError, match="symbolic link"):
        with output_lock(out, "convert"):
            pass
    assert precious.read_text() == "do not truncate me"


def test_a_lock_path_that_is_a_hard_link_is_refused(tmp_path):
    out = tmp_path / "models"
    precious = tmp_path / "precious.txt"
    precious.write_text("do not truncate me")
    os.link(precious, lock_path_for(out))
    with pytest.raises(UsageError, match="hard link"):
        with output_lock(out, "convert"):
            pass
    assert precious.read_text() == "do not truncate me"


def test_a_log_is_never_appended_through_a_link(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("mine")
    (tmp_path / "x.log").symlink_to(precious)
    with pytest.raises(UsageError, match="symbolic link"):
        open_append(tmp_path / "x.log")
    assert precious.read_text() == "mine"


def test_check_removable_accepts_what_the_user_named_but_never_a_protected_place(home):
    named = home / "work" / "mine"
    named.mkdir()
    (named / "x").write_text("x")
    with pytest.raises(UsageError, match="did not write"):
        check_removable(named, "--out")
    assert check_removable(named, "--out", named=True) == named
    assert protected_reason(home) and protected_reason(home.parent) and protected_reason("/")
    assert protected_reason(".") and protected_reason("..") and not protected_reason(named)


# --------------------------------------------------------------------------- report


def _store(results: Path) -> None:
    from deploy.results import ResultStore
    from toolchain.records import ResultRow

    row = ResultRow(serial="A", device_model="Phone A", board="b", release="11", sdk=30, abi="arm64-v8a",
                    stem="mobilenetv2", variant="quant_full", mode="full", backend="cpu", source="binary", status="ok",
                    model_file="mobilenetv2-quant_full-cpu.pt", median_ms=20.0, p90_ms=22.0, min_ms=18.0, max_ms=26.0,
                    mean_ms=20.0, std_ms=1.0, spread_pct=2.0, samples=200, load_ms=300.0, first_ms=60.0, peak_kb=512)
    ResultStore(results / "results.sqlite").add_run("2026-11-23T10:00:00+00:00", "p", "abc", {}, [row], [])


def test_report_out_png_never_overwrites_the_users_page_beside_it(tmp_path):
    from deploy.report import ReportSettings, make_report

    _store(tmp_path / "results")
    notes = tmp_path / "notes.html"
    notes.write_text("<html>my notes</html>")
    with pytest.raises(UsageError, match="notes.html"):
        make_report(ReportSettings(results=tmp_path / "results", out=tmp_path / "notes.png"))
    assert notes.read_text() == "<html>my notes</html>" and not (tmp_path / "notes.png").exists()
    first = make_report(ReportSettings(results=tmp_path / "results", out=tmp_path / "chart.png"))
    again = make_report(ReportSettings(results=tmp_path / "results", out=tmp_path / "chart.png"))  # its own page
    assert first.html == again.html and again.html.is_file()
