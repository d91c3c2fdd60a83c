"""`invoke build-android`: PyTorch Mobile from a lane's pinned commit, verified and recorded.

One function per step, each testable alone:

1. :func:`resolve_target` -- what to build (lane, commit, absolute output and source paths);
2. :func:`check_tools` -- NDK, host Python, CMake, Vulkan, SDK/JDK for --aar and disk space, all
   *before* the multi-GB fetch;
3. :func:`fetch_source` -- the pinned checkout (a custom commit takes its lane facts afterwards);
4. :func:`make_plan` -- environment and CMake arguments for ``scripts/build_android.sh``;
5. :func:`up_to_date` -- the same inputs with unchanged artefacts rebuild nothing;
6. :func:`execute` -- run the script, verify the ELF files (machine, API level, 16 KB pages), the AAR;
7. :func:`record` -- write ``build-info.json``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import logging
import os
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from toolchain import pins
from toolchain.errors import RecordError, ToolFailed, ToolNotFound, UsageError
from toolchain.fsutil import digest_of, ensure_space, output_lock, sha256_file
from toolchain.layout import BUILD_INFO, Layout
from toolchain.progress import progress
from toolchain.records import BENCH_BINARY, BuildInfo, build_info_path, now_iso
from toolchain.runner import run
from toolchain.settings import default
from toolchain.tools import CMake, Jdk, Ninja
from toolchain.tools.git import SHA_RE, Git
from toolchain.tools.hostpython import HostPython
from toolchain.tools.ndk import Ndk, validate_api_level
from toolchain.tools.sdk import AndroidSdk

from . import aar as aar_build
from .elfcheck import ElfFacts, verify_binary, verify_page_alignment
from .gitsource import Checkout, ensure_checkout
from .hints import build_hint, parse_step
from .nnapi_lister import LISTER_NAME, build_lister, source_digest

log = logging.getLogger(__name__)

BUILD_SCRIPT = Path("scripts") / "build_android.sh"
AAR_NAME = aar_build.AAR_NAME
CMAKE_MIN = (3, 18)  # PyTorch's CMakeLists.txt: cmake_minimum_required(VERSION 3.18)
# CMake 4 refuses the cmake_minimum_required(VERSION <3.5) of PyTorch's bundled third-party projects (docs/facts.md
# F31): the PyTorch lanes need a CMake 3.x.
CMAKE_TOO_NEW = (4,)


@dataclass(frozen=True)
class BuildSettings:
    build_dir: Path = Path(default("build_dir"))
    lane: str = pins.DEFAULT_LANE
    lane_explicit: bool = False  # --lane given on the command line (a custom --commit then keeps it)
    commit: Optional[str] = None
    repo_url: Optional[str] = None
    source_dir: Optional[Path] = None  # default: <build_dir>/src/pytorch-<sha12>
    ndk: Optional[str] = None  # --ndk
    ndk_config: Optional[str] = None  # ndk.path
    sdk: Optional[str] = None  # android.sdk (for --aar)
    java_home: Optional[str] = None  # the JDK for --aar's Gradle (default: one that Gradle accepts)
    python: Optional[str] = None  # pytorch.python
    abi: str = pins.DEFAULT_ABI
    api_level: int = pins.DEFAULT_API_LEVEL
    max_jobs: Optional[int] = None
    clean: bool = False
    aar: bool = False
    vulkan: bool = False  # --vulkan: keep PyTorch's USE_VULKAN=ON (needs an NDK with vulkan_wrapper)
    cmake_args: Tuple[str, ...] = ()
    git_jobs: int = default("pytorch.git_jobs")
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
        return BuildInfo(self.build_info_path, self.info).artefact(BENCH_BINARY)


@dataclass(frozen=True)
class Target:
    """What to build, decided before anything is fetched.  Paths are absolute: the build script runs
    with the checkout as its working directory, so a relative path would point elsewhere there."""

    lane: pins.Lane
    repo_url: str
    commit: str
    requested_ref: Optional[str]  # the tag/branch --commit named, if it was not a SHA
    custom: bool
    out_dir: Path
    source_dir: Path
    abi: str
    api_level: int
    warnings: Tuple[str, ...] = ()

    @property
    def log_path(self) -> Path:
        return self.out_dir / "build.log"

    @property
    def build_root(self) -> Path:
        return self.out_dir / "cmake"


@dataclass(frozen=True)
class Tools:
    python: HostPython
    ndk: Ndk
    sdk: Optional[AndroidSdk]
    jdk: Optional[Jdk]


@dataclass(frozen=True)
class BuildPlan:
    target: Target
    tools: Tools
    source: Path
    env: Dict[str, str]
    cmake_args: List[str]
    inputs_key: str
    gradle: Optional[aar_build.GradlePins] = None

    @property
    def info_path(self) -> Path:
        return self.target.out_dir / BUILD_INFO


@dataclass(frozen=True)
class Outcome:
    artefacts: List[Dict[str, Any]]
    verification: ElfFacts
    page_alignment: Dict[str, int]
    warnings: Tuple[str, ...] = ()
    aar_ndk: Optional[Dict[str, str]] = None  # how --aar forced the NDK on the Android Gradle Plugin


# --------------------------------------------------------------------------- 1. target


def nearest_lane(date_iso: str) -> pins.Lane:
    """The preset whose pinned commit date is nearest to ``date_iso``."""
    when = _dt.date.fromisoformat(date_iso[:10])
    dated = [ln for ln in pins.LANES.values() if ln.pytorch_date]
    return min(dated, key=lambda ln: abs((_dt.date.fromisoformat(ln.pytorch_date[:10]) - when).days))


def _resolve_commit(requested: str, repo_url: str, out_dir: Path) -> Tuple[str, Optional[str], List[str]]:
    if SHA_RE.fullmatch(requested.lower()):
        return requested.lower(), None, []
    commit, ref = Git.locate(log_path=out_dir / "source.log").resolve_ref(repo_url, requested)
    log.info("%s is %s at %s", requested, commit, repo_url)
    warnings = []
    if ref.startswith("refs/heads/"):
        warnings.append(f"{requested!r} is a branch: it moves; this build records the commit it named now "
                        f"({commit[:12]})")
        log.warning(warnings[-1])
    return commit, ref, warnings


def validate_jobs(value) -> Optional[int]:
    if value is None or value == "":
        return None
    try:
        jobs = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"--max-jobs {value!r} is not a number", remedy="pass e.g. --max-jobs 4 "
                         "(config android.max_jobs)") from None
    if jobs < 1:
        raise UsageError(f"--max-jobs {jobs} must be at least 1", remedy="pass e.g. --max-jobs 4")
    return jobs


def resolve_target(s: BuildSettings) -> Target:
    validate_jobs(s.max_jobs)
    if s.abi not in pins.ABIS:
        raise UsageError(f"unknown ABI {s.abi!r}", remedy=f"use one of: {', '.join(pins.ABIS)} (--abi)")
    api_level = validate_api_level(s.api_level)
    lane = pins.lane(s.lane)
    repo_url = s.repo_url or pins.PYTORCH_REPO_URL
    out_dir = build_info_path(s.build_dir, s.abi).parent.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    commit, ref, warnings = _resolve_commit((s.commit or lane.pytorch_commit).strip(), repo_url, out_dir)
    source = Path(s.source_dir).expanduser() if s.source_dir else Layout(s.build_dir).checkout("pytorch", commit)
    if s.aar and not lane.aar_gradle_wrapper:
        raise UsageError(f"--aar is not supported on lane '{lane.name}' ({lane.pytorch_ref})",
                         cause=aar_build.NO_WRAPPER_CAUSE,
                         remedy="build the AAR on lane current (`invoke build-android --lane current --aar`), "
                                "or drop --aar (speed_benchmark_torch and the libraries need no Gradle)")
    return Target(lane, repo_url, commit, ref, commit != lane.pytorch_commit, out_dir, source.resolve(),
                  s.abi, api_level, tuple(warnings))


# --------------------------------------------------------------------------- 2. tools (before any fetch)


def check_disk(target: Target) -> None:
    """Room for the checkout and the build tree where they are missing, before the fetch starts."""
    need = 0 if (target.source_dir / ".git").exists() else pins.CHECKOUT_BYTES
    need += 0 if (target.build_root / "CMakeCache.txt").is_file() else pins.BUILD_TREE_BYTES
    if need:
        ensure_space(target.source_dir.parent if not target.source_dir.exists() else target.source_dir, need,
                     f"the PyTorch {target.lane.pytorch_ref} checkout and its {target.abi} build tree")


def check_cmake(lane: pins.Lane, env: Mapping[str, str]) -> None:
    """CMake 3.18 or newer, but not 4.x (docs/facts.md F9, F31)."""
    cmake = CMake.locate(env).require(CMAKE_MIN, why=f"PyTorch {lane.pytorch_ref}'s CMakeLists.txt needs it")
    if cmake.version is not None and cmake.version >= CMAKE_TOO_NEW:
        raise ToolNotFound(
            f"CMake {cmake.version_str} ({cmake.path}) is too new for lane '{lane.name}' (PyTorch {lane.pytorch_ref})",
            cause="CMake 4 removed compatibility with cmake_minimum_required(VERSION) below 3.5, which PyTorch's "
                  "bundled third-party projects still declare (protobuf, QNNPACK's clog): configure stops with "
                  "\"Compatibility with CMake < 3.5 has been removed from CMake\" (pytorch/pytorch#150149, #150167)",
            remedy='pip install "cmake>=3.18,<4" (in the venv: it comes first on PATH), or put a CMake 3.18-3.31 '
                   "first on PATH")


def check_tools(s: BuildSettings, target: Target, env: Mapping[str, str]) -> Tools:
    lane = target.lane
    check_cmake(lane, env)
    python = HostPython.locate(s.python).check(lane)
    ndk = Ndk.locate(s.ndk, s.ndk_config, env, lane).check(lane)
    if s.vulkan:
        ndk.require_vulkan_wrapper(lane)
    if not Ninja.locate(env).found:
        log.warning("ninja is not installed: build_android.sh falls back to make, which is slower "
                    "(sudo apt-get install ninja-build)")
    sdk = jdk = None
    if s.aar:
        sdk = AndroidSdk.locate(s.sdk, env)
        jdk = aar_build.choose_jdk(aar_build.GradlePins.from_lane(lane), s.java_home, env)
    return Tools(python, ndk, sdk, jdk)


# --------------------------------------------------------------------------- 3. source


def fetch_source(target: Target, git_jobs: int) -> Checkout:
    git = Git.locate(log_path=target.out_dir / "source.log")
    return ensure_checkout(git, target.repo_url, target.commit, target.source_dir, jobs=git_jobs)


def adopt_custom_commit(s: BuildSettings, target: Target, checkout: Checkout) -> Target:
    """A commit that is not a lane's pin takes its facts from the nearest preset (or the --lane given)."""
    if s.lane_explicit:
        lane = target.lane
        msg = (f"custom commit {target.commit[:12]}: NDK, Python and converter facts come from lane {lane.name!r} "
               f"({lane.pytorch_ref}); they were not verified for this commit")
    else:
        date = Git.locate(log_path=target.out_dir / "source.log").commit_date(checkout.path)
        lane = nearest_lane(date)
        msg = (f"custom commit {target.commit[:12]} ({date[:10]}): NDK, Python and converter facts come from the "
               f"nearest preset lane {lane.name!r} ({lane.pytorch_ref}); they were not verified for this commit")
    log.warning(msg)
    return replace(target, lane=lane, warnings=target.warnings + (msg,))


