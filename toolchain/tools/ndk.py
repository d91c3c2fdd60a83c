"""The Android NDK: find it, read its revision, check it against a lane's range, know its layout.

Layout facts per revision (docs/facts.md, encoded by the fixture NDKs of tests/ndk_support):
``source.properties`` (``Pkg.Revision``) and ``build/cmake/android.toolchain.cmake`` in every revision;
``sources/third_party/vulkan/src/common/vulkan_wrapper.{h,cpp}`` up to r22 only (PyTorch's
cmake/VulkanDependencies.cmake compiles them when USE_VULKAN is on); the ``platforms/`` directory up to
r21 only; the CMake option ``ANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES`` (16 KB pages) from r27 on.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from toolchain.errors import ToolNotFound, UsageError
from toolchain.pins import Lane

log = logging.getLogger(__name__)

TOOLCHAIN_FILE = Path("build") / "cmake" / "android.toolchain.cmake"
VULKAN_WRAPPER_DIR = Path("sources") / "third_party" / "vulkan" / "src" / "common"
VULKAN_WRAPPER_FILES = ("vulkan_wrapper.h", "vulkan_wrapper.cpp")
VULKAN_WRAPPER_LAST_MAJOR = 22  # removed in r23


def parse_revision(text: str) -> Tuple[int, ...]:
    """``"21.4.7075529"`` -> ``(21, 4, 7075529)``; ``"r21e"`` -> ``(21, 4)``."""
    text = text.strip()
    m = re.fullmatch(r"r?(\d+)([a-z]?)", text)
    if m:
        return (int(m.group(1)), (ord(m.group(2)) - ord("a")) if m.group(2) else 0)
    m = re.match(r"(\d+(?:\.\d+)*)", text)
    if not m:
        raise ValueError(f"not an NDK revision: {text!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def release_name(revision: str) -> str:
    """``"21.4.7075529"`` -> ``"r21e"`` (the name on the download page); a bound past any letter (a range's
    ``"28.99.99999999"``: every update of r28) -> ``"r28 (any update)"``, never a character past ``z``."""
    parts = parse_revision(revision)
    minor = parts[1] if len(parts) > 1 else 0
    if minor > ord("z") - ord("a"):
        return f"r{parts[0]} (any update)"
    return f"r{parts[0]}{chr(ord('a') + minor) if minor else ''}"


def in_range(revision: str, low: str, high: str) -> bool:
    rev = parse_revision(revision)
    return parse_revision(low) <= rev <= parse_revision(high)


def read_source_properties(ndk_dir: Path) -> Dict[str, str]:
    props: Dict[str, str] = {}
    path = Path(ndk_dir) / "source.properties"
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


@dataclass(frozen=True)
class Ndk:
    path: Path
    revision: str  # Pkg.Revision, e.g. "21.4.7075529"
    found_by: str  # "--ndk", "ndk.path", "ANDROID_NDK", ...

    @property
    def toolchain_file(self) -> Path:
        return self.path / TOOLCHAIN_FILE

    @property
    def release(self) -> str:
        return release_name(self.revision)

    @property
    def major(self) -> int:
        return parse_revision(self.revision)[0]

    @property
    def has_vulkan_wrapper(self) -> bool:
        """Whether PyTorch's USE_VULKAN=ON build finds the wrapper sources it compiles."""
        return all((self.path / VULKAN_WRAPPER_DIR / f).is_file() for f in VULKAN_WRAPPER_FILES)

    @property
    def has_flexible_page_sizes_option(self) -> bool:
        """The NDK's CMake toolchain takes -DANDROID_SUPPORT_FLEXIBLE_PAGE_SIZES=ON (r27+)."""
        from toolchain.pins import NDK_FLEXIBLE_PAGE_SIZES_MIN_MAJOR

        return self.major >= NDK_FLEXIBLE_PAGE_SIZES_MIN_MAJOR

    def page_size_args(self) -> List[str]:
        """CMake arguments that make every executable and shared library load on 16 KB page devices."""
        from toolchain.pins import FLEXIBLE_PAGE_SIZES_ARG, MAX_PAGE_SIZE_16K_LDFLAG

        if self.has_flexible_page_sizes_option:
            return [FLEXIBLE_PAGE_SIZES_ARG]
        return [f"-DCMAKE_SHARED_LINKER_FLAGS={MAX_PAGE_SIZE_16K_LDFLAG}",
                f"-DCMAKE_EXE_LINKER_FLAGS={MAX_PAGE_SIZE_16K_LDFLAG}"]

    def require_vulkan_wrapper(self, lane: Lane) -> "Ndk":
        if self.has_vulkan_wrapper:
            return self
        raise ToolNotFound(
            f"--vulkan needs an NDK with {VULKAN_WRAPPER_DIR}/vulkan_wrapper.h and .cpp; the NDK at {self.path} "
            f"({self.release}) has none",
            cause="PyTorch's cmake/VulkanDependencies.cmake compiles the NDK's vulkan_wrapper sources, which the NDK "
                  f"shipped up to r{VULKAN_WRAPPER_LAST_MAJOR} and removed in r23 (pytorch/pytorch#126394)",
            remedy="drop --vulkan (the default builds with -DUSE_VULKAN=OFF; NNAPI and CPU do not need Vulkan), or "
                   "install NDK r21e (`sdkmanager --install 'ndk;21.4.7075529'`) and pass --ndk to it",
        )

    @classmethod
    def candidates(cls, cli: Optional[str], config_path: Optional[str],
                   env: Mapping[str, str]) -> List[Tuple[str, Path]]:
        """Where to look, in order: --ndk, ndk.path, ANDROID_NDK, ANDROID_NDK_HOME, ANDROID_HOME/ndk/*,
        ANDROID_SDK_ROOT/ndk/*, ANDROID_SDK_ROOT/ndk-bundle, ANDROID_HOME/ndk-bundle."""
        out: List[Tuple[str, Path]] = []
        if cli:
            out.append(("--ndk", Path(cli).expanduser()))
        if config_path:
            out.append(("config ndk.path", Path(config_path).expanduser()))
        for var in ("ANDROID_NDK", "ANDROID_NDK_HOME"):
            if env.get(var):
                out.append((var, Path(env[var]).expanduser()))
        for var in ("ANDROID_HOME", "ANDROID_SDK_ROOT"):
            if env.get(var):
                ndk_root = Path(env[var]).expanduser() / "ndk"
                if ndk_root.is_dir():
                    versions = [p for p in ndk_root.iterdir() if p.is_dir()]
                    for p in sorted(versions, key=lambda p: _sort_key(p.name), reverse=True):
                        out.append((f"{var}/ndk/{p.name}", p))
        for var in ("ANDROID_SDK_ROOT", "ANDROID_HOME"):
            if env.get(var):
                out.append((f"{var}/ndk-bundle", Path(env[var]).expanduser() / "ndk-bundle"))
        return out

    @classmethod
    def locate(cls, cli: Optional[str] = None, config_path: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None, lane: Optional[Lane] = None) -> "Ndk":
        """The first candidate that is an NDK.  An explicit --ndk / ndk.path that is not an NDK is an error."""
        env = os.environ if env is None else env
        explicit = ("--ndk", "config ndk.path")
        tried: List[str] = []
        misfits: List["Ndk"] = []
        for source, path in cls.candidates(cli, config_path, env):
            if not (path / "source.properties").is_file():
                if source in explicit:
                    raise ToolNotFound(
                        f"{path} (from {source}) is not an Android NDK: it has no source.properties",
                        remedy="point --ndk / ndk.path at the unpacked NDK directory (the one containing "
                               "source.properties and build/cmake/android.toolchain.cmake)",
                    )
                tried.append(f"{source}={path} (no source.properties)")
                continue
            ndk = cls.from_dir(path, source)
            if lane is None or ndk.fits(lane) or source in explicit:
                return ndk  # an explicit choice is used as given; check() explains a misfit
            log.debug("NDK at %s (%s) is outside lane %s; looking further", path, ndk.revision, lane.name)
            misfits.append(ndk)
        if misfits:
            return misfits[0]  # check() will say why it does not fit
        raise ToolNotFound(
            "no Android NDK found",
            cause="looked at --ndk, config ndk.path, ANDROID_NDK, ANDROID_NDK_HOME, ANDROID_HOME/ndk/*, "
                  "ANDROID_SDK_ROOT/ndk-bundle" + (f"; tried: {'; '.join(tried)}" if tried else ": none is set"),
            remedy=install_remedy(lane),
        )

    @classmethod
    def from_dir(cls, path: Path, found_by: str = "--ndk") -> "Ndk":
        path = Path(path).resolve()
        try:
            props = read_source_properties(path)
        except OSError as e:
            raise ToolNotFound(f"cannot read {path / 'source.properties'}", cause=str(e),
                               remedy="reinstall the NDK") from e
        revision = props.get("Pkg.Revision")
        if not revision:
            raise ToolNotFound(
                f"{path / 'source.properties'} has no Pkg.Revision",
                cause="the NDK directory is incomplete or not an NDK",
                remedy="reinstall the NDK and point ANDROID_NDK at it",
            )
        return cls(path, revision, found_by)

    def fits(self, lane: Lane) -> bool:
        return in_range(self.revision, lane.ndk_min, lane.ndk_max)

    def check(self, lane: Lane) -> "Ndk":
        """Raise unless this NDK's revision is in the lane's range and it has the CMake toolchain file."""
        if not self.fits(lane):
            low, high = release_name(lane.ndk_min), release_name(lane.ndk_max)
            direction = "too old" if parse_revision(self.revision) < parse_revision(lane.ndk_min) else "too new"
            raise ToolNotFound(
                f"the NDK at {self.path} is {self.release} ({self.revision}), {direction} for lane {lane.name!r}",
                cause=f"PyTorch {lane.pytorch_ref} builds with NDK {low} ({lane.ndk_min}) to {high} ({lane.ndk_max})",
                remedy=f"{install_remedy(lane)} (this one was found via {self.found_by})",
            )
        if not self.toolchain_file.is_file():
            raise ToolNotFound(
                f"the NDK at {self.path} has no {TOOLCHAIN_FILE}",
                cause="the NDK installation is incomplete",
                remedy=f"reinstall NDK {lane.ndk_recommended} and set ANDROID_NDK to it",
            )
        return self


