"""Stand-ins for the Android-only shell commands of the virtual device (getprop and df are sh scripts).

``pm install/list/path``, ``am start`` and ``logcat`` with
the output formats of the real ones (toybox / Android 10).  State lives in
``$VDEV_STATE`` (props.json, device.json, logcat.txt, packages/).
"""

import hashlib
import json
import os
import re
import shutil
import sys
import time
import zipfile
from pathlib import Path

STATE = Path(os.environ["VDEV_STATE"])
ROOT = Path(os.environ["VDEV_ROOT"])
BENCH_TAG = "torchdroid"
BENCH_PREFIX = "TORCHDROID_BENCH "


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
            manifest = z.read("AndroidManifest.xml").decode("utf-8", "replace")
            names = z.namelist()
            cert = z.read("META-INF/CERT.RSA") if "META-INF/CERT.RSA" in names else b""
    except (zipfile.BadZipFile, KeyError) as e:
        return _fail(f"INSTALL_PARSE_FAILED_NOT_APK: Failed to parse {apk}: {e}")
    if not cert:
        return _fail(f"INSTALL_PARSE_FAILED_NO_CERTIFICATES: Failed to collect certificates from {apk}")
    m = re.search(r'package="([\w.]+)"', manifest)
    if not m:
        return _fail("INSTALL_PARSE_FAILED_MANIFEST_MALFORMED: no package name")
    pkg = m.group(1)
    msdk = re.search(r'minSdkVersion="(\d+)"', manifest)
    sdk = int(props().get("ro.build.version.sdk", "29"))
    if msdk and int(msdk.group(1)) > sdk:
        return _fail(f"INSTALL_FAILED_OLDER_SDK: Failed parse during installPackageLI: /data/app/vmdl.tmp/base.apk "
                     f"(at Binary XML file line #7): Requires newer sdk version #{msdk.group(1)} (current version is #{sdk})")
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
    print("Success")
    return 0


def _logcat_append(tag: str, message: str, prio: str = "I") -> None:
    now = time.time()
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
    with open(STATE / "logcat.txt", "a") as f:
        f.write(f"{stamp}  4242  4260 {prio} {tag}: {message}\n")


def am(args) -> int:
    if not args or args[0] != "start":
        print("am: only `am start` is simulated", file=sys.stderr)
        return 1
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
    if not component or "/" not in component:
        print("Error: no component given", file=sys.stderr)
        return 1
    pkg, activity = component.split("/", 1)
    full = pkg + activity if activity.startswith(".") else activity
    print(f"Starting: Intent {{ cmp={component} (has extras) }}")
    if not (_packages() / pkg).is_dir():
        print("Error type 3")
        print(f"Error: Activity class {{{pkg}/{full}}} does not exist.")
        return 0
    print("Status: ok")
    print(f"Activity: {pkg}/{full}")
    print("ThisTime: 312\nTotalTime: 312\nWaitTime: 330\nComplete")
    if extras.get("benchmark"):
        bench = config().get("app_bench") or {}
        backend = extras.get("backend", "cpu")
        with zipfile.ZipFile(_packages() / pkg / "base.apk") as z:
            found = [re.search(r"quant_(none|core|full)", n) for n in z.namelist()]
        variant = next((m.group(0) for m in found if m), "quant_none")
        sdk = int(props().get("ro.build.version.sdk", "29"))
        fell_back = backend == "nnapi" and (sdk < 29 or bool(bench.get("fell_back")))
        base = float(bench.get("cpu" if fell_back else backend, 20.0 if backend == "cpu" else 15.0))
        line = {
            "variant": variant, "backend": backend, "fell_back": fell_back,
            "iters": extras.get("iters", 200), "warmup": extras.get("warmup", 5),
            "median_ms": base, "p90_ms": round(base * 1.08, 3), "min_ms": round(base * 0.95, 3),
            "mean_ms": round(base * 1.01, 3), "error": None,
        }
        _logcat_append("ActivityManager", f"Displayed {pkg}/{full}: +312ms")
        _logcat_append(BENCH_TAG, BENCH_PREFIX + json.dumps(line))
    return 0


def logcat(args) -> int:
    buf = STATE / "logcat.txt"
    if "-c" in args:
        buf.write_text("")
        return 0
    tags = None
    if "-s" in args:
        tags = {a.split(":")[0] for a in args[args.index("-s") + 1:] if not a.startswith("-")}
    if buf.exists():
        for line in buf.read_text().splitlines():
            m = re.match(r"\S+ \S+\s+\d+\s+\d+ \w (\S+?): ", line)
            if tags is None or (m and m.group(1) in tags):
                print(line)
    return 0


def main() -> int:
    name, args = sys.argv[1], sys.argv[2:]
    return {"pm": pm, "am": am, "logcat": logcat}[name](args)


if __name__ == "__main__":
    sys.exit(main())
