"""Inputs for deploy tests: records written with toolchain.records, a compiled stand-in binary, a test APK."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional, Union

from toolchain.fsutil import sha256_file
from toolchain.layout import BUILD_INFO
from toolchain.records import (
    APP_BENCH_CONTRACT,
    APP_BENCH_META,
    APP_INFO_KIND,
    APP_INFO_NAME,
    APP_INFO_SCHEMA,
    BUILD_INFO_KIND,
    BUILD_INFO_SCHEMA,
    MANIFEST_KIND,
    MANIFEST_NAME,
    MANIFEST_SCHEMA,
    write_record,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
COMMIT = "c19eb4ad73ebf16c7dc73229729ed95692472f6e"
OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"
APP_ID = "org.torchdroid.demo"


def build_standin(out_dir: Path) -> Path:
    """Compile the stand-in speed_benchmark_torch with the host C compiler."""
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / "speed_benchmark_torch"
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise RuntimeError("no C compiler (apt-get install gcc)")
    subprocess.run([cc, "-O1", "-o", str(exe), str(HERE / "speed_benchmark_standin.c")], check=True)
    return exe


def build_nnapi_lab(out_dir: Path) -> "NnapiLab":
    """The NNAPI device lister, built by build-android's own code with the fixture NDK (a host ELF), and a stand-in
    libneuralnetworks.so (the NDK device API over SBT_NNAPI_DEVICES) for the virtual phones' LD_LIBRARY_PATH."""
    from ndk_build.nnapi_lister import build_lister
    from tests.ndk_support import make_fake_ndk
    from toolchain.tools.ndk import Ndk

    out_dir.mkdir(parents=True, exist_ok=True)
    ndk = Ndk.from_dir(make_fake_ndk(out_dir / "ndk", "27.2.12479018"))
    lister = build_lister(ndk, "x86_64", 29, out_dir / "android", out_dir / "lister.log")
    return NnapiLab(lister, build_nnapi_library(out_dir / "lib"))


def build_nnapi_library(lib_dir: Path, source: Path = HERE / "libneuralnetworks_standin.c") -> Path:
    """``lib_dir/libneuralnetworks.so`` compiled from ``source`` with the host C compiler; returns ``lib_dir``."""
    lib_dir.mkdir(parents=True, exist_ok=True)
    cc = shutil.which("gcc") or shutil.which("cc")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib_dir / "libneuralnetworks.so"), str(source)], check=True)
    return lib_dir


@dataclass(frozen=True)
class NnapiLab:
    lister: Path
    lib_dir: Path  # holds libneuralnetworks.so


def write_build_info(build_dir: Path, binary: Path, abi: str = "arm64-v8a", commit: str = COMMIT,
                     lister: Optional[Path] = None) -> Path:
    build_dir.mkdir(parents=True, exist_ok=True)
    arts = [("speed_benchmark_torch", binary)] + ([("torchdroid_nnapi_devices", lister)] if lister else [])
    return write_record(build_dir / BUILD_INFO, BUILD_INFO_KIND, BUILD_INFO_SCHEMA, {
        "abi": abi, "commit": commit, "lane": "current",
        "artefacts": [{"name": name, "path": os.path.relpath(path, build_dir), "sha256": sha256_file(path)}
                      for name, path in arts],
    })


def _spec(shape, dtype="float32"):
    return {"shape": shape, "dtype": dtype, "memory_format": "contiguous", "scale": None, "zero_point": None}


