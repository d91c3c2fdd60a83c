"""`invoke build-android`: PyTorch Mobile from a lane's pinned commit, verified and recorded.

Steps: lane -> host Python and NDK checks -> pinned source checkout -> the lane's
``scripts/build_android.sh`` with the environment and CMake arguments that make the
requested ABI and API level true -> ELF verification -> ``build-info.json``.  The same
inputs rebuild nothing.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from toolchain import pins
from toolchain.errors import RecordError, ToolFailed, UsageError
from toolchain.fsutil import atomic_copy, sha256_file
from toolchain.progress import progress
from toolchain.records import BUILD_INFO_KIND, BUILD_INFO_NAME, BUILD_INFO_SCHEMA, BuildInfo, now_iso, write_record
from toolchain.runner import run

from .elfcheck import Readelf
from .gitsource import SHA_RE, Checkout, Git, ensure_checkout
from .hints import build_hint, parse_step
from .hostpython import HostPython
from .ndk import Ndk, validate_api_level
from .sdk import AndroidSdk

log = logging.getLogger(__name__)

BINARY = "speed_benchmark_torch"
BUILD_SCRIPT = Path("scripts") / "build_android.sh"
AAR_SCRIPT = Path("scripts") / "build_pytorch_android.sh"
AAR_OUTPUT = Path("android") / "pytorch_android" / "build" / "outputs" / "aar" / "pytorch_android-release.aar"
AAR_NAME = "pytorch_android-release.aar"


@dataclass(frozen=True)
class BuildSettings:
    build_dir: Path = Path("build")
    lane: str = pins.DEFAULT_LANE
    lane_explicit: bool = False  # --lane given on the command line (a custom --commit then keeps it)
    commit: Optional[str] = None
    repo_url: Optional[str] = None
    source_dir: Optional[Path] = None  # default: <build_dir>/src/pytorch-<sha12>
    ndk: Optional[str] = None  # --ndk
    ndk_config: Optional[str] = None  # ndk.path
    sdk: Optional[str] = None  # android.sdk (for --aar)
    python: Optional[str] = None  # pytorch.python
    abi: str = pins.DEFAULT_ABI
    api_level: int = pins.DEFAULT_API_LEVEL
    max_jobs: Optional[int] = None
    clean: bool = False
    aar: bool = False
    cmake_args: Tuple[str, ...] = ()
    git_jobs: int = 4
    env: Optional[Mapping[str, str]] = None  # where to look for ANDROID_* (default: os.environ)


@dataclass
class BuildResult:
    build_info_path: Path
    info: Dict[str, Any]
    reused: bool
    seconds: float
    log_path: Path
    warnings: List[str] = field(default_factory=list)

    @property
    def binary(self) -> Path:
        return BuildInfo(self.build_info_path, self.info).artefact(BINARY)


def nearest_lane(date_iso: str) -> pins.Lane:
    """The preset whose pinned commit date is nearest to ``date_iso``."""
    when = _dt.date.fromisoformat(date_iso[:10])
    dated = [ln for ln in pins.LANES.values() if ln.pytorch_date]
    return min(dated, key=lambda ln: abs((_dt.date.fromisoformat(ln.pytorch_date[:10]) - when).days))


def _tree_digest(root: Path) -> Tuple[str, int, int]:
    """sha256 over (relative path, file sha256) of every file below ``root``; file count; newest mtime."""
    h = hashlib.sha256()
    count, newest = 0, 0
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(root).as_posix()}\0{sha256_file(p)}\n".encode())
            count += 1
            newest = max(newest, st.st_mtime_ns)
    return h.hexdigest(), count, newest


def _tree_stat(root: Path) -> Tuple[int, int]:
    count, newest = 0, 0
    for p in root.rglob("*"):
        if p.is_file():
            count += 1
            newest = max(newest, p.stat().st_mtime_ns)
    return count, newest


def _artefact(name: str, path: Path, kind: str, base: Path) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"name": name, "path": os.path.relpath(path, base), "kind": kind}
    if path.is_dir():
        digest, count, newest = _tree_digest(path)
        entry.update(sha256=digest, files=count, mtime_ns=newest)
    else:
        st = path.stat()
        entry.update(sha256=sha256_file(path), size=st.st_size, mtime_ns=st.st_mtime_ns)
    return entry


def artefacts_intact(info: Dict[str, Any], base: Path) -> bool:
    """Every recorded artefact exists unchanged (stat first; sha256 only when the stat differs)."""
    arts = info.get("artefacts") or []
    if not any(a.get("name") == BINARY for a in arts):
        return False
    for art in arts:
        p = base / art["path"]
        if art.get("kind") == "headers":
            if not p.is_dir():
                return False
            if _tree_stat(p) != (art.get("files"), art.get("mtime_ns")) and _tree_digest(p)[0] != art["sha256"]:
                return False
        else:
            if not p.is_file():
                return False
            st = p.stat()
            same_stat = (st.st_size, st.st_mtime_ns) == (art.get("size"), art.get("mtime_ns"))
            if not same_stat and sha256_file(p) != art["sha256"]:
                return False
    return True


def _inputs_key(inputs: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def _find_binary(build_root: Path) -> Optional[Path]:
    for p in (build_root / "install" / "bin" / BINARY, build_root / "bin" / BINARY):
        if p.is_file():
            return p
    return None


def _cmake_home(build_root: Path) -> Optional[str]:
    cache = build_root / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return line.split("=", 1)[1].strip()
    return None


def build_android(s: BuildSettings) -> BuildResult:
    start = time.monotonic()
    started = now_iso()
    warnings: List[str] = []
    env_in = os.environ if s.env is None else s.env
    if s.abi not in pins.ABIS:
        raise UsageError(f"unknown ABI {s.abi!r}", remedy=f"use one of: {', '.join(pins.ABIS)} (--abi)")
    api_level = validate_api_level(s.api_level)
    lane = pins.lane(s.lane)
    repo_url = s.repo_url or pins.PYTORCH_REPO_URL
    out_dir = Path(s.build_dir) / "android" / s.abi
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / "build.log"
    requested = (s.commit or lane.pytorch_commit).strip()
    requested_ref: Optional[str] = None
    if SHA_RE.fullmatch(requested.lower()):
        commit = requested.lower()
    else:  # a tag (or branch): resolved to its SHA on the server, and both are recorded
        commit, requested_ref = Git.locate(log_path=out_dir / "source.log").resolve_ref(repo_url, requested)
        log.info("%s is %s at %s", requested, commit, repo_url)
        if requested_ref.startswith("refs/heads/"):
            msg = f"{requested!r} is a branch: it moves; this build records the commit it named now ({commit[:12]})"
            log.warning(msg)
            warnings.append(msg)
    custom = commit != lane.pytorch_commit
    source_dir = Path(s.source_dir) if s.source_dir else Path(s.build_dir) / "src" / f"pytorch-{commit[:12]}"

    python = ndk = None
    if not custom:  # fail fast, before any download
        python = HostPython.locate(s.python).check(lane)
        ndk = Ndk.locate(s.ndk, s.ndk_config, env_in, lane).check(lane)
    sdk = AndroidSdk.locate(s.sdk, env_in) if s.aar else None

    git = Git.locate(log_path=out_dir / "source.log")
    checkout: Checkout = ensure_checkout(git, repo_url, commit, source_dir, jobs=s.git_jobs)

    if custom:
        if not s.lane_explicit:
            date = git.commit_date(checkout.path)
            lane = nearest_lane(date)
            msg = (f"custom commit {commit[:12]} ({date[:10]}): NDK, Python and converter facts come from the nearest "
                   f"preset lane {lane.name!r} ({lane.pytorch_ref}); they were not verified for this commit")
        else:
            msg = (f"custom commit {commit[:12]}: NDK, Python and converter facts come from lane {lane.name!r} "
                   f"({lane.pytorch_ref}); they were not verified for this commit")
        log.warning(msg)
        warnings.append(msg)
        python = HostPython.locate(s.python).check(lane)
        ndk = Ndk.locate(s.ndk, s.ndk_config, env_in, lane).check(lane)
    assert python is not None and ndk is not None

    script = checkout.path / BUILD_SCRIPT
    if not script.is_file():
        raise UsageError(
            f"{BUILD_SCRIPT} does not exist at commit {commit[:12]}",
            cause="PyTorch deleted scripts/build_android.sh in July 2025 (it is missing from v2.9.0 on)",
            remedy="use a commit up to v2.8.x: --lane current (v2.8.0) or --lane seed-2020",
        )
    build_root = out_dir / "cmake"
    jobs = int(s.max_jobs or os.cpu_count() or 1)
    env: Dict[str, str] = {
        "ANDROID_NDK": str(ndk.path),
        "ANDROID_ABI": s.abi,
        # build_android.sh overwrites this with 21; the CMake argument below is what counts.
        "ANDROID_NATIVE_API_LEVEL": str(api_level),
        "BUILD_ROOT": str(build_root.resolve()),
        "MAX_JOBS": str(jobs),
        "PYTHON": str(python.path),
    }
    env.update(dict(lane.build_env))
    cmake_args = [f"-DANDROID_ABI={s.abi}", f"-DANDROID_NATIVE_API_LEVEL={api_level}", "-DBUILD_BINARY=ON"]
    ccache = shutil.which("ccache")
    if ccache:
        cmake_args += [f"-DCMAKE_C_COMPILER_LAUNCHER={ccache}", f"-DCMAKE_CXX_COMPILER_LAUNCHER={ccache}"]
    for arg in s.cmake_args:
        if any(c.isspace() for c in arg):
            raise UsageError(f"CMake argument {arg!r} contains whitespace",
                             cause="build_android.sh splits its arguments on whitespace",
                             remedy="pass arguments without spaces")
        cmake_args.append(arg)
    # an unreadable ';' would be split by the script too; nothing else to check

    inputs = {
        "lane": lane.to_dict(), "repo_url": repo_url, "commit": commit, "source_dir": str(checkout.path.resolve()),
        "ndk": {"path": str(ndk.path), "revision": ndk.revision},
        "python": {"path": str(python.path), "version": python.version_str},
        "abi": s.abi, "api_level": api_level, "cmake_args": cmake_args,
        "env": {k: v for k, v in env.items() if k != "MAX_JOBS"}, "aar": bool(s.aar),
        "sdk": str(sdk.path) if sdk else None,
    }
    key = _inputs_key(inputs)
    info_path = out_dir / BUILD_INFO_NAME

    if s.clean:
        log.info("--clean: removing %s and %s", build_root, info_path)
        shutil.rmtree(build_root, ignore_errors=True)
        for p in (info_path, out_dir / AAR_NAME):
            if p.exists():
                p.unlink()
    elif info_path.is_file():
        try:
            old = BuildInfo.load(info_path).data
        except RecordError as e:
            log.warning("ignoring unreadable %s: %s", info_path, e.what)
            old = {}
        if old.get("inputs_key") == key and artefacts_intact(old, out_dir):
            seconds = time.monotonic() - start
            log.info("up to date: %s (same inputs, artefacts unchanged; --clean rebuilds)", info_path)
            return BuildResult(info_path, old, True, seconds, log_path, warnings)
        log.info("inputs or artefacts changed since the last build: building again")

    home = _cmake_home(build_root)
    if home and Path(home).resolve() != checkout.path.resolve():
        log.info("the CMake tree %s was configured for %s; starting it over", build_root, home)
        shutil.rmtree(build_root, ignore_errors=True)

    if info_path.exists():
        info_path.unlink()  # it would describe artefacts this build is about to overwrite
    # CMake's install step skips a file whose size and (second-resolution) time match the copy already
    # installed, so a quick rebuild with other inputs could leave the previous binary in place.  The
    # install tree is ours and is rewritten from the build tree in seconds: start it afresh.
    shutil.rmtree(build_root / "install", ignore_errors=True)
    log_path.write_text("")  # one log per build
    hint = build_hint(lane, str(checkout.path))
    log.info("building PyTorch %s (%s) for %s, API %d with NDK %s; log: %s",
             lane.pytorch_ref if not custom else commit[:12], lane.name, s.abi, api_level, ndk.release, log_path)
    with progress(f"build_android.sh {s.abi}") as bar:
        def on_line(line: str) -> None:
            step = parse_step(line)
            if step:
                bar.update(step[0], step[1], text=f"{s.abi}: {line.split('] ', 1)[-1][:60]}")

        run(["bash", str(script), *cmake_args], cwd=checkout.path, env=env, log_path=log_path, on_line=on_line,
            what="scripts/build_android.sh", hint=hint, keep_output=False)

    binary = _find_binary(build_root)
    if binary is None:
        raise ToolFailed(
            f"the build finished but produced no {BINARY}",
            cause="-DBUILD_BINARY=ON did not reach CMake, or this commit's binaries/ does not build it",
            log_path=log_path,
            remedy="look for speed_benchmark_torch in the log; rebuild with `invoke build-android --clean`",
        )
    elf = Readelf.locate().verify(binary, s.abi, api_level, log_path=log_path)
    if elf.machine == "unchecked":
        msg = "readelf is not installed: the binary's machine and API level were not checked (apt-get install binutils)"
        log.warning(msg)
        warnings.append(msg)
    elif elf.api_level_ok is None:
        msg = f"{BINARY} has no Android note (.note.android.ident): its API level could not be checked"
        log.warning(msg)
        warnings.append(msg)

    artefacts = [_artefact(BINARY, binary, "binary", out_dir)]
    install = build_root / "install"
    for lib in sorted((install / "lib").glob("*")) if (install / "lib").is_dir() else []:
        if lib.is_file() and (lib.suffix in (".a", ".so")):
            artefacts.append(_artefact(lib.name, lib, "static-library" if lib.suffix == ".a" else "shared-library",
                                       out_dir))
    if (install / "include").is_dir():
        artefacts.append(_artefact("headers", install / "include", "headers", out_dir))

    if sdk is not None:
        aar = _build_aar(checkout.path, s.abi, env, sdk, out_dir, hint)
        artefacts.append(_artefact("pytorch_android", aar, "aar", out_dir))

    finished = now_iso()
    body = {
        "lane": lane.name,
        "lane_pins": lane.to_dict(),
        "custom_commit": custom,
        "repo_url": repo_url,
        "commit": commit,
        "requested_ref": requested_ref,  # the tag/branch --commit named, if it was not a SHA
        "source_dir": str(checkout.path.resolve()),
        "ndk": {"path": str(ndk.path), "revision": ndk.revision, "release": ndk.release, "found_by": ndk.found_by},
        "host_python": {"path": str(python.path), "version": python.version_str},
        "abi": s.abi,
        "api_level": api_level,
        "cmake_args": cmake_args,
        "env": env,
        "command": ["bash", str(BUILD_SCRIPT), *cmake_args],
        "verification": elf.to_dict(),
        "started": started,
        "finished": finished,
        "seconds": round(time.monotonic() - start, 2),
        "log": os.path.relpath(log_path, out_dir),
        "warnings": warnings,
        "inputs_key": key,
        "artefacts": artefacts,
    }
    write_record(info_path, BUILD_INFO_KIND, BUILD_INFO_SCHEMA, body)
    info = BuildInfo.load(info_path).data
    log.info("built %s in %.0fs; build-info: %s", BINARY, body["seconds"], info_path)
    return BuildResult(info_path, info, False, time.monotonic() - start, log_path, warnings)


def _build_aar(source: Path, abi: str, env: Dict[str, str], sdk: AndroidSdk, out_dir: Path, hint) -> Path:
    script = source / AAR_SCRIPT
    if not script.is_file():
        raise UsageError(f"{AAR_SCRIPT} does not exist at this commit", remedy="drop --aar for this commit")
    aar_env = dict(env)
    aar_env["ANDROID_HOME"] = str(sdk.path)
    aar_env["ANDROID_SDK_ROOT"] = str(sdk.path)
    aar_env.pop("BUILD_ROOT", None)  # the AAR script builds each ABI in its own tree
    log.info("building the pytorch_android AAR for %s with the SDK at %s", abi, sdk.path)
    run(["bash", str(script), abi], cwd=source, env=aar_env, log_path=out_dir / "build.log",
        what="scripts/build_pytorch_android.sh", hint=hint, keep_output=False)
    produced = source / AAR_OUTPUT
    if not produced.is_file():
        raise ToolFailed(f"build_pytorch_android.sh finished but {AAR_OUTPUT} is missing",
                         log_path=out_dir / "build.log", remedy="look at the end of the log")
    return atomic_copy(produced, out_dir / AAR_NAME)
