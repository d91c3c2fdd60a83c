"""NNAPI with CPU fallback (the generated ModelRunner.java) and the copy-once model cache (AssetCache.java),
run on the JVM: every fallback path, and a model copied from assets once per app version.

The model files are the working fakes in tests/appgen_support/jvm_fakes (a Module that fails to load or run
when its path says so); ModelRunner, Classifier and AppConfig are the generated sources, unchanged.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from appgen import AppSettings, make_app
from tests.appgen_support.models import scratch, tiny_models
from toolchain import records

FAKES = Path(__file__).resolve().parents[1] / "appgen_support" / "jvm_fakes"
PKG = "org.example.fallback"

PROBE = """package org.example.fallback;

import android.graphics.Bitmap;
import org.pytorch.Module;

public class Probe {
    static String q(String s) {
        return s == null ? "null" : "\\"" + s.replace("\\\\", "\\\\\\\\").replace("\\"", "\\\\\\"") + "\\"";
    }

    /** One scenario: device API level, requested backend, where the NNAPI model file is; one JSON line. */
    static void scenario(String name, int sdk, String requested, String nnapiPath, String cpuPath, int frames) {
        final int size = AppConfig.INPUT_SIZE;
        final Bitmap frame = Bitmap.createBitmap(new int[size * size], size, size, Bitmap.Config.ARGB_8888);
        final ModelRunner r = new ModelRunner(
                asset -> asset.equals(AppConfig.MODEL_NNAPI_ASSET) ? nnapiPath : cpuPath, null, sdk);
        String opened = null;
        String after = null;
        String error = null;
        int classified = 0;
        try {
            r.open(requested, frame);
            opened = r.classifier.backend;
            final long[] nanos = new long[1];
            for (int i = 0; i < frames; i++) {
                final float[] scores = r.classify(frame, nanos);
                if (scores.length == 1 && nanos[0] >= 0) {
                    classified++;
                }
            }
            after = r.classifier.backend;
        } catch (Exception e) {
            error = e.toString();
        }
        final int liveBeforeClose = Module.live;
        r.close();
        System.out.println("{\\"name\\": " + q(name) + ", \\"opened\\": " + q(opened) + ", \\"after\\": " + q(after)
                + ", \\"reason\\": " + q(r.fallbackReason) + ", \\"error\\": " + q(error)
                + ", \\"classified\\": " + classified + ", \\"live\\": " + liveBeforeClose
                + ", \\"live_after_close\\": " + Module.live + "}");
        Module.live = 0;
    }

    static int opens;

    /** AssetCache: copy on first use, reuse (also from a new instance = an app restart), copy again on update. */
    static void cache(String dir) throws Exception {
        final AssetCache.Opener opener = name -> {
            opens++;
            return new java.io.ByteArrayInputStream(("bytes of " + name).getBytes("UTF-8"));
        };
        final java.io.File d = new java.io.File(dir);
        final String first = new AssetCache(d, "1000", opener).path("m.pt");
        final int afterFirst = opens;
        new AssetCache(d, "1000", opener).path("m.pt");
        final int afterRestart = opens;
        new AssetCache(d, "2000", opener).path("m.pt");
        final int afterUpdate = opens;
        final String read = new String(new AssetCache(d, "2000", opener).read("labels.txt"), "UTF-8");
        System.out.println("{\\"name\\": \\"cache\\", \\"path\\": " + q(first) + ", \\"first\\": " + afterFirst
                + ", \\"restart\\": " + afterRestart + ", \\"update\\": " + afterUpdate + ", \\"read\\": " + q(read) + "}");
    }

