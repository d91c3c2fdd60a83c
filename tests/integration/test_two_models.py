"""Any number of models side by side in one output directory (issue 24 item 2): after a second `invoke convert
--model file.py:factory` into the default build/models, convert's own verify, make-app and `invoke all` keep
working (verify exited 2 before: "variant 'quant_core' is ambiguous"; all failed at make-app)."""

from __future__ import annotations

import json
import shutil

from tests.adversarial.harness import ROOT, run_invoke

SUPPORT = ROOT / "tests" / "converter_support" / "user_models.py"
FAST = {"INVOKE_CONVERT_CALIBRATION_COUNT": "8"}


def test_a_second_model_beside_the_first_keeps_the_pipeline_working(tmp_path):
    nets = tmp_path / "nets.py"
    shutil.copy(SUPPORT, nets)
    nets.write_text(nets.read_text() + "\n\ndef second():\n    return Tiny()\n")
    for factory in ("tiny", "second"):
        out = run_invoke(["convert", "--model", f"nets.py:{factory}", "--weights", "random"], tmp_path, FAST)
        assert out.code == 0, out.out[-3000:] + out.err[-3000:]
        assert "ambiguous" not in out.text
    variants = {f["variant"] for f in json.loads((tmp_path / "build/models/manifest.json").read_text())["files"]}
    assert {"quant_full"} <= variants and len(json.loads((tmp_path / "build/models/manifest.json").read_text())
                                               ["files"]) >= 12  # both models' files, side by side
    (tmp_path / "mine.yaml").write_text("convert:\n  model: nets.py:second\n")
    skip = "build-android,build-app,check-compat,deploy,report,bench"
    done = run_invoke(["-f", "mine.yaml", "all", "--weights", "random", "--skip", skip], tmp_path, FAST)
    assert done.code == 0, done.out[-3000:] + done.err[-3000:]
    app = json.loads((tmp_path / "build/app/torchdroid-app.json").read_text())
    assert app["request"]["variant"] == "second-quant_full", app["request"]


def test_all_goes_on_with_the_cpu_models_when_nnapi_refuses_the_model(tmp_path):
    """Issue 20 item 7, through `invoke all`: a model NNAPI cannot take (hardswish) gets its CPU models, verify skips
    the NNAPI side with the reason, make-app makes a CPU-only app, and the run succeeds."""
    (tmp_path / "mine.yaml").write_text(f"convert:\n  model: {SUPPORT}:tiny_hardswish\n")
    skip = "build-android,build-app,check-compat,deploy,report,bench"
    done = run_invoke(["-f", "mine.yaml", "all", "--weights", "random", "--skip", skip], tmp_path, FAST)
    assert done.code == 0, done.out[-3000:] + done.err[-3000:]
    manifest = json.loads((tmp_path / "build/models/manifest.json").read_text())
    assert {f["backend"] for f in manifest["files"]} == {"cpu"} and manifest["nnapi_refused"], manifest.keys()
    summary = json.loads((tmp_path / "build/all.json").read_text())
    assert {s["stage"]: s["status"] for s in summary["stages"]}["make-app"] == "ran", summary["stages"]
    assert (tmp_path / "build/app/torchdroid-app.json").is_file()
