"""The report says when the app's and executor_runner's ExecuTorch numbers come from different runtimes (EA8)."""

from __future__ import annotations

from deploy import executorch
from toolchain.records import APP_INFO_KIND, APP_INFO_NAME, APP_INFO_SCHEMA, BuildInfo, ResultRow, write_record

PKG = "org.torchdroid.benchmark"


def _row(variant="fp32-xnnpack", source="app", status="ok"):
    return ResultRow("S1", "Pixel", "b", "14", 34, "", "mobilenetv2", variant, variant, "cpu", source, status,
                     model_file=f"{PKG} (app)", median_ms=12.0, run_id=1)


def _runner(tmp_path, version="1.5.1"):
    body = {"lane": "executorch-1.5.1", "runtime": "executorch", "abi": "arm64-v8a", "artefacts": []}
    if version:
        body["executorch_version"] = version
    return BuildInfo.create(tmp_path / "runner" / "build-info.json", body).path


def _app(tmp_path, runtime):
    app = tmp_path / "app"
    app.mkdir()
    write_record(app / APP_INFO_NAME, APP_INFO_KIND, APP_INFO_SCHEMA, {
        "application_id": PKG, "activity": ".MainActivity", "variant": "fp32-xnnpack", "runtime": runtime})
    return app


def _notes(tmp_path, app_runtime, runner_version="1.5.1", rows=None):
    build_info = str(_runner(tmp_path, runner_version))
    settings = {"app_dir": str(_app(tmp_path, app_runtime))} if app_runtime is not None else {}
    return executorch.runtime_notes(build_info, rows or [_row()], settings)


def test_an_app_on_an_older_executorch_android_is_called_a_different_runtime(tmp_path):
    notes = _notes(tmp_path, {"library": "executorch", "source": "maven", "executorch_android": "1.0.1"})
    assert len(notes) == 1 and notes[0].startswith("DIFFERENT RUNTIMES")
    assert "executorch-android:1.0.1" in notes[0] and "ExecuTorch 1.5.1" in notes[0]
    assert "--executorch-android 1.5.1" in notes[0]


def test_the_same_release_is_said_to_be_one_runtime(tmp_path):
    notes = _notes(tmp_path, {"library": "executorch", "source": "maven", "executorch_android": "1.5.1"})
    assert notes == [f"same runtime: the app {PKG} (org.pytorch:executorch-android:1.5.1) and executor_runner both "
                     "run ExecuTorch 1.5.1"]


def test_unknown_versions_are_said_to_be_unknown_never_the_same(tmp_path):
    aar = _notes(tmp_path / "a", {"library": "executorch", "source": "aar", "aar": {"source": "/x/executorch.aar"}})
    assert aar[0].startswith("RUNTIMES NOT KNOWN") and "/x/executorch.aar" in aar[0]
    no_app = _notes(tmp_path / "b", None)
    assert no_app[0].startswith("RUNTIMES NOT KNOWN") and "no app-info" in no_app[0]
    no_runner = _notes(tmp_path / "c", {"library": "executorch", "executorch_android": "1.5.1"}, runner_version=None)
    assert no_runner[0].startswith("RUNTIMES NOT KNOWN") and "records no executorch_version" in no_runner[0]


def test_torchscript_app_rows_and_failed_rows_need_no_note(tmp_path):
    rows = [_row("quant_full"), _row(status="failed"), _row(source="binary")]
    assert _notes(tmp_path, {"library": "executorch", "executorch_android": "1.0.1"}, rows=rows) == []
