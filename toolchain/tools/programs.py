"""Programs on PATH that builds need: CMake (with a minimum version), Ninja, a C and a C++ compiler, git."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Mapping, Optional, Tuple

from toolchain.errors import ToolNotFound, TorchdroidError
from toolchain.runner import run


def _version(argv, env: Optional[Mapping[str, str]] = None) -> Optional[Tuple[int, ...]]:
    try:  # through the one runner: its own process group, stopped with the run
        out = run(argv, env=env, replace_env=env is not None, check=False, timeout=30)
    except TorchdroidError:  # not startable, or hung
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out.output)
    return tuple(int(x) for x in m.groups() if x is not None) if m else None


@dataclass(frozen=True)
class Program:
    path: Optional[Path]
    version: Optional[Tuple[int, ...]]

    NAME: ClassVar[str] = ""
    EXE: ClassVar[Tuple[str, ...]] = ()
    VERSION_ARGS: ClassVar[Tuple[str, ...]] = ("--version",)
    INSTALL: ClassVar[str] = ""

    @classmethod
    def locate(cls, env: Optional[Mapping[str, str]] = None) -> "Program":
        env = os.environ if env is None else env
        for exe in cls.EXE:
            path = shutil.which(exe, path=env.get("PATH"))
            if path:
                return cls(Path(path), _version([path, *cls.VERSION_ARGS]))
        return cls(None, None)

    @property
    def found(self) -> bool:
        return self.path is not None

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version)) if self.version else "version unknown"

    def require(self, minimum: Tuple[int, ...] = (), why: str = "", remedy: str = "") -> "Program":
        """This program, or ToolNotFound when it is missing or older than ``minimum`` (``remedy``: the fix to name
        for a too-old one, when the generic install command would not give a new enough version)."""
        if self.path is None:
            raise ToolNotFound(f"{self.NAME} is not installed{f' ({why})' if why else ''}", remedy=self.INSTALL)
        if minimum and self.version is not None and self.version < minimum:
            want = ".".join(map(str, minimum))
            raise ToolNotFound(
                f"{self.NAME} {self.version_str} ({self.path}) is too old{f' ({why})' if why else ''}",
                cause=f"it needs {self.NAME} {want} or newer",
                remedy=remedy or (f"{self.INSTALL} (at least {want}); `pip install 'cmake>={want}'` puts a newer one "
                                  "on PATH in the venv" if self.NAME == "CMake" else self.INSTALL))
        return self


def _program(name: str, exe: Tuple[str, ...], install: str, version_args: Tuple[str, ...] = ("--version",)):
    """A :class:`Program` subclass for one tool: its display name, executables to look for, how to install it."""
    return type(name.replace(" ", ""), (Program,), {"NAME": name, "EXE": exe, "INSTALL": install,
                                                    "VERSION_ARGS": version_args, "__doc__": f"{name} on PATH."})


CMake = _program("CMake", ("cmake",), "sudo apt-get install cmake (or pip install cmake)")
Ninja = _program("Ninja", ("ninja", "ninja-build"), "sudo apt-get install ninja-build (or pip install ninja)")
CCompiler = _program("C compiler", ("cc", "gcc", "clang"), "sudo apt-get install build-essential")
CxxCompiler = _program("C++ compiler", ("c++", "g++", "clang++"), "sudo apt-get install build-essential (or g++)")
GitTool = _program("git", ("git",), "sudo apt-get install git")
Ccache = _program("ccache", ("ccache",), "sudo apt-get install ccache")
GradleOnPath = _program("Gradle", ("gradle",), "optional: generated apps ship a Gradle wrapper")
Adb = _program("adb", ("adb",), "sudo apt-get install adb (or the SDK's platform-tools)", ("version",))
