"""`invoke clean`: only known names inside the build directory; old logs by age; symlinks are not followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolchain.errors import UsageError
from toolchain.fsutil import atomic_write_bytes, mark_owned
from toolchain.logs import rotate_logs
from workflow.clean import execute, plan_clean


def test_only_known_outputs_inside_the_build_dir_and_logs_by_age(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    build = tmp_path / "build"
    (build / "models").mkdir(parents=True)
    mark_owned(build / "models", "convert")  # what convert writes into its output directory
    atomic_write_bytes(build / "models" / "a.pt", b"x" * 10)  # as convert writes it: recorded in the manifest
    (build / "mine").mkdir()  # not a name torchdroid writes
    (build / "logs").mkdir()
    old, new = build / "logs" / "convert-20200101-000000-1.log", build / "logs" / "convert-20990101-000000-2.log"
    old.write_text("old")
    new.write_text("new")
    os.utime(old, (0, 0))
    outside = tmp_path / "precious"
    outside.mkdir()
    (build / "app").symlink_to(outside)  # removed as a link, never followed
    plan = plan_clean(Path("build"), ("logs", "outputs"), log_days=14)
    names = sorted(p.name for p, _ in plan.targets)
    assert names == ["app", old.name, "models"]
    execute(plan)
    assert not (build / "models").exists() and not old.exists() and new.exists() and (build / "mine").is_dir()
    assert outside.is_dir() and not (build / "app").exists()


@pytest.mark.parametrize("where", [".", "~", "/"])
def test_a_build_dir_that_is_not_its_own_directory_is_refused(tmp_path, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="refusing to clean"):
        plan_clean(Path(where).expanduser(), ("outputs",))


def test_log_rotation_keeps_the_newest_per_task(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for i in range(5):
        p = logs / f"deploy-2026010{i}-000000-{i}.log"
        p.write_text(str(i))
        os.utime(p, (i * 100, i * 100))
    (logs / "convert-20260101-000000-9.log").write_text("c")
    (logs / "notes.txt").write_text("mine")
    removed = rotate_logs(logs, keep=2)
    assert sorted(p.name for p in removed) == [f"deploy-2026010{i}-000000-{i}.log" for i in range(3)]
    assert sorted(p.name for p in logs.iterdir()) == ["convert-20260101-000000-9.log", "deploy-20260103-000000-3.log",
                                                      "deploy-20260104-000000-4.log", "notes.txt"]


def _hold_lock_in_a_child(directory: Path):
    """Another process (another torchdroid run) holding ``directory``'s writer lock until its stdin closes."""
    import subprocess
    import sys

    code = ("import sys\nfrom toolchain.fsutil import output_lock\n"
            f"with output_lock({str(directory)!r}, 'invoke build-android --lane executorch'):\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=Path(__file__).resolve().parents[2])
    assert child.stdout.readline().strip() == "held"
    return child


@pytest.mark.parametrize("inner", ["android/arm64-v8a/executorch", "android/arm64-v8a", "models"])
def test_clean_waits_for_no_writer_anywhere_below_what_it_removes(tmp_path, monkeypatch, inner):
    """A writer holding the lock of any directory inside a target (build-android's ExecuTorch runtime build in
    android/<abi>/executorch, not only android/<abi>) makes clean refuse (busy) and remove nothing."""
    from toolchain.errors import BusyError

    monkeypatch.chdir(tmp_path)
    build = tmp_path / "build"
    for d in ("models", "android/arm64-v8a/executorch/cmake-out"):
        (build / d).mkdir(parents=True)
    mark_owned(build / "models", "convert")
    (build / "android/arm64-v8a/build-info.json").write_text("{}")
    child = _hold_lock_in_a_child(build / inner)
    try:
        plan = plan_clean(Path("build"), ("outputs",), log_days=14)
        with pytest.raises(BusyError):
            execute(plan)
        assert (build / inner).is_dir()
    finally:
        child.stdin.close()
        child.wait(timeout=60)
