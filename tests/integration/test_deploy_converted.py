"""Deploy what the real converter wrote (a tiny model, random weights) to a virtual device."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from deploy import BenchOptions, DeploySettings, deploy
from tests.deploy_support.fixtures import build_standin, write_build_info
from tests.virtual_device.harness import adb_with_devices
from toolchain.fsutil import sha256_file
from toolchain.records import ConvertManifest

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")

ROOT = Path(__file__).resolve().parents[2]


def test_deploy_real_converted_models(tmp_path):
    from converter import ConvertSettings, convert

    convert(ConvertSettings(model=f"{ROOT / 'tests' / 'converter_support' / 'user_models.py'}:tiny",
                            modes=("full",), weights="random", calibration_count=4, out=tmp_path / "models",
                            build_dir=tmp_path / "build"))
    manifest = ConvertManifest.load(tmp_path / "models")
    commit = manifest.files[0].torch_git_version
    assert commit  # the converter records which torch wrote the files; deploy compares it with the binary's
    binary = build_standin(tmp_path / "bin")
    bi = write_build_info(tmp_path / "android", binary, commit=commit)
    with adb_with_devices(tmp_path / "adb", {"d": {}}) as (server, devs):
        result = deploy(DeploySettings(models=tmp_path / "models", results=tmp_path / "results", build_info=bi,
                                       install=False, adb_port=server.port, project="real",
                                       options=BenchOptions(iters=10, repeat=1)))
        d = devs["d"].path("/data/local/tmp/torchdroid/real")
        for f in manifest.files:
            assert sha256_file(d / f.file) == f.sha256
    assert not result.failed
    assert sorted((r.stem, r.mode, r.backend, r.status) for r in result.rows) == [
        ("tiny", "full", "cpu", "ok"), ("tiny", "full", "nnapi", "ok")]
    # CPU models converted without optimize_for_mobile (no XNNPACK in this torch) are labelled in deploy and report
    import torch

    if not torch._C._is_xnnpack_enabled():
        assert any("tiny-quant_full-cpu.pt" in w and "optimize_for_mobile" in w for w in result.warnings)
        from deploy.report import ReportSettings, make_report

        rep = make_report(ReportSettings(results=tmp_path / "results"))
        assert rep.notes and "optimize_for_mobile" in rep.notes[0]
        assert "id='cpu-baseline'" in rep.html.read_text()
