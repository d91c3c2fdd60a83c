"""The three ways a user deploys, from the command line in a fresh directory: a binary only, an APK only, both."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.deploy_support.fixtures import make_apk, write_build_info, write_models
from tests.adversarial.harness import run_invoke
from tests.virtual_device.harness import adb_with_devices
from toolchain.records import DeployResults, deploy_results_path

pytestmark = pytest.mark.skipif(shutil.which("adb") is None or shutil.which("aapt") is None, reason="needs adb, aapt")
FAST = ["--iter", "5", "--repeat", "1", "--warmup", "1"]


def _rows(work: Path):
    """The rows of the latest run, through the one reader of the deploy-results record."""
    return [r.to_dict() for r in DeployResults.load(deploy_results_path(work / "build" / "results", "latest")).rows]


def test_binary_only_apk_only_and_both(tmp_path, standin):
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    binary = work / "bin" / "speed_benchmark_torch"
    shutil.copy2(standin, binary)
    write_models(work / "models", ("full",), size=2000)
    with adb_with_devices(tmp_path / "adb2", {"d": {"props": {"ro.product.cpu.abilist": "x86_64"}}}) as (server, devs):
        env = {"ANDROID_ADB_SERVER_PORT": str(server.port)}
        x86 = ["--serial", devs["d"].serial]
        out = run_invoke(["deploy", *x86, "--binary", "bin/speed_benchmark_torch", "--models", "models", *FAST], work, env)
        assert out.code == 0, out.text
        assert {(r["source"], r["status"]) for r in _rows(work)} == {("binary", "ok")}

        # 2. an APK only: no build-info, no binary, no converted models needed
        only_apk = tmp_path / "apk-only"
        make_apk(only_apk / "demo.apk", package="com.example.demo", activity=".Main", variant="quant_none",
                 abis=("x86_64",))
        out = run_invoke(["deploy", *x86, "--apk", "demo.apk", *FAST], only_apk, env)
        assert out.code == 0, out.text
        rows = _rows(only_apk)
        assert {(r["source"], r["status"], r["variant"]) for r in rows} == {("app", "ok", "quant_none")}
        assert "am start -S -W -n com.example.demo/com.example.demo.Main" in (devs["d"].state_dir / "device.log").read_text()

        # 3. both, the binary from its build-info record
        write_build_info(work / "build" / "android" / "x86_64", binary, abi="x86_64")
        make_apk(work / "demo.apk", package="com.example.demo", activity=".Main", abis=("x86_64",))
        out = run_invoke(["deploy", *x86, "--build-info", "build/android/x86_64/build-info.json", "--apk", "demo.apk",
                          "--models", "models", *FAST], work, env)
        assert out.code == 0, out.text
        assert {r["source"] for r in _rows(work) if r["status"] == "ok"} == {"binary", "app"}


def test_an_executorch_app_is_deployed_under_its_program_variant_on_the_cpu_only(tmp_path):
    """`make-app --model fp32-xnnpack` packages `<stem>-fp32-xnnpack.pte` and ExecuTorch's runtime: deploy names
    its rows after the program (not `unknown`) and runs only the CPU benchmark (the app has no NNAPI model)."""
    work = tmp_path / "et-app"
    make_apk(work / "et.apk", package="com.example.et", activity=".MainActivity", variant="fp32-xnnpack",
             abis=("x86_64",))
    with adb_with_devices(tmp_path / "adb3", {"d": {"props": {"ro.product.cpu.abilist": "x86_64"}}}) as (server, devs):
        out = run_invoke(["deploy", "--serial", devs["d"].serial, "--apk", "et.apk", *FAST], work,
                         {"ANDROID_ADB_SERVER_PORT": str(server.port)})
        assert out.code == 0, out.text
        rows = _rows(work)
        assert [(r["source"], r["status"], r["variant"], r["stem"], r["backend"]) for r in rows] == \
            [("app", "ok", "fp32-xnnpack", "mobilenetv2", "cpu")]
        log = (devs["d"].state_dir / "device.log").read_text()
        assert "--es backend cpu" in log and "--es backend nnapi" not in log
