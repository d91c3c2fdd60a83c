"""Stand-ins for the Android-only shell commands of the virtual device (getprop, df, getconf are sh scripts).

``pm install/list/path``, ``am start``, ``logcat`` and ``dumpsys thermalservice|battery`` with the
output formats of the real ones (toybox / Android 10+, see docs/facts.md).  State lives in
``$VDEV_STATE`` (props.json, device.json, logcat.txt, packages/).  A binary AndroidManifest.xml (what
aapt/aapt2 write into every real APK) is read with Debian's real ``aapt dump xmltree``.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

STATE = Path(os.environ["VDEV_STATE"])
ROOT = Path(os.environ["VDEV_ROOT"])
BENCH_TAG = "torchdroid"
BENCH_PREFIX = "TORCHDROID_BENCH "
PROGRESS_PREFIX = "TORCHDROID_PROGRESS "
# what the generated app's manifest declares (<meta-data> on its activity): an app without it is someone else's app,
# which takes the benchmark intent's extras and ignores them (it never logs a TORCHDROID_* line)
BENCH_META = "org.torchdroid.benchmark"


def config() -> dict:
    return json.loads((STATE / "device.json").read_text())


def props() -> dict:
    return json.loads((STATE / "props.json").read_text())


def _packages() -> Path:
    d = STATE / "packages"
    d.mkdir(exist_ok=True)
    return d


def _fail(reason: str) -> int:
    print(f"Failure [{reason}]")
    return 1


def pm(args) -> int:
    if not args:
        print("usage: pm [list|path|install|uninstall] ...", file=sys.stderr)
        return 1
    verb, rest = args[0], args[1:]
    if verb == "list" and rest[:1] == ["packages"]:
        flt = rest[1] if len(rest) > 1 else ""
        for d in sorted(_packages().iterdir()):
            if flt in d.name:
                print(f"package:{d.name}")
        return 0
    if verb == "path":
        d = _packages() / rest[0]
        if not d.is_dir():
            return 1
        print(f"package:/data/app/{rest[0]}-1/base.apk")
        return 0
    if verb == "uninstall":
        d = _packages() / rest[-1]
        if not d.is_dir():
            return _fail("DELETE_FAILED_INTERNAL_ERROR")
        shutil.rmtree(d)
        print("Success")
        return 0
    if verb != "install":
        print(f"Unknown command: {verb}", file=sys.stderr)
        return 1
    paths = [a for a in rest if not a.startswith("-")]
    if not paths:
        print("Error: no package specified", file=sys.stderr)
        return 1
    apk = Path(paths[-1])
    forced = config().get("install_failure")
    if forced:
        return _fail(forced)
    if not apk.is_file():
        return _fail(f"INSTALL_FAILED_INVALID_URI: Unable to open file: {apk}")
    try:
        with zipfile.ZipFile(apk) as z:
            raw = z.read("AndroidManifest.xml")
            names = z.namelist()
            cert = z.read("META-INF/CERT.RSA") if "META-INF/CERT.RSA" in names else b""
    except (zipfile.BadZipFile, KeyError) as e:
        return _fail(f"INSTALL_PARSE_FAILED_NOT_APK: Failed to parse {apk}: {e}")
    if not cert:
        return _fail(f"INSTALL_PARSE_FAILED_NO_CERTIFICATES: Failed to collect certificates from {apk}")
    pkg, min_sdk, activities, benchmarked = read_manifest(apk, raw)
    if not pkg:
        return _fail("INSTALL_PARSE_FAILED_MANIFEST_MALFORMED: no package name")
    sdk = int(props().get("ro.build.version.sdk", "29"))
    if min_sdk and min_sdk > sdk:
        return _fail(f"INSTALL_FAILED_OLDER_SDK: Failed parse during installPackageLI: /data/app/vmdl.tmp/base.apk "
                     f"(at Binary XML file line #7): Requires newer sdk version #{min_sdk} (current version is #{sdk})")
    abis = {n.split("/")[1] for n in names if n.startswith("lib/") and n.count("/") >= 2}
    device_abis = set(props().get("ro.product.cpu.abilist", "").split(","))
    if abis and not abis & device_abis:
        return _fail("INSTALL_FAILED_NO_MATCHING_ABIS: Failed to extract native libraries, res=-113")
    signer = hashlib.sha256(cert).hexdigest()
    d = _packages() / pkg
    if d.is_dir() and (d / "signer").read_text() != signer:
        return _fail(f"INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package {pkg} signatures do not match "
                     "previously installed version; ignoring!")
    d.mkdir(exist_ok=True)
    shutil.copyfile(apk, d / "base.apk")
    (d / "signer").write_text(signer)
    (d / "activities").write_text("".join(a + "\n" for a in activities))
    (d / "benchmark").write_text("".join(a + "\n" for a in benchmarked))
    (d / "task").unlink(missing_ok=True)  # installing over an app kills it
    print("Success")
    return 0


def _xmltree(apk: Path) -> str:
    aapt = shutil.which("aapt")
    if aapt is None:
        raise SystemExit("aapt is needed to read a binary AndroidManifest.xml (apt-get install aapt)")
    return subprocess.run([aapt, "dump", "xmltree", str(apk), "AndroidManifest.xml"], capture_output=True,
                          text=True, check=True).stdout


def read_manifest(apk: Path, raw: bytes) -> tuple:
    """``(package, minSdk, [activity class names], [those that declare the benchmark meta-data])`` as
    PackageParser resolves them."""
    if raw[:2] == b"\x03\x00":  # RES_XML_TYPE: what aapt/aapt2 write
        tree = _xmltree(apk)
        pkg = re.search(r'A: package="([^"]+)"', tree)
        msdk = re.search(r"A: android:minSdkVersion\(0x0101020c\)=\(type 0x10\)0x([0-9a-f]+)", tree)
        pkg_name = pkg.group(1) if pkg else ""
        names, marked = [], []
        for block in re.split(r"\n\s+E: (?=activity)", tree)[1:]:  # each activity up to the next one
            m = re.match(r"activity(?:-alias)? \(line=\d+\)\n\s+A: android:name\(0x01010003\)=\"([^\"]+)\"", block)
            if m:
                names.append(_full(pkg_name, m.group(1)))
                if re.search(r"E: meta-data \(line=\d+\)\n\s+A: android:name\(0x01010003\)=\"" + re.escape(BENCH_META)
                             + '"', block):
                    marked.append(names[-1])
        return pkg_name, int(msdk.group(1), 16) if msdk else None, names, marked
    text = raw.decode("utf-8", "replace")
    pkg = re.search(r'package="([\w.]+)"', text)
    msdk = re.search(r'minSdkVersion="(\d+)"', text)
    pkg_name = pkg.group(1) if pkg else ""
    names, marked = [], []
    for m in re.finditer(r'<activity[^>]*android:name="([^"]+)"[^>]*?(/>|>(.*?)</activity>)', text, re.S):
        names.append(_full(pkg_name, m.group(1)))
        if f'android:name="{BENCH_META}"' in (m.group(3) or ""):
            marked.append(names[-1])
    return pkg_name, int(msdk.group(1)) if msdk else None, names, marked


def _full(pkg: str, name: str) -> str:
    return pkg + name if name.startswith(".") else name if "." in name else f"{pkg}.{name}"


def _logcat_append(tag: str, message: str, prio: str = "I") -> None:
    now = time.time()
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
    with open(STATE / "logcat.txt", "a") as f:
        f.write(f"{stamp}  4242  4260 {prio} {tag}: {message}\n")


def _parse_am(args) -> tuple:
    component, extras, i = None, {}, 1
    while i < len(args):
        a = args[i]
        if a == "-n":
            component, i = args[i + 1], i + 2
        elif a in ("--ez", "--ei", "--es"):
            key, val = args[i + 1], args[i + 2]
            extras[key] = {"--ez": lambda v: v == "true", "--ei": int, "--es": str}[a](val)
            i += 3
        else:
            i += 1
    return component, extras


def am(args) -> int:
    if not args or args[0] != "start":
        print("am: only `am start` is simulated", file=sys.stderr)
        return 1
    component, extras = _parse_am(args)
    if not component or "/" not in component:
        print("Error: no component given", file=sys.stderr)
        return 1
    pkg, activity = component.split("/", 1)
    full = _full(pkg, activity)
    task = _packages() / pkg / "task"  # the app's task is alive (its activity stays up after a benchmark)
    if "-S" in args and task.exists():  # -S: force stop the target app before starting the activity
        task.unlink()
        print(f"Stopping: {pkg}")
    print(f"Starting: Intent {{ cmp={component} (has extras) }}")
    forced = config().get("am_error")
    if forced:  # what ActivityManagerShellCommand prints when startActivity throws
        print(f"Exception occurred while executing 'start':\n{forced}")
        return 255
    known = (_packages() / pkg / "activities")
    if not (_packages() / pkg).is_dir() or (known.is_file() and full not in known.read_text().split()):
        print("Error type 3")
        print(f"Error: Activity class {{{pkg}/{full}}} does not exist.")
        return 0
    if task.exists() and task.read_text() == full:
        # the intent equals the task's root intent (extras do not count): the task comes to the front,
        # no activity starts and the extras never reach the app (ActivityManagerShellCommand, START_TASK_TO_FRONT)
        print("Warning: Activity not started, its current task has been brought to the front")
        return 0
    task.write_text(full)
    print("Status: ok")
    print(f"Activity: {pkg}/{full}")
    print("ThisTime: 312\nTotalTime: 312\nWaitTime: 330\nComplete")
    _logcat_append("ActivityManager", f"Displayed {pkg}/{full}: +312ms")
    marked = _packages() / pkg / "benchmark"
    if extras.get("benchmark") and marked.is_file() and full in marked.read_text().split():
        _app_benchmark(pkg, extras)
    return 0


def _app_variant(pkg: str) -> str:
    with zipfile.ZipFile(_packages() / pkg / "base.apk") as z:
        found = [re.search(r"quant_(none|core|full)|(fp32|int8)-(xnnpack|portable|vulkan)", n)
                 for n in z.namelist() if n.startswith("assets/")]
    return next((m.group(0) for m in found if m), "quant_none")


def _app_benchmark(pkg: str, extras: dict) -> None:
    """What the generated app logs: progress lines, then one result line (or a crash, or nothing: a hang)."""
    bench = config().get("app_bench") or {}
    backend = extras.get("backend", "cpu")
    iters, warmup = extras.get("iters", 200), extras.get("warmup", 5)

    def progress(stage: str, done: int, of: int) -> None:
        _logcat_append(BENCH_TAG, PROGRESS_PREFIX + json.dumps({"backend": backend, "stage": stage, "done": done,
                                                                 "of": of}))

    progress("loaded", 0, iters)
    if bench.get("crash"):
        _logcat_append("AndroidRuntime", "FATAL EXCEPTION: pool-1-thread-1", "E")
        _logcat_append("AndroidRuntime", f"Process: {pkg}, PID: 4242", "E")
        _logcat_append("AndroidRuntime", "java.lang.OutOfMemoryError: Failed to allocate a 51380232 byte allocation",
                       "E")
        return
    progress("warmup", warmup, warmup)
    if bench.get("hang"):
        return
    for k in range(max(1, iters // 10), iters + 1, max(1, iters // 10)):
        progress("iter", k, iters)
    sdk = int(props().get("ro.build.version.sdk", "29"))
    variant = _app_variant(pkg)  # an ExecuTorch app has no NNAPI model: it runs nnapi requests on the CPU
    fell_back = backend == "nnapi" and (sdk < 29 or bool(bench.get("fell_back")) or not variant.startswith("quant_"))
    base = float(bench.get("cpu" if fell_back else backend, 20.0 if backend == "cpu" else 15.0))
    line = {
        "variant": variant, "backend": "cpu" if fell_back else backend, "requested": backend,
        "fell_back": fell_back, "iters": iters, "warmup": warmup,
        "median_ms": base, "p90_ms": round(base * 1.08, 3), "min_ms": round(base * 0.95, 3),
        "mean_ms": round(base * 1.01, 3), "error": None,
    }
    _logcat_append(BENCH_TAG, BENCH_PREFIX + json.dumps(line))


def logcat(args) -> int:
    fail = config().get("logcat_fail")
    if fail:
        print(fail, file=sys.stderr)
        return 1
    buf = STATE / "logcat.txt"
    if "-c" in args:
        buf.write_text("")
        return 0
    tags = None
    if "-s" in args:
        tags = {a.split(":")[0] for a in args[args.index("-s") + 1:] if not a.startswith("-")}
    pid = next((a.split("=", 1)[1] for a in args if a.startswith("--pid=")), None)  # logcat --pid=N (Android 7+)
    if buf.exists():
        for line in buf.read_text().splitlines():
            m = re.match(r"\S+ \S+\s+(\d+)\s+\d+ \w (\S+?)\s*: ", line)
            if (tags is None or (m and m.group(2) in tags)) and (pid is None or (m and m.group(1) == pid)):
                print(line)
    return 0


def _next_thermal_status() -> int:
    seq = config().get("thermal_status", [0])
    seq = seq if isinstance(seq, list) and seq else [int(seq or 0)]
    counter = STATE / "thermal_calls"
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    return int(seq[min(n, len(seq) - 1)])


def dumpsys(args) -> int:
    """``dumpsys thermalservice`` (ThermalManagerService.dump, Android 11+ Temperature lines) and ``battery``."""
    service = args[0] if args else ""
    if service == "thermalservice":
        status = _next_thermal_status()
        print("IsStatusOverride: false\nThermalEventListeners:\n\tcallbacks: 1\n\tkilled: false\n"
              "\tbroadcasts count: -1\nThermalStatusListeners:\n\tcallbacks: 1\n\tkilled: false\n"
              f"\tbroadcasts count: -1\nThermal Status: {status}\nCached temperatures:")
        print("HAL Ready: true\nHAL connection:\n\tThermalHAL 2.0 connected: yes\nCurrent temperatures from HAL:")
        skin = 33.0 + 4 * status
        print(f"\tTemperature{{mValue={skin + 8:.1f}, mType=0, mName=CPU0, mStatus={status}}}")
        print(f"\tTemperature{{mValue={skin:.1f}, mType=3, mName=skin, mStatus={status}}}")
        return 0
    if service == "battery":
        b = config().get("battery") or {}
        usb = bool(b.get("usb", True))
        print("Current Battery Service state:")
        print(f"  AC powered: false\n  USB powered: {str(usb).lower()}\n  Wireless powered: false")
        print("  Max charging current: 500000\n  Max charging voltage: 5000000\n  Charge counter: 2811000")
        print(f"  status: {int(b.get('status', 2 if usb else 3))}\n  health: 2\n  present: true")
        print(f"  level: {int(b.get('level', 87))}\n  scale: 100\n  voltage: 4181\n  temperature: 291")
        print("  technology: Li-ion")
        return 0
    print(f"Can't find service: {service}")
    return 0


def main() -> int:
    name, args = sys.argv[1], sys.argv[2:]
    return {"pm": pm, "am": am, "logcat": logcat, "dumpsys": dumpsys}[name](args)


if __name__ == "__main__":
    sys.exit(main())
