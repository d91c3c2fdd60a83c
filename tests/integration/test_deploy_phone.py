"""Opt-in: a real Android phone on the user's adb server (``-m device``; off by default, no phone here).

    adb devices                                    # the phone must be listed as `device`
    TORCHDROID_DEVICE_SERIAL=SERIAL /work/venv/bin/python -m pytest -m device tests/integration/test_deploy_phone.py

The adb server is the one on ``ANDROID_ADB_SERVER_PORT`` (default 5037); without
``TORCHDROID_DEVICE_SERIAL`` the first device in state ``device`` is used.  The push test needs
nothing else; the benchmark test needs the artefacts of ``invoke build-android`` and ``invoke convert``
(``TORCHDROID_DEVICE_BUILD_INFO`` and ``TORCHDROID_DEVICE_MODELS`` override build/android/<abi>/build-info.json
and build/models) and is skipped, saying which is missing, otherwise.  Everything goes to
/data/local/tmp/torchdroid/pytest-phone, which the tests remove again.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from deploy import BenchOptions, DeploySettings, deploy
from deploy.adb import AdbServer
from deploy.preflight import DeviceFacts
from deploy.push import PushItem, push_all
from toolchain.errors import TorchdroidError
from toolchain.fsutil import sha256_file

pytestmark = pytest.mark.device

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "pytest-phone"
DEVICE_DIR = f"/data/local/tmp/torchdroid/{PROJECT}"


@pytest.fixture(scope="module")
def phone():
    try:
        server = AdbServer.locate("127.0.0.1", None, timeout=60)
    except TorchdroidError as e:
        pytest.fail(str(e))
    states = server.devices()
    serial = os.environ.get("TORCHDROID_DEVICE_SERIAL") or next((s for s, st in states.items() if st == "device"), None)
    if serial is None or states.get(serial) != "device":
        pytest.fail(f"no usable phone on {server.host}:{server.port}: adb sees {states or 'nothing'} "
                    "(set TORCHDROID_DEVICE_SERIAL, accept the USB debugging prompt)")
    dev = server.device(serial, timeout=60)
    yield server, dev
    dev.shell(f"rm -rf {shlex.quote(DEVICE_DIR)}")


def test_phone_facts_and_verified_idempotent_push(phone, tmp_path):
    server, dev = phone
    props, df, _ = dev.probe("/data/local/tmp")
    facts = DeviceFacts.from_props(dev.serial, props)
    assert facts.sdk >= 21 and facts.abis and facts.model != "?"
    files = []
    for i, size in enumerate((3_000_000, 70_000, 1)):  # several sync chunks, less than one, a single byte
        p = tmp_path / f"blob{i}.bin"
        p.write_bytes(os.urandom(size))
        files.append(PushItem(p, p.name, 0o644 if i else 0o755, sha256_file(p)))
    first = push_all(dev, DEVICE_DIR, files)
    assert sorted(o.name for o in first if o.pushed) == sorted(f.name for f in files)
    out = dev.shell(f"cd {DEVICE_DIR} && sha256sum blob*.bin && stat -c '%a %n' blob*.bin", check=True).output
    for f in files:
        assert f"{f.sha256}  {f.name}" in out
    assert "755 blob0.bin" in out and "644 blob1.bin" in out
    again = push_all(dev, DEVICE_DIR, files)
    assert not any(o.pushed for o in again) and sum(o.bytes for o in again) == 0
    assert ".partial-" not in dev.shell(f"ls -a {DEVICE_DIR}", check=True).output


def test_phone_benchmark_cpu_models(phone, tmp_path):
    server, dev = phone
    abi = DeviceFacts.from_props(dev.serial, dev.probe("/data/local/tmp")[0]).abis[0]
    build_info = Path(os.environ.get("TORCHDROID_DEVICE_BUILD_INFO")
                      or ROOT / "build" / "android" / abi / "build-info.json")
    models = Path(os.environ.get("TORCHDROID_DEVICE_MODELS") or ROOT / "build" / "models")
    missing = [str(p) for p in (build_info, models / "manifest.json") if not p.is_file()]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}: run `invoke build-android --abi {abi}` and `invoke convert`")
    result = deploy(DeploySettings(models=models, results=tmp_path / "results", build_info=build_info,
                                   install=False, serials=(dev.serial,), adb_port=server.port, project=PROJECT,
                                   options=BenchOptions(warmup=2, iters=20, repeat=2)), on_status=lambda *_: None)
    (rep,) = result.devices
    assert not rep.errors, rep.errors
    cpu = [r for r in rep.rows if r.backend == "cpu"]
    assert cpu and all(r.status == "ok" and r.samples == 40 and 0 < r.min_ms <= r.median_ms <= r.p90_ms
                       for r in cpu), [(r.model_file, r.status, r.reason) for r in cpu]
    if rep.facts.nnapi_ok:
        assert all(r.status in ("ok", "failed") for r in rep.rows if r.backend == "nnapi")
    assert (tmp_path / "results" / "results.sqlite").is_file()