def write_models(models_dir: Path, modes: Iterable[str] = ("none", "full"), commit: str = COMMIT,
                 size: Union[int, Mapping[str, int]] = 200_000, stem: str = "mobilenetv2", seed: int = 1) -> Path:
    """A manifest with small dummy model files (the stand-in binary loads nothing); ``size`` in bytes, or per
    ``quant_MODE-BACKEND`` (e.g. ``{"quant_none-cpu": 14_739_293}``)."""
    models_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for mode in modes:
        for backend in ("cpu", "nnapi"):
            name = f"{stem}-quant_{mode}-{backend}.pt"
            n = size if isinstance(size, int) else size[f"quant_{mode}-{backend}"]
            data = (f"{name}:{seed}:".encode() * (n // 20 + 1))[:n]
            (models_dir / name).write_bytes(data)
            files.append({"file": name, "sha256": sha256_file(models_dir / name), "size": n,
                          "model": "mobilenet_v2", "stem": stem, "mode": mode, "backend": backend,
                          "input": _spec([1, 3, 224, 224]), "output": _spec([1, 1000])})
    return write_record(models_dir / MANIFEST_NAME, MANIFEST_KIND, MANIFEST_SCHEMA, {
        "conversions": {stem: {"torch": {"version": "1.8.0", "git_version": commit}}},
        "files": files,
    })


FRAMEWORK_RES = Path("/usr/share/android-framework-res/framework-res.apk")


def manifest_xml(package: str, min_sdk: int = 21, activity: str = ".MainActivity", launcher: bool = True,
                 contract: Optional[str] = None) -> str:
    """A manifest with a ``.Settings`` activity and ``activity``; ``contract``: the version of torchdroid's benchmark
    contract ``activity`` declares (``<meta-data>``, as the generated app's does), None for a foreign app."""
    intent = ('<intent-filter><action android:name="android.intent.action.MAIN"/>'
              '<category android:name="android.intent.category.LAUNCHER"/></intent-filter>') if launcher else ""
    if contract is not None:
        intent = f'<meta-data android:name="{APP_BENCH_META}" android:value="{contract}"/>' + intent
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<manifest xmlns:android="http://schemas.android.com/apk/res/'
            f'android" package="{package}"><uses-sdk android:minSdkVersion="{min_sdk}"/><application>'
            f'<activity android:name=".Settings"/><activity android:name="{activity}" android:exported="true">'
            f'{intent}</activity></application></manifest>\n')


def binary_manifest(text: str, workdir: Path) -> bytes:
    """The AndroidManifest.xml as Debian's real aapt compiles it (Android binary XML)."""
    aapt = shutil.which("aapt")
    if aapt is None or not FRAMEWORK_RES.is_file():
        raise RuntimeError("aapt and android-framework-res are needed (apt-get install aapt android-framework-res)")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "AndroidManifest.xml").write_text(text)
    subprocess.run([aapt, "package", "-f", "-M", str(workdir / "AndroidManifest.xml"), "-I", str(FRAMEWORK_RES),
                    "-F", str(workdir / "m.apk")], check=True, capture_output=True)
    with zipfile.ZipFile(workdir / "m.apk") as z:
        return z.read("AndroidManifest.xml")


