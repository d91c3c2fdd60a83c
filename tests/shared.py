"""Expensive test artefacts built once per test run, shared by every pytest process of the run.

``./run test`` runs the suite in several worker processes (pytest-xdist); a ``scope="session"`` fixture or a
``functools.cache`` would build its artefact (converted models, a compiled stand-in binary, fixture repositories)
once in *each* worker.  :func:`built_once` builds it once in a directory of the run that every worker sees, under a
file lock: the first worker builds, the others wait and read it.  Artefacts are read-only for tests; a test that
changes one copies it first.

The run's directory is made by the controlling process (``pytest_configure`` in tests/conftest.py) and removed when
the run ends; a run without workers uses a directory of its own the same way.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from filelock import FileLock

ENV = "TORCHDROID_TEST_SHARED"


def make_run_dir() -> Path:
    """The run's shared directory (controlling process only); its path is inherited by the workers."""
    path = Path(tempfile.mkdtemp(prefix="torchdroid-test-run-"))
    os.environ[ENV] = str(path)
    return path


def run_dir() -> Path:
    path = os.environ.get(ENV)
    if not path:  # imported outside a pytest run (a benchmark script, a one-off): a directory of this process
        return make_run_dir()
    return Path(path)


def built_once(name: str, build: Callable[[Path], Any]) -> Any:
    """``build(directory)``'s result, computed once per test run for ``name`` (it must pickle); ``directory`` is
    empty and stays the artefact's home for the rest of the run."""
    root = run_dir()
    home, done = root / name, root / f"{name}.result"
    with FileLock(str(root / f"{name}.lock")):
        if done.exists():
            return pickle.loads(done.read_bytes())
        shutil.rmtree(home, ignore_errors=True)  # a build that failed in another worker left it half made
        home.mkdir(parents=True)
        result = build(home)
        tmp = done.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(result))
        os.replace(tmp, done)
        return result