    public static void main(String[] a) throws Exception {
        cache(a[0]);
        scenario("old-device", 28, "nnapi", "nnapi.pt", "cpu.pt", 2);
        scenario("nnapi-ok", 29, "nnapi", "nnapi.pt", "cpu.pt", 3);
        scenario("load-fails", 33, "nnapi", "nnapi-fail-load.pt", "cpu.pt", 2);
        scenario("first-run-fails", 33, "nnapi", "nnapi-fail-run-after-0.pt", "cpu.pt", 2);
        scenario("later-run-fails", 33, "nnapi", "nnapi-fail-run-after-2.pt", "cpu.pt", 3);
        scenario("cpu-asked", 33, "cpu", "nnapi.pt", "cpu.pt", 1);
        scenario("cpu-fails", 33, "cpu", "nnapi.pt", "cpu-fail-run-after-0.pt", 1);
        scenario("bad-backend", 33, "gpu", "nnapi.pt", "cpu.pt", 1);
    }
}
"""


def _run(project: Path, work: Path) -> dict:
    src = project / "app/src/main/java" / PKG.replace(".", "/")
    (work / "Probe.java").write_text(PROBE)
    sources = [*sorted(FAKES.rglob("*.java")), *(src / n for n in ("AppConfig.java", "Classifier.java",
                                                                   "ModelRunner.java", "AssetCache.java")),
               work / "Probe.java"]
    subprocess.run(["javac", "-d", work / "classes", *sources], check=True)
    files = work / "files"
    files.mkdir()
    out = subprocess.run(["java", "-cp", work / "classes", f"{PKG}.Probe", files], check=True, capture_output=True,
                         text=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    return {r["name"]: r for r in rows}


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    out = scratch("fallback") / "project"
    make_app(AppSettings(model="quant_core", models=tiny_models(), out=out, application_id=PKG,
                         build_dir=out.parent / "build"))
    return _run(out, tmp_path_factory.mktemp("fallback-java"))


def test_nnapi_runs_when_the_device_can(scenarios):
    ok = scenarios["nnapi-ok"]
    assert (ok["opened"], ok["after"], ok["reason"], ok["error"]) == ("nnapi", "nnapi", None, None)
    assert ok["classified"] == 3 and ok["live"] == 1 and ok["live_after_close"] == 0
    cpu = scenarios["cpu-asked"]
    assert (cpu["opened"], cpu["reason"], cpu["classified"]) == ("cpu", None, 1)


def test_below_api_29_the_cpu_model_runs_and_says_why(scenarios):
    old = scenarios["old-device"]
    assert (old["opened"], old["after"], old["classified"]) == ("cpu", "cpu", 2)
    assert old["reason"] == "Android API 28 < 29 (PyTorch's NNAPI needs Android 10)"


@pytest.mark.parametrize("name", ["load-fails", "first-run-fails"])
def test_an_nnapi_model_that_fails_to_load_or_run_falls_back(scenarios, name):
    row = scenarios[name]
    assert (row["opened"], row["after"], row["error"], row["classified"]) == ("cpu", "cpu", None, 2)
    assert row["reason"].startswith("the NNAPI model failed to load or run: java.lang.RuntimeException: fake: ")
    assert row["live"] == 1  # the failed NNAPI module was destroyed


def test_nnapi_failing_mid_stream_switches_to_cpu_once(scenarios):
    row = scenarios["later-run-fails"]
    # open's probe run + 1 frame on NNAPI, the 2nd frame fails there and is rerun on the CPU model, 3rd on CPU
    assert (row["opened"], row["after"], row["error"], row["classified"]) == ("nnapi", "cpu", None, 3)
    assert row["reason"] == ("the NNAPI model failed at run time: java.lang.RuntimeException: fake: "
                             "nnapi-fail-run-after-2.pt failed on run 3")
    assert row["live"] == 1


def test_cpu_failures_and_bad_backends_are_errors_not_fallbacks(scenarios):
    cpu = scenarios["cpu-fails"]
    assert cpu["error"] == "java.lang.RuntimeException: fake: cpu-fail-run-after-0.pt failed on run 1"
    assert cpu["reason"] is None and cpu["classified"] == 0
    bad = scenarios["bad-backend"]
    assert bad["error"] == "java.lang.IllegalArgumentException: backend must be cpu or nnapi (got gpu)"


def test_an_app_without_an_nnapi_model_runs_the_cpu_model(tmp_path):
    models = scratch("cpu-only") / "models"
    shutil.copytree(tiny_models(), models)
    data = json.loads((models / records.MANIFEST_NAME).read_text())
    data["files"] = [f for f in data["files"] if f["backend"] != "nnapi"]
    (models / records.MANIFEST_NAME).write_text(json.dumps(data))
    out = scratch("cpu-only-app") / "project"
    res = make_app(AppSettings(model="quant_none", models=models, out=out, application_id=PKG,
                               build_dir=out.parent / "build"))
    assert "quant_none has no NNAPI model: the app runs the CPU model only" in res.warnings
    assert sorted(p.name for p in (out / "app/src/main/assets").glob("*.pt")) == ["tiny_net-quant_none-cpu.pt"]
    row = _run(out, tmp_path)["nnapi-ok"]
    assert (row["opened"], row["classified"]) == ("cpu", 3)
    assert row["reason"] == "this app has no NNAPI model for quant_none"


def test_models_are_copied_from_assets_once_per_app_version(scenarios):
    row = scenarios["cache"]
    model = Path(row["path"])
    assert model.name == "m.pt" and model.read_text() == "bytes of m.pt"
    assert (model.parent / "m.pt.stamp").read_text() == "2000"  # the last (updated) app version
    assert (row["first"], row["restart"], row["update"]) == (1, 1, 2)  # copied, reused, copied again
    assert row["read"] == "bytes of labels.txt"
    assert sorted(p.name for p in model.parent.iterdir()) == ["m.pt", "m.pt.stamp"]  # no .partial left
