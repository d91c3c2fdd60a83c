"""Build the host libneuralnetworks.so with the system C compiler, cached by the sources' hash."""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
from pathlib import Path
from typing import Optional

from toolchain.errors import ToolFailed, ToolNotFound
from toolchain.fsutil import atomic_path, ensure_writable_dir, in_the_way
from toolchain.runner import run

log = logging.getLogger(__name__)

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = ("host_nn.c", "host_nn.h")
LIB_NAME = "libneuralnetworks.so"  # the name torch dlopens, also the SONAME
PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
CACHE_SETTING = "verify.cache, TORCHDROID_HOST_NNAPI_CACHE"  # where the user moves it (default: cache_root)
CFLAGS = ("-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror")


class CCompiler:
    """The system C compiler (``$CC``, else cc/gcc/clang on PATH)."""

    CANDIDATES = ("cc", "gcc", "clang")

    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def locate(cls) -> "CCompiler":
        env = os.environ.get("CC")
        if env:
            found = shutil.which(env)
            if not found:
                raise ToolNotFound(
                    f"the C compiler CC={env!r} was not found",
                    remedy="unset CC or point it at an installed compiler (apt-get install gcc)",
                )
            return cls(Path(found))
        for name in cls.CANDIDATES:
            found = shutil.which(name)
            if found:
                return cls(Path(found))
        raise ToolNotFound(
            "no C compiler found (looked for $CC, cc, gcc, clang)",
            cause="the host NNAPI library is built from C sources on first use",
            remedy="install one: sudo apt-get install gcc",
        )

    def version(self) -> str:
        res = run([self.path, "--version"], what="the C compiler", check=True)
        return res.lines[0] if res.lines else "unknown"

    def verify(self) -> str:
        if platform.system() != "Linux":
            raise ToolNotFound(
                f"the host NNAPI library needs Linux (this is {platform.system()})",
                cause="torch's NNAPI loader uses dlopen(\"libneuralnetworks.so\")",
                remedy="run host NNAPI checks on a Linux machine",
            )
        return self.version()


def cache_root() -> Path:
    env = os.environ.get("TORCHDROID_HOST_NNAPI_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "torchdroid" / "host-nnapi"


def source_key(compiler_version: str = "") -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode() + b"\0" + (CSRC / name).read_bytes() + b"\0")
    h.update(" ".join(CFLAGS).encode() + b"\0" + PACKAGE_PARENT.encode() + b"\0" + compiler_version.encode())
    return h.hexdigest()[:16]


def code_digest() -> str:
    """Digest of host_nnapi's Python code: its kernels run inside the library, so they are part of its identity."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for p in sorted(package.rglob("*.py")):
        h.update(str(p.relative_to(package)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def built_library(cache: Optional[Path] = None) -> Optional[Path]:
    """The library ``build_library`` would return, if it is already built (never compiles; no torch).

    Lets a caller compare the library's sha256 with a verify record's without building or loading it.
    """
    try:
        version = CCompiler.locate().verify()
    except (ToolNotFound, ToolFailed):
        return None
    lib = Path(cache or cache_root()) / source_key(version) / LIB_NAME
    return lib if lib.is_file() else None


def build_library(cache: Optional[Path] = None, log_path: Optional[Path] = None, force: bool = False) -> Path:
    """Return the path of the built library, compiling it if this source hash was never built."""
    cc = CCompiler.locate()
    version = cc.verify()
    out_dir = Path(cache or cache_root()) / source_key(version)
    lib = out_dir / LIB_NAME
    if lib.is_file() and not force:
        return lib
    ensure_writable_dir(out_dir, f"host NNAPI library directory ({CACHE_SETTING})")
    log_path = log_path or out_dir / "build.log"
    problem = in_the_way(log_path, "the host NNAPI library's build log")
    if problem is not None:
        raise problem
    define = '-DTDNN_PACKAGE_PARENT="' + PACKAGE_PARENT.replace("\\", "\\\\").replace('"', '\\"') + '"'
    log.info("building the host NNAPI library with %s", cc.path.name)
    with atomic_path(lib) as tmp:  # the compiler writes a temporary: a stopped build leaves nothing under the name
        argv = [cc.path, *CFLAGS, f"-Wl,-soname,{LIB_NAME}", define, "-o", tmp, CSRC / "host_nn.c", "-ldl", "-lpthread"]
        run(argv, log_path=log_path, what="compiling the host NNAPI library",
            hint=lambda out: "the C sources failed to compile with this compiler; the log has the diagnostics")
    log.debug("host NNAPI library: %s", lib)
    return lib
