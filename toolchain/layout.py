"""Where every output goes: one place that derives each path from the build directory (config key ``build_dir``).

The schema (:mod:`toolchain.settings`) declares an output key's default as ``UnderBuildDir(MODELS)``, shown as
``<build_dir>/models``; :class:`toolchain.resolve.Resolver` joins it onto the ``build_dir`` in force when the key
is not given.  A path given explicitly (command line, config key, ``INVOKE_*`` variable) is used as given.
Stages and ``invoke clean`` ask :class:`Layout` for the paths they write or remove instead of joining names.

One exception, on purpose: the host ``libneuralnetworks.so`` of ``invoke verify`` is built once per user in
``~/.cache/torchdroid/host-nnapi`` (config ``verify.cache``), shared by every project and build directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Tuple, Union

PathLike = Union[str, Path]

# names under the build directory, each written by one stage
MODELS = "models"  # convert (TorchScript models, .pte programs, manifest, verify.json)
BENCH = "bench"  # bench --host, bench-executorch
APP = "app"  # make-app of the default model; app-<model> for any other
RESULTS = "results"  # deploy's history (SQLite + CSV/JSON) and report's pictures
ANDROID = "android"  # build-android: android/<abi>/ (build-info, CMake tree, AAR), android/<abi>/executorch/
SRC = "src"  # build-android's checkouts: src/pytorch-<sha12>, src/executorch-<sha12>
CACHE = "cache"  # remembered facts (pretrained weights reachable or not)
LOGS = "logs"  # one log per task run
MAKE_APP_WORK = "make-app"  # make-app's scratch space
ALL_SUMMARY = "all.json"  # `invoke all`'s summary
BUILD_INFO = "build-info.json"

OUTPUTS: Tuple[str, ...] = (MODELS, BENCH, APP, ANDROID, ALL_SUMMARY)  # clean --what outputs (and app-<model>)
CACHES: Tuple[str, ...] = (SRC, CACHE)  # clean --what caches
HISTORY: Tuple[str, ...] = (RESULTS,)  # clean --what results: only when asked for by name


@dataclass(frozen=True)
class UnderBuildDir:
    """A schema default that lives under the build directory in force: ``<build_dir>/<name>``."""

    name: str

    def __str__(self) -> str:
        return f"<build_dir>/{self.name}"

    def under(self, build_dir: PathLike) -> Path:
        return Path(build_dir) / self.name


def app_dir_name(model: str) -> str:
    """``app-<model>``: the directory of the app of a model other than the default (file-name safe)."""
    return f"{APP}-{re.sub(r'[^A-Za-z0-9._-]+', '_', model)}"


APP_DIR_RE = re.compile(rf"{APP}-[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Layout:
    """Every path torchdroid writes under one build directory."""

    build_dir: Path

    def __init__(self, build_dir: PathLike):
        object.__setattr__(self, "build_dir", Path(build_dir))

    def __truediv__(self, name: str) -> Path:
        return self.build_dir / name

    @property
    def models(self) -> Path:
        return self.build_dir / MODELS

    @property
    def bench(self) -> Path:
        return self.build_dir / BENCH

    @property
    def app(self) -> Path:
        return self.build_dir / APP

    @property
    def results(self) -> Path:
        return self.build_dir / RESULTS

    @property
    def logs(self) -> Path:
        return self.build_dir / LOGS

    @property
    def cache(self) -> Path:
        return self.build_dir / CACHE

    @property
    def src(self) -> Path:
        return self.build_dir / SRC

    @property
    def make_app_work(self) -> Path:
        return self.build_dir / MAKE_APP_WORK

    @property
    def all_summary(self) -> Path:
        return self.build_dir / ALL_SUMMARY

    def android(self, abi: str) -> Path:
        """build-android's directory of one ABI."""
        return self.build_dir / ANDROID / abi

    def build_info(self, abi: str) -> Path:
        """<build_dir>/android/<abi>/build-info.json of the PyTorch Mobile runtime."""
        return self.android(abi) / BUILD_INFO

    def executorch(self, abi: str) -> Path:
        """build-android --lane executorch's directory of one ABI."""
        return self.android(abi) / "executorch"

    def executorch_build_info(self, abi: str) -> Path:
        return self.executorch(abi) / BUILD_INFO

    def checkout(self, project: str, commit: str) -> Path:
        """build-android's checkout of ``project`` (pytorch, executorch) at ``commit``: src/<project>-<sha12>."""
        return self.src / f"{project}-{commit[:12]}"
