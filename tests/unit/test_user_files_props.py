"""Generated paths against every deleter (issue 21 items 1 and 7): the home directory, the root, the working
directory, their parents, symlinks to any of them and directories torchdroid never wrote (with generated file
names) are refused by clean, by make-app/convert --force (atomic_dir, claim_output_dir), by report's page and by
the guard itself, and nothing in them changes."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolchain.errors import UsageError
from toolchain.fsutil import atomic_dir, check_removable, claim_output_dir
from workflow.clean import plan_clean

PROTECTED = ["home", "root", "cwd", "parent_of_cwd", "parent_of_home"]
KINDS = PROTECTED + [f"link_to_{k}" for k in PROTECTED] + ["foreign_dir"]
NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEF0123456789_-.", min_size=1, max_size=12).filter(
    lambda n: n not in (".", "..") and not n.startswith(".torchdroid") and not n.endswith((".partial", ".lock"))
    and n != "torchdroid-app.json")


@contextlib.contextmanager
def world():
    """A fresh home (with the user's files) and working directory inside it, for one generated example."""
    saved_cwd, saved_home = os.getcwd(), os.environ.get("HOME")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (home / "work" / "build").mkdir(parents=True)
        (home / "thesis.txt").write_text("years of work")
        os.environ["HOME"] = str(home)
        os.chdir(home / "work")
        try:
            yield home
        finally:
            os.chdir(saved_cwd)
            if saved_home is None:
                os.environ.pop("HOME", None)
            else:
                os.environ["HOME"] = saved_home


def target(kind: str, home: Path, names) -> Path:
    base = {"home": home, "root": Path("/"), "cwd": home / "work", "parent_of_cwd": home,
            "parent_of_home": home.parent}
    if kind == "foreign_dir":
        d = home / "work" / "mine"
        d.mkdir()
        for n in names:
            (d / n).write_text(n)
        return d
    if kind.startswith("link_to_"):
        link = home / "work" / "link"
        link.symlink_to(base[kind[len("link_to_"):]])
        return link
    return base[kind]


def fingerprint(home: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else "d"
            for p in home.rglob("*") if not p.name.endswith(".torchdroid.lock")}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), names=st.lists(NAMES, min_size=1, max_size=4, unique=True))
def test_every_deleter_refuses(kind, names):
    with world() as home:
        path = target(kind, home, names)
        before = fingerprint(home)
        protected = kind != "foreign_dir"
        with pytest.raises(UsageError):
            check_removable(path, "generated")  # clean, report's page: nothing named, nothing owned
        if protected:  # what the user named with --force: still never ~, /, . or a parent of them
            with pytest.raises(UsageError):
                with atomic_dir(path, force=True) as tmp:
                    (tmp / "x").write_text("new")
            if not kind.endswith("root"):
                with pytest.raises(UsageError):
                    claim_output_dir(path, "convert", force=True)
        build = home / "work" / "build"
        models = build / "models"
        if kind == "foreign_dir":
            os.replace(path, models)
        else:
            models.symlink_to(path.resolve() if path.is_symlink() else path)
        if protected or kind == "foreign_dir":
            with pytest.raises(UsageError, match="nothing was removed"):
                plan_clean(build, ("outputs",))
        if kind == "foreign_dir":
            os.replace(models, path)
        else:
            models.unlink()
        assert fingerprint(home) == before