def make_apk(path: Path, package: str = APP_ID, signer: bytes = b"debug-key-A", variant: str = "quant_full",
             abis: Iterable[str] = ("arm64-v8a",), min_sdk: int = 21, size: int = 300_000,
             activity: str = ".MainActivity", launcher: bool = True,
             contract: Optional[str] = str(APP_BENCH_CONTRACT)) -> Path:
    """A zip shaped like an APK: a binary manifest compiled by aapt, a certificate entry, assets, native libs.
    ``contract=None``: an app not made by make-app (no benchmark contract declared; it never logs a result)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        manifest = binary_manifest(manifest_xml(package, min_sdk, activity, launcher, contract), Path(tmp))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("AndroidManifest.xml", manifest)
        z.writestr("META-INF/CERT.RSA", signer)
        executorch = not variant.startswith("quant_")  # fp32-xnnpack ...: an app on ExecuTorch's runtime
        model = f"mobilenetv2-{variant}.pte" if executorch else f"mobilenetv2-{variant}-cpu.pt"
        z.writestr(f"assets/{model}", os.urandom(size // 2))
        for abi in abis:
            z.writestr(f"lib/{abi}/{'libexecutorch.so' if executorch else 'libpytorch_jni.so'}", b"\x7fELF" + b"\0" * 1000)
    return path


def write_app_info(app_dir: Path, apk: Path, package: str = APP_ID, variant: str = "quant_full") -> Path:
    return write_record(app_dir / APP_INFO_NAME, APP_INFO_KIND, APP_INFO_SCHEMA, {
        "application_id": package, "activity": ".MainActivity", "variant": variant,
        "apk": {"path": os.path.relpath(apk, app_dir), "sha256": sha256_file(apk)},
    })


@dataclass
class Inputs:
    models: Path
    build_info: Path
    binary: Path
    app_dir: Path
    apk: Path


def make_inputs(root: Path, modes=("none", "full"), standin: Optional[Path] = None,
                model_size: Union[int, Mapping[str, int]] = 200_000,
                commit: str = COMMIT) -> Inputs:
    binary = standin or build_standin(root / "bin")
    if standin is not None:
        (root / "bin").mkdir(parents=True, exist_ok=True)
        binary = root / "bin" / "speed_benchmark_torch"
        shutil.copy2(standin, binary)
    bi = write_build_info(root / "build" / "android" / "arm64-v8a", binary)
    write_models(root / "models", modes, commit=commit, size=model_size)
    apk = make_apk(root / "app" / "app" / "build" / "outputs" / "apk" / "debug" / "app-debug.apk")
    write_app_info(root / "app", apk)
    return Inputs(root / "models", bi, binary, root / "app", apk)


def invoke_cli(cwd: Path, *args: str, port: int) -> subprocess.CompletedProcess:
    """Run ``invoke ARGS`` of this project in ``cwd`` with ``ANDROID_ADB_SERVER_PORT=port`` (not a terminal), through
    tests/cli.py: a child of the fork server (torch and ExecuTorch imported once, none of our modules), or a new
    process where that server cannot stand in for one."""
    from tests.adversarial.harness import ROOT
    from tests.cli import invoke

    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDROID_")}
    env.update(ANDROID_ADB_SERVER_PORT=str(port), CI="1")
    return invoke(cwd, "--search-root", str(ROOT), *args, env=env, timeout=300)


def runs(cmdline: bytes, program: bytes, argument: bytes = b"") -> bool:
    """Whether a /proc cmdline is ``program`` itself (an argument whose base name is ``program``: ``./program`` or
    an interpreter running it), not a command that only mentions it (``sha1sum .program.partial-1`` while a push
    ends, the shell that starts it); with ``argument``: a run with an argument that contains it."""
    args = cmdline.split(b"\0")
    return any(os.path.basename(a) == program for a in args) and (not argument or any(argument in a for a in args))


def _processes():
    """``(pid, cmdline, working directory or why it cannot be read)`` of every process on this machine."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError as e:
            cwd = f"(cwd unreadable: {e})"
        yield int(proc.name), cmdline, cwd


def running_in(directory: Path, program: bytes, argument: bytes = b"") -> list:
    """Pids of the processes of ``program`` (runs) whose working directory is ``directory`` (a virtual phone's
    sandbox)."""
    return [pid for pid, cmdline, cwd in _processes() if Path(cwd) == directory and runs(cmdline, program, argument)]


def wait_running(proc: subprocess.Popen, device, directory: str, program: bytes, argument: bytes = b"",
                 timeout: float = 120) -> None:
    """Wait until ``program`` runs in ``directory`` of the virtual ``device`` (a CLI run ``proc`` started it);
    else stop ``proc`` and fail saying which such processes exist where, what the device ran and what ``proc``
    printed, without waiting for the command's own timeout."""
    import pytest  # here: the benchmarks import this module too

    sandbox, started = device.path(directory), time.monotonic()
    while time.monotonic() < started + timeout and proc.poll() is None:
        if running_in(sandbox, program, argument):
            return
        time.sleep(0.1)
    seen = where_running(program)
    proc.kill()
    log = device.state_dir / "device.log"
    pytest.fail(f"{program.decode()} not seen running in {sandbox} after {time.monotonic() - started:.0f} s\n"
                f"processes: {seen}\ndevice log: {log.read_text()[-3000:] if log.is_file() else '(none)'}\n"
                f"output: {''.join(proc.communicate())[-3000:]}")


def where_running(program: bytes) -> str:
    """Every process whose command line mentions ``program``, with its working directory: what a test that did not
    find ``program`` running in a sandbox prints."""
    lines = [f"{pid} {cwd} {_argv(cmdline)}" for pid, cmdline, cwd in _processes() if program in cmdline]
    return "\n".join(lines) or f"no {program.decode()} process on this machine"


def _argv(cmdline: bytes) -> str:
    return cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