def install_remedy(lane: Optional[Lane]) -> str:
    """How to get the NDK the lane recommends: the sdkmanager package names the same revision as the text."""
    if lane is None:
        return ("install an NDK (https://developer.android.com/ndk/downloads) and set ANDROID_NDK=/path/to/it "
                "(or pass --ndk, or set ndk.path in invoke.yaml)")
    rev = lane.ndk_recommended_revision or lane.ndk_min
    return (f"install NDK {lane.ndk_recommended}: `sdkmanager --install 'ndk;{rev}'` (it lands in "
            f"$ANDROID_HOME/ndk/{rev}) or unpack android-ndk-{release_name(rev)} from "
            "https://developer.android.com/ndk/downloads; then set ANDROID_NDK=/path/to/it "
            "(or pass --ndk, or set ndk.path in invoke.yaml)")


def _sort_key(name: str) -> Tuple[int, ...]:
    try:
        return parse_revision(name)
    except ValueError:
        return (-1,)


def validate_api_level(level: int) -> int:
    try:
        level = int(level)
    except (TypeError, ValueError):
        raise UsageError(f"API level {level!r} is not a number", remedy="pass e.g. --api-level 29") from None
    if not 16 <= level <= 40:
        raise UsageError(f"API level {level} is out of range",
                         remedy="pass an Android API level such as 29 (NNAPI needs >= 29)")
    return level