# --------------------------------------------------------------------------- 4. plan


def cmake_arguments(target: Target, tools: Tools, vulkan: bool, extra: Tuple[str, ...]) -> List[str]:
    args = [f"-DANDROID_ABI={target.abi}", f"-DANDROID_NATIVE_API_LEVEL={target.api_level}", "-DBUILD_BINARY=ON"]
    if not vulkan:
        args.append("-DUSE_VULKAN=OFF")  # the build script can only switch it on (pytorch/pytorch#66196)
    args += tools.ndk.page_size_args()
    ccache = shutil.which("ccache")
    if ccache:
        args += [f"-DCMAKE_C_COMPILER_LAUNCHER={ccache}", f"-DCMAKE_CXX_COMPILER_LAUNCHER={ccache}"]
    for arg in extra:
        if any(c.isspace() for c in arg):
            raise UsageError(f"CMake argument {arg!r} contains whitespace",
                             cause="build_android.sh splits its arguments on whitespace",
                             remedy="pass arguments without spaces")
        args.append(arg)  # last: the user's arguments override ours, as the script's own come first
    return args


def build_environment(target: Target, tools: Tools, max_jobs: Optional[int]) -> Dict[str, str]:
    env = {
        "ANDROID_NDK": str(tools.ndk.path),
        "ANDROID_ABI": target.abi,
        # build_android.sh overwrites this with 21; the CMake argument is what counts.
        "ANDROID_NATIVE_API_LEVEL": str(target.api_level),
        "BUILD_ROOT": str(target.build_root),
        "MAX_JOBS": str(validate_jobs(max_jobs) or os.cpu_count() or 1),
        "PYTHON": str(tools.python.path),
    }
    env.update(dict(target.lane.build_env))
    return env


