"""Install the app: push the APK (skip-by-hash), ``pm install -r``; failures mapped to cause and remedy.

torchdroid never uninstalls an app itself: uninstalling deletes the user's app data.
"""

from __future__ import annotations

import logging
import re
import shlex
from pathlib import Path
from typing import Optional, Tuple

from toolchain.errors import DeviceError, command

from .adb import Device
from .push import PushItem, push_all

log = logging.getLogger(__name__)

APK_NAME = "app.apk"
_FAILURE = re.compile(r"Failure \[([A-Z_]+)(?::\s*([^\]]*))?\]")


def install_remedies(serial: str, package: str) -> dict:
    uninstall = f"adb -s {serial} uninstall {package}"
    return {
        "INSTALL_FAILED_UPDATE_INCOMPATIBLE": (
            f"an installed {package} is signed with another key (a build from another machine or the store)",
            f"uninstall it yourself — this deletes its data: `{uninstall}` — then run `invoke deploy` again "
            "(torchdroid never uninstalls for you)"),
        "INSTALL_FAILED_VERSION_DOWNGRADE": (
            f"the installed {package} has a higher versionCode than this APK",
            f"raise the versionCode and `invoke build-app` again, or uninstall it yourself (deletes its data): "
            f"`{uninstall}`"),
        "INSTALL_FAILED_INSUFFICIENT_STORAGE": (
            "the device has no room for the app",
            "free space on the phone (Settings > Storage), then run the deploy again"),
        "INSTALL_FAILED_NO_MATCHING_ABIS": (
            "the APK has native libraries only for ABIs this device does not run",
            "add the device's ABI (`adb shell getprop ro.product.cpu.abilist`) to app.abi_filters and "
            "`invoke make-app` + `invoke build-app` again"),
        "INSTALL_FAILED_OLDER_SDK": (
            "the app's minSdkVersion is higher than the device's Android version",
            "lower app.min_sdk (config) and rebuild the app, or use a newer device"),
        "INSTALL_PARSE_FAILED_NO_CERTIFICATES": (
            "the APK is not signed",
            "build it with `invoke build-app` (it signs with the debug key), or sign it with apksigner"),
        "INSTALL_PARSE_FAILED_NOT_APK": (
            "the file is not an APK",
            "pass the .apk that `invoke build-app` wrote (--apk PATH)"),
        "INSTALL_FAILED_INVALID_APK": (
            "the APK is damaged or incomplete",
            "rebuild it with `invoke build-app`"),
        "INSTALL_FAILED_USER_RESTRICTED": (
            "installing over USB is disabled on this device (common on Xiaomi/MIUI)",
            "enable Developer options > \"Install via USB\" and accept the prompt on the phone"),
        "INSTALL_FAILED_TEST_ONLY": (
            "the APK is marked test-only",
            "torchdroid installs with -t; if this persists, build a non-test APK"),
        "INSTALL_FAILED_VERIFICATION_FAILURE": (
            "Play Protect / package verification rejected the APK",
            "disable \"Verify apps over USB\" in Developer options, then deploy again"),
    }


def parse_failure(output: str) -> Tuple[Optional[str], str]:
    m = _FAILURE.search(output)
    if m:
        return m.group(1), (m.group(2) or "").strip()
    return None, output.strip().splitlines()[-1] if output.strip() else ""


def install_error(serial: str, package: str, output: str) -> DeviceError:
    reason, detail = parse_failure(output)
    cause, remedy = install_remedies(serial, package).get(
        reason or "", ("the package manager refused the APK",
                       f"look at `{command('adb', '-s', serial, 'logcat', '-d', '-s', 'PackageManager')}` for the reason"))
    return DeviceError(
        f"installing {package} on {serial} failed: {reason or 'unknown failure'}" + (f" ({detail})" if detail else ""),
        cause=cause, remedy=remedy,
    )


def install_apk(device: Device, directory: str, apk: Path, package: str) -> bool:
    """Install ``apk`` unless the same APK is already installed; return True when ``pm install`` ran."""
    (pushed,) = push_all(device, directory, [PushItem(apk, APK_NAME, 0o644)])
    marker = f"{directory}/.installed-{package}"
    qmarker = shlex.quote(marker)
    check = device.shell(f"pm path {shlex.quote(package)} >/dev/null 2>&1 && cat {qmarker} 2>/dev/null; exit 0")
    if check.output.strip() == pushed.sha256:
        log.info("[%s] %s is already installed from this APK", device.serial, package)
        return False
    failure = device.install(pushed.remote)
    if failure is not None:
        raise install_error(device.serial, package, failure)
    device.shell(f"echo {pushed.sha256} > {qmarker}", check=True, what="recording the installed APK")
    log.info("[%s] installed %s", device.serial, package)
    return True