def make_plan(s: BuildSettings, target: Target, tools: Tools, checkout: Checkout) -> BuildPlan:
    source = checkout.path.resolve()
    if not (source / BUILD_SCRIPT).is_file():
        raise UsageError(
            f"{BUILD_SCRIPT} does not exist at commit {target.commit[:12]}",
            cause="PyTorch deleted scripts/build_android.sh in July 2025 (it is missing from v2.9.0 on)",
            remedy="use a commit up to v2.8.x: --lane current (v2.8.0) or --lane seed-2020",
        )
    gradle = None
    if s.aar and not (source / aar_build.WRAPPER).is_file():
        raise UsageError(f"{aar_build.WRAPPER} does not exist at commit {target.commit[:12]}: --aar cannot build here",
                         cause=aar_build.NO_WRAPPER_CAUSE,
                         remedy="use a commit from 2021-02 on (e.g. --lane current) for --aar, or drop --aar")
    if s.aar:  # the checkout's own Gradle files decide the JDK, still before any build
        gradle = aar_build.GradlePins.from_checkout(source, target.lane)
        tools = replace(tools, jdk=aar_build.choose_jdk(gradle, s.java_home, s.env if s.env is not None
                                                        else os.environ))
    env = build_environment(target, tools, s.max_jobs)
    args = cmake_arguments(target, tools, s.vulkan, s.cmake_args)
    inputs = {
        "lane": target.lane.to_dict(), "repo_url": target.repo_url, "commit": target.commit,
        "source_dir": str(source), "ndk": {"path": str(tools.ndk.path), "revision": tools.ndk.revision},
        "python": {"path": str(tools.python.path), "version": tools.python.version_str},
        "abi": target.abi, "api_level": target.api_level, "cmake_args": args,
        "env": {k: v for k, v in env.items() if k != "MAX_JOBS"}, "aar": bool(s.aar),
        "sdk": str(tools.sdk.path) if tools.sdk else None, "jdk": str(tools.jdk.home) if tools.jdk else None,
        "nnapi_lister": source_digest(),
    }
    return BuildPlan(target, tools, source, env, args, digest_of(inputs), gradle)


# --------------------------------------------------------------------------- 5. up to date?


def _tree_digest(root: Path) -> Tuple[str, int, int]:
    """sha256 over (relative path, file sha256) of every file below ``root``; file count; newest mtime."""
    h = hashlib.sha256()
    count, newest = 0, 0
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(f"{p.relative_to(root).as_posix()}\0{sha256_file(p)}\n".encode())
            count += 1
            newest = max(newest, p.stat().st_mtime_ns)
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


def _artefact_intact(art: Dict[str, Any], base: Path) -> bool:
    p = base / art["path"]
    if art.get("kind") == "headers":
        return p.is_dir() and (_tree_stat(p) == (art.get("files"), art.get("mtime_ns"))
                               or _tree_digest(p)[0] == art["sha256"])
    if not p.is_file():
        return False
    st = p.stat()
    return (st.st_size, st.st_mtime_ns) == (art.get("size"), art.get("mtime_ns")) or sha256_file(p) == art["sha256"]


def artefacts_intact(info: Dict[str, Any], base: Path) -> bool:
    """Every recorded artefact exists unchanged (stat first; sha256 only when the stat differs)."""
    arts = info.get("artefacts") or []
    return any(a.get("name") == BENCH_BINARY for a in arts) and all(_artefact_intact(a, base) for a in arts)


def up_to_date(plan: BuildPlan) -> Optional[Dict[str, Any]]:
    """The previous build-info when it was made from the same inputs and its artefacts are unchanged."""
    if not plan.info_path.is_file():
        return None
    try:
        old = BuildInfo.load(plan.info_path).data
    except RecordError as e:
        log.warning("ignoring unreadable %s: %s", plan.info_path, e.what)
        return None
    if old.get("inputs_key") == plan.inputs_key and artefacts_intact(old, plan.target.out_dir):
        return old
    log.info("inputs or artefacts changed since the last build: building again")
    return None


# --------------------------------------------------------------------------- 6. execute


def _cmake_home(build_root: Path) -> Optional[str]:
    cache = build_root / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return line.split("=", 1)[1].strip()
    return None


def prepare_tree(plan: BuildPlan, clean: bool) -> None:
    """Start the CMake tree over when asked or when it belongs to another checkout; drop the stale record."""
    root, out = plan.target.build_root, plan.target.out_dir
    if clean:
        log.info("--clean: removing %s and %s", root, plan.info_path)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(out / aar_build.AAR_ROOT, ignore_errors=True)
        (out / AAR_NAME).unlink(missing_ok=True)
    home = _cmake_home(root)
    if home and Path(home).resolve() != plan.source:
        log.info("the CMake tree %s was configured for %s; starting it over", root, home)
        shutil.rmtree(root, ignore_errors=True)
    plan.info_path.unlink(missing_ok=True)  # it would describe artefacts this build is about to overwrite
    # CMake's install step skips a file whose size and (second-resolution) time match the installed copy, so a
    # quick rebuild with other inputs could leave the previous binary in place: the install tree starts afresh.
    shutil.rmtree(root / "install", ignore_errors=True)
    plan.target.log_path.write_text("")  # one log per build


def run_build_script(plan: BuildPlan) -> None:
    t = plan.target
    hint = build_hint(t.lane, str(plan.source), str(plan.tools.python.path))
    log.info("building PyTorch %s (%s) for %s, API %d with NDK %s; log: %s",
             t.lane.pytorch_ref if not t.custom else t.commit[:12], t.lane.name, t.abi, t.api_level,
             plan.tools.ndk.release, t.log_path)
    with progress(f"build_android.sh {t.abi}") as bar:
        def on_line(line: str) -> None:
            step = parse_step(line)
            if step:
                bar.update(step[0], step[1], text=f"{t.abi}: {line.split('] ', 1)[-1][:60]}")

        run(["bash", str(plan.source / BUILD_SCRIPT), *plan.cmake_args], cwd=plan.source, env=plan.env,
            log_path=t.log_path, on_line=on_line, what="scripts/build_android.sh", hint=hint, keep_output=False)


def _find_binary(build_root: Path) -> Path:
    for p in (build_root / "install" / "bin" / BENCH_BINARY, build_root / "bin" / BENCH_BINARY):
        if p.is_file():
            return p
    raise ToolFailed(
        f"the build finished but produced no {BENCH_BINARY}",
        cause="-DBUILD_BINARY=ON did not reach CMake, or this commit's binaries/ does not build it",
        log_path=build_root.parent / "build.log",
        remedy="look for speed_benchmark_torch in the log; rebuild with `invoke build-android --clean`",
    )


def collect_artefacts(plan: BuildPlan, binary: Path) -> List[Dict[str, Any]]:
    out = plan.target.out_dir
    artefacts = [_artefact(BENCH_BINARY, binary, "binary", out)]
    install = plan.target.build_root / "install"
    for lib in sorted((install / "lib").glob("*")) if (install / "lib").is_dir() else []:
        if lib.is_file() and lib.suffix in (".a", ".so"):
            kind = "static-library" if lib.suffix == ".a" else "shared-library"
            artefacts.append(_artefact(lib.name, lib, kind, out))
    if (install / "include").is_dir():
        artefacts.append(_artefact("headers", install / "include", "headers", out))
    return artefacts


def execute(plan: BuildPlan) -> Outcome:
    run_build_script(plan)
    t = plan.target
    binary = _find_binary(t.build_root)
    facts = verify_binary(binary, t.abi, t.api_level)
    warnings: List[str] = []
    if facts.api_level_ok is None:
        warnings.append(f"{BENCH_BINARY} has no Android note (.note.android.ident): its API level could not be checked")
    artefacts = collect_artefacts(plan, binary)
    lister = build_lister(plan.tools.ndk, t.abi, t.api_level, t.out_dir, t.log_path)
    verify_binary(lister, t.abi, t.api_level)
    artefacts.append(_artefact(LISTER_NAME, lister, "tool", t.out_dir))
    native = [binary, lister] + [t.out_dir / a["path"] for a in artefacts if a["kind"] == "shared-library"]
    alignment = verify_page_alignment(native, t.abi)
    aar_ndk = None
    if plan.tools.sdk is not None:
        aar = aar_build.build_aar(plan, plan.tools.sdk, plan.tools.jdk)
        aar_ndk = aar.ndk
        artefacts.append(_artefact("pytorch_android", aar.path, "aar", t.out_dir))
        alignment.update(aar.alignment)
        warnings.extend(aar.warnings)
    for w in warnings:
        log.warning(w)
    return Outcome(artefacts, facts, alignment, tuple(warnings), aar_ndk)


# --------------------------------------------------------------------------- 7. record


def record(plan: BuildPlan, outcome: Outcome, started: str, seconds: float) -> Dict[str, Any]:
    t, tools = plan.target, plan.tools
    body = {
        "lane": t.lane.name, "lane_pins": t.lane.to_dict(), "custom_commit": t.custom, "repo_url": t.repo_url,
        "commit": t.commit, "requested_ref": t.requested_ref, "source_dir": str(plan.source),
        "ndk": {"path": str(tools.ndk.path), "revision": tools.ndk.revision, "release": tools.ndk.release,
                "found_by": tools.ndk.found_by, "vulkan_wrapper": tools.ndk.has_vulkan_wrapper},
        "host_python": {"path": str(tools.python.path), "version": tools.python.version_str},
        "jdk": {"home": str(tools.jdk.home), "major": tools.jdk.major} if tools.jdk else None,
        "abi": t.abi, "api_level": t.api_level, "cmake_args": plan.cmake_args, "env": plan.env,
        "vulkan": "-DUSE_VULKAN=OFF" not in plan.cmake_args,
        "command": ["bash", str(BUILD_SCRIPT), *plan.cmake_args],
        "verification": outcome.verification.to_dict(),
        "page_alignment": outcome.page_alignment,
        "aar_ndk": outcome.aar_ndk,
        "started": started, "finished": now_iso(), "seconds": round(seconds, 2),
        "log": os.path.relpath(t.log_path, t.out_dir),
        "warnings": list(t.warnings) + list(outcome.warnings),
        "inputs_key": plan.inputs_key, "artefacts": outcome.artefacts,
    }
    return BuildInfo.create(plan.info_path, body).data


# --------------------------------------------------------------------------- the stage


def build_android(s: BuildSettings) -> BuildResult:
    start, started = time.monotonic(), now_iso()
    env = os.environ if s.env is None else s.env
    target = resolve_target(s)
    with output_lock(target.out_dir, "build-android"):
        tools = None if target.custom else check_tools(s, target, env)  # fail fast, before any download
        check_disk(target)
        checkout = fetch_source(target, s.git_jobs)
        if target.custom:
            target = adopt_custom_commit(s, target, checkout)
            tools = check_tools(s, target, env)
        assert tools is not None
        plan = make_plan(s, target, tools, checkout)
        old = None if s.clean else up_to_date(plan)
        if old is not None:
            log.info("up to date: %s (same inputs, artefacts unchanged; --clean rebuilds)", plan.info_path)
            return BuildResult(plan.info_path, old, True, time.monotonic() - start, target.log_path,
                               list(target.warnings))
        prepare_tree(plan, s.clean)
        outcome = execute(plan)
        info = record(plan, outcome, started, time.monotonic() - start)
    log.info("built %s in %.0fs; build-info: %s", BENCH_BINARY, info["seconds"], plan.info_path)
    return BuildResult(plan.info_path, info, False, time.monotonic() - start, target.log_path,
                       list(target.warnings) + list(outcome.warnings))
