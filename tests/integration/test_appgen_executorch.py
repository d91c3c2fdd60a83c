"""make-app on ExecuTorch's Java API: the same app around a .pte program from `invoke convert --format executorch`.

The programs are real converter output (the tiny user model, converted once per session). The generated Java is
compiled with javac against tests/java_stubs/org/pytorch/executorch (signatures from the upstream sources,
docs/facts.md EA1-EA3), and its Classifier and ModelRunner run on the JVM with the working fakes in
tests/appgen_support/jvm_fakes/org/pytorch/executorch.
"""

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from appgen import AppSettings, assets, make_app
from tests.appgen_support import app_input
from tests.appgen_support.javac import compile_app
from tests.appgen_support.java_probe import probe_head
from tests.appgen_support.models import scratch, tiny_models, tiny_programs
from toolchain import pins, records
from toolchain.errors import RecordError, ToolFailed, UsageError

pytestmark = pytest.mark.slow  # the tiny model lowered to four ExecuTorch programs (~30 s)

FAKES = Path(__file__).resolve().parents[1] / "appgen_support" / "jvm_fakes"
APP_ID = "com.example.et_app"
JAVA = "app/src/main/java/com/example/et_app"


def _make(variant, models=None, **kw):
    out = scratch(f"et-{variant}") / "project"
    settings = {"model": variant, "models": models or tiny_programs(), "out": out, "application_id": APP_ID,
                "abi_filters": ("arm64-v8a", "x86_64"), "build_dir": out.parent / "build", "wrapper_jar": False}
    settings.update(kw)
    return make_app(AppSettings(**settings))


@pytest.fixture(scope="module")
def rendered():
    return {v: _make(v) for v in ("fp32-xnnpack", "int8-xnnpack", "fp32-portable")}


@pytest.mark.parametrize("variant", ["fp32-xnnpack", "int8-xnnpack", "fp32-portable"])
def test_a_program_becomes_the_same_app_on_executorch(rendered, variant):
    res = rendered[variant]
    root = res.out
    gradle = (root / "app/build.gradle").read_text()
    assert f'implementation "{pins.EXECUTORCH_ANDROID_ARTIFACT}:{pins.EXECUTORCH_ANDROID_DEFAULT}"' in gradle
    assert "org.pytorch:pytorch_android" not in gradle and "com.facebook" not in gradle  # the POM brings fbjni, soloader
    assert "minSdkVersion 23" in gradle  # the library's minSdk; the default 21 is raised, and said so
    assert any("minSdk raised from 21 to 23" in n for n in res.notes)

    pte = next(f for f in json.loads((tiny_programs() / "manifest.json").read_text())["executorch"]["files"]
               if f["file"] == f"tiny-{variant}.pte")
    asset = root / "app/src/main/assets" / f"tiny-{variant}.pte"
    assert asset.read_bytes() == (tiny_programs() / pte["file"]).read_bytes()
    assert sorted(p.name for p in asset.parent.iterdir()) == sorted(["labels.txt", "sample.jpg", asset.name])

    config = (root / JAVA / "AppConfig.java").read_text()
    assert f'MODEL_CPU_ASSET = "{asset.name}";' in config and 'MODEL_NNAPI_ASSET = "";' in config
    assert 'INPUT_MODE = "float32";' in config and "NUM_CLASSES = 10;" in config
    classifier = (root / JAVA / "Classifier.java").read_text()
    assert "import org.pytorch.executorch.EValue;" in classifier and "org.pytorch.IValue" not in classifier
    assert "Tensor.fromBlob(floatInput, new long[] {1, 3, size, size})" in classifier  # one buffer, allocated once
    main = (root / JAVA / "MainActivity.java").read_text()
    assert 'backend == null ? "cpu" : backend' in main and 'open("cpu");' in main

    info = records.AppInfo.load(root)
    assert info.variant == variant and info.models == {asset.name: pte["sha256"]}
    assert info.runtime["library"] == "executorch" and info.runtime["source"] == "maven"
    assert info.runtime["executorch_android"] == pins.EXECUTORCH_ANDROID_DEFAULT
    assert info.runtime["matches_converter"] is True  # 1.5.1 from Maven, the program written by 1.5.1 (EA7)
    assert not any("that wrote" in w for w in res.warnings)
    assert info.extra["converter_executorch"]["version"] == pte["executorch"]["version"]
    assert info.assets[asset.name]["delegate"] == pte["delegate"] and info.min_sdk == 23


@pytest.mark.parametrize("variant", ["fp32-xnnpack", "int8-xnnpack"])
def test_the_generated_java_compiles_against_the_executorch_stubs(rendered, variant, tmp_path):
    names = {p.name for p in compile_app(rendered[variant].out, APP_ID, tmp_path)}
    assert {"MainActivity.class", "Classifier.class", "ModelRunner.class", "BenchStats.class"} <= names


@pytest.mark.parametrize("wrong, right, error", [
    # pytorch_android's shape: forward returns one IValue; ExecuTorch's returns EValue[]
    ("module.forward(EValue.from(inputTensor))[0].toTensor()", "module.forward(EValue.from(inputTensor)).toTensor()",
     "cannot find symbol"),
    ("import org.pytorch.executorch.EValue;", "import org.pytorch.executorch.IValue;", "cannot find symbol"),
    # Module is not Closeable in executorch-android 1.0.1 (a version --executorch-android may still choose: the
    # generated code uses only what 1.0.1 and the Kotlin releases share)
    ("        module.destroy();", "        try (Module m = module) { m.forward(); }", "AutoCloseable"),
])
def test_the_stubs_reject_what_the_real_api_does_not_have(rendered, wrong, right, error, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(rendered["fp32-xnnpack"].out, project)
    source = project / JAVA / "Classifier.java"
    text = source.read_text()
    assert wrong in text
    source.write_text(text.replace(wrong, right))
    with pytest.raises(ToolFailed) as ei:
        compile_app(project, APP_ID, tmp_path / "work")
    assert error in "\n".join(ei.value.tail or []) + str(ei.value)


PROBE = probe_head("com.example.et_app", "org.pytorch.executorch") + """
    static String q(String s) {
        return s == null ? "null" : "\\"" + s.replace("\\\\", "\\\\\\\\").replace("\\"", "\\\\\\"") + "\\"";
    }

    static void scenario(String name, String requested, String path) {
        final int size = AppConfig.INPUT_SIZE;
        final Bitmap frame = Bitmap.createBitmap(new int[size * size], size, size, Bitmap.Config.ARGB_8888);
        final ModelRunner r = new ModelRunner(asset -> path, null, 33);
        String opened = null;
        String error = null;
        try {
            r.open(requested, frame);
            opened = r.classifier.backend;
            r.classify(frame, new long[1]);
        } catch (Exception e) {
            error = e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        r.close();
        System.out.println("{\\"name\\": " + q(name) + ", \\"opened\\": " + q(opened) + ", \\"reason\\": "
                + q(r.fallbackReason) + ", \\"error\\": " + q(error) + ", \\"live\\": " + Module.live + "}");
    }

    public static void main(String[] a) throws Exception {
        int size = AppConfig.INPUT_SIZE;
        Classifier c = new Classifier("cpu", a[2], null);
        byte[] noise = new byte[3 * size * size];
        new java.util.Random(1).nextBytes(noise);
        c.fill(frame(noise, size));
        c.run();
        Tensor first = Module.lastInputs[0].toTensor();
        c.fill(frame(Files.readAllBytes(Paths.get(a[0])), size));
        float[] scores = c.run();
        Tensor t = Module.lastInputs[0].toTensor();
        System.out.println("same_tensor=" + (t == first) + " shape=" + java.util.Arrays.toString(t.shape())
                + " scores=" + scores.length);
        try (FileOutputStream out = new FileOutputStream(a[1])) {
            float[] f = t.getDataAsFloatArray();
            ByteBuffer b = ByteBuffer.allocate(4 * f.length).order(ByteOrder.LITTLE_ENDIAN);
            for (float v : f) {
                b.putFloat(v);
            }
            out.write(b.array());
        }
        c.close();
        scenario("cpu", "cpu", a[2]);
        scenario("nnapi-asked", "nnapi", a[2]);
        scenario("missing-file", "cpu", a[2] + ".missing");
        scenario("fails-at-run", "cpu", a[3]);
    }
}
"""


def test_the_classifier_and_runner_run_on_the_jvm(rendered, tmp_path):
    """The generated Classifier fills the host pipeline's input into one reused Tensor; ModelRunner has no NNAPI."""
    root = rendered["fp32-xnnpack"].out
    src = root / JAVA
    (tmp_path / "Probe.java").write_text(PROBE)
    sources = [*sorted(FAKES.rglob("*.java")), *(src / n for n in ("AppConfig.java", "Classifier.java",
                                                                   "ModelRunner.java")), tmp_path / "Probe.java"]
    subprocess.run(["javac", "-d", tmp_path / "classes", *sources], check=True)
    sample = root / "app/src/main/assets/sample.jpg"
    pixels = app_input.load_pixels(sample, 224)
    (tmp_path / "pixels.rgb").write_bytes(pixels.tobytes())
    program = root / "app/src/main/assets/tiny-fp32-xnnpack.pte"
    failing = tmp_path / "model-fail-run-after-0.pte"
    failing.write_bytes(program.read_bytes())
    res = subprocess.run(["java", "-cp", tmp_path / "classes", f"{APP_ID}.Probe", tmp_path / "pixels.rgb",
                          tmp_path / "input.bin", program, failing], check=True, capture_output=True, text=True)
    first, *rows = res.stdout.splitlines()
    assert first == "same_tensor=true shape=[1, 3, 224, 224] scores=1"
    java = torch.from_numpy(np.frombuffer((tmp_path / "input.bin").read_bytes(), dtype="<f4").reshape(1, 3, 224, 224).copy())
    host = app_input.preprocess_float(sample, 224, assets.IMAGENET_MEAN, assets.IMAGENET_STD)
    assert torch.allclose(java, host, atol=1e-5)

    runs = {r["name"]: r for r in map(json.loads, rows)}
    assert runs["cpu"] == {"name": "cpu", "opened": "cpu", "reason": None, "error": None, "live": 0}
    assert runs["nnapi-asked"]["opened"] == "cpu" and "no NNAPI model for fp32-xnnpack" in runs["nnapi-asked"]["reason"]
    assert runs["missing-file"]["opened"] is None and "IllegalArgumentException: Cannot load model path" in \
        runs["missing-file"]["error"]
    assert runs["fails-at-run"]["opened"] == "cpu" and "failed on run 1" in runs["fails-at-run"]["error"]
    assert all(r["live"] == 0 for r in runs.values())  # every loaded Module destroyed


def _library(path: Path, page_size: int) -> bytes:
    src = path.with_suffix(".c")
    src.write_text("int torchdroid_probe(void) { return 42; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-z,max-page-size={page_size}", "-o", path, src], check=True)
    return path.read_bytes()


def _aar(path: Path, abis=("arm64-v8a", "x86_64"), page_size=16384) -> Path:
    lib = _library(path.with_name("libexecutorch.so"), page_size)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("AndroidManifest.xml", "<manifest/>")
        z.writestr("classes.jar", b"PK")
        for abi in abis:
            z.writestr(f"jni/{abi}/libexecutorch.so", lib)
    return path


def test_a_local_executorch_aar(tmp_path):
    aar = _aar(tmp_path / "executorch.aar")
    res = _make("fp32-xnnpack", executorch_aar=aar)
    gradle = (res.out / "app/build.gradle").read_text()
    assert 'implementation files("libs/executorch.aar")' in gradle
    assert f'implementation "com.facebook.fbjni:fbjni:{pins.EXECUTORCH_ANDROID_FBJNI}"' in gradle
    assert f'implementation "com.facebook.soloader:nativeloader:{pins.EXECUTORCH_ANDROID_NATIVELOADER}"' in gradle
    assert "executorch-android:" not in gradle
    assert (res.out / "app/libs/executorch.aar").read_bytes() == aar.read_bytes()
    info = records.AppInfo.load(res.out)
    assert info.runtime["source"] == "aar" and info.runtime["library"] == "executorch"
    assert info.runtime["matches_converter"] is None and any("built from ExecuTorch 1.5.1" in w for w in res.warnings)
    assert not any("4 KB aligned" in w for w in res.warnings)
    # the Vulkan program: only with an AAR, and with a warning that it must carry that backend
    vulkan = _make("fp32-vulkan", executorch_aar=aar)
    assert any("EXECUTORCH_BUILD_VULKAN=ON" in w for w in vulkan.warnings)
    # a 4 KB aligned AAR is warned about like a pytorch_android one
    (tmp_path / "low").mkdir()
    low = _make("fp32-xnnpack", executorch_aar=_aar(tmp_path / "low" / "executorch.aar", page_size=4096))
    assert any("4 KB aligned" in w and "jni/arm64-v8a/libexecutorch.so" in w for w in low.warnings)


def test_an_up_to_date_program_app_is_not_rewritten():
    first = _make("int8-xnnpack")
    before = {p: p.stat().st_mtime_ns for p in first.out.rglob("*") if p.is_file()}
    again = _make("int8-xnnpack", out=first.out)
    assert again.up_to_date and {p: p.stat().st_mtime_ns for p in first.out.rglob("*") if p.is_file()} == before
    with pytest.raises(UsageError, match="it was made with other runtime"):
        _make("int8-xnnpack", out=first.out, executorch_android="1.3.1")


def _nothing_written(out: Path, tmp_path: Path):
    assert not out.exists() and not list(out.parent.glob("*.partial")) and not list(tmp_path.glob("**/*.partial"))


@pytest.mark.parametrize("kw, error, words", [
    ({"model": "fp16-xnnpack"}, UsageError, ["not a converted variant name", "fp32-xnnpack"]),
    ({"model": "fp32-tflite"}, UsageError, ["unknown ExecuTorch delegate 'tflite'", "xnnpack, portable, vulkan"]),
    ({"model": "fp32-vulkan"}, UsageError, ["cannot run the vulkan program", "--executorch-aar"]),
    ({"model": "other-fp32-xnnpack"}, RecordError, ["other-fp32-xnnpack is not converted",
                                                    "tiny-fp32-xnnpack"]),
    ({"abi_filters": ("armeabi-v7a",)}, UsageError, ["no native library for armeabi-v7a", "arm64-v8a"]),
    ({"executorch_android": "1.0.1;rm"}, UsageError, ["--executorch-android '1.0.1;rm' is not a Maven version"]),
    ({"aar": Path("/nonexistent/pytorch_android.aar")}, UsageError, ["--aar given for the ExecuTorch program",
                                                                     "--executorch-aar"]),
    ({"model": "quant_full", "executorch_aar": Path("/x/executorch.aar")}, UsageError,
     ["--executorch-aar given for the TorchScript variant"]),
    ({"lane": "seed-2020", "target_sdk": None}, UsageError, ["compiles against API 30", "--lane current"]),
    ({"executorch_aar": Path("/nonexistent/executorch.aar")}, UsageError, ["does not exist",
                                                                          "build_android_library.sh"]),
])
def test_bad_values_fail_before_anything_is_written(kw, error, words, tmp_path):
    out = tmp_path / "never" / "app"
    with pytest.raises(error) as ei:
        _make(kw.pop("model", "fp32-xnnpack"), out=out, **kw)
    text = str(ei.value) + (ei.value.remedy or "") + (ei.value.cause or "")
    assert all(w in text for w in words), text
    _nothing_written(out, tmp_path)


def test_an_aar_without_the_abi_is_refused(tmp_path):
    aar = _aar(tmp_path / "executorch.aar", abis=("arm64-v8a",))
    with pytest.raises(UsageError, match="no jni/<abi>/libexecutorch.so for x86_64") as ei:
        _make("fp32-xnnpack", executorch_aar=aar, out=tmp_path / "app")
    assert "arm64-v8a" in ei.value.cause
    _nothing_written(tmp_path / "app", tmp_path)


def test_missing_and_tampered_programs_are_record_errors(tmp_path):
    # a legacy-only convert output: the program is not there, and the message names the convert command
    with pytest.raises(RecordError) as ei:
        _make("fp32-xnnpack", models=tiny_models(), out=tmp_path / "a")
    assert "fp32-xnnpack is not converted" in str(ei.value)
    assert "invoke convert --format executorch --delegates xnnpack" in ei.value.remedy
    _nothing_written(tmp_path / "a", tmp_path)
    # a program changed after convert: refused (its hash), nothing written, the program kept as it is
    models = tmp_path / "models"
    shutil.copytree(tiny_programs(), models)
    pte = models / "tiny-int8-xnnpack.pte"
    pte.write_bytes(pte.read_bytes() + b"tampered")
    kept = pte.read_bytes()
    with pytest.raises(RecordError, match="does not match its manifest entry"):
        _make("int8-xnnpack", models=models, out=tmp_path / "b")
    assert pte.read_bytes() == kept
    _nothing_written(tmp_path / "b", tmp_path)
    # a manifest whose program name would leave the assets directory
    manifest = json.loads((models / "manifest.json").read_text())
    entry = next(f for f in manifest["executorch"]["files"] if f["file"] == "tiny-fp32-xnnpack.pte")
    entry["stem"] = "../../evil"
    (models / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RecordError, match="not a file name convert writes"):
        _make("fp32-xnnpack", models=models, out=tmp_path / "c")
    _nothing_written(tmp_path / "c", tmp_path)


def test_the_legacy_app_is_untouched_by_the_executorch_lane():
    """Without an ExecuTorch program, make-app renders the pytorch_android app exactly as before."""
    res = _make("quant_none", models=tiny_models())
    classifier = (res.out / JAVA / "Classifier.java").read_text()
    assert "import org.pytorch.IValue;" in classifier and "executorch" not in classifier
    assert 'backend == null ? "nnapi" : backend' in (res.out / JAVA / "MainActivity.java").read_text()
    gradle = (res.out / "app/build.gradle").read_text()
    assert "executorch" not in gradle and "org.pytorch:pytorch_android:" in gradle
    info = json.loads((res.out / records.APP_INFO_NAME).read_text())
    assert "library" not in info["runtime"] and "library" not in info["request"]["runtime"]


FAKE_PROBE = """import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import org.pytorch.executorch.Module;
import org.pytorch.executorch.Tensor;

public class FakeProbe {
    interface Call { void run(); }

    static void expect(String name, Call c) {
        try {
            c.run();
            System.out.println(name + " accepted");
        } catch (IllegalArgumentException e) {
            System.out.println(name + " refused");
        }
    }

    public static void main(String[] a) {
        final long[] shape = {1, 3, 2, 2};
        expect("direct", () -> Tensor.fromBlob(Tensor.allocateFloatBuffer(12), shape));
        expect("heap", () -> Tensor.fromBlob(FloatBuffer.allocate(12), shape));
        expect("capacity", () -> Tensor.fromBlob(Tensor.allocateFloatBuffer(11), shape));
        final ByteOrder other = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? ByteOrder.BIG_ENDIAN
                : ByteOrder.LITTLE_ENDIAN;
        expect("byte-order", () -> Tensor.fromBlob(ByteBuffer.allocateDirect(48).order(other).asFloatBuffer(), shape));
        expect("directory", () -> Module.load(a[0]));
        expect("file", () -> Module.load(a[1]).destroy());
    }
}
"""


def test_the_fakes_refuse_what_the_real_api_refuses(tmp_path):
    """The JVM fakes fail where executorch-android would (EA2, EA4), so a Classifier they accept is a fair test."""
    (tmp_path / "FakeProbe.java").write_text(FAKE_PROBE)
    subprocess.run(["javac", "-d", tmp_path / "classes", *sorted((FAKES / "org/pytorch/executorch").glob("*.java")),
                    tmp_path / "FakeProbe.java"], check=True)
    (tmp_path / "m.pte").write_bytes(b"program")
    out = subprocess.run(["java", "-cp", tmp_path / "classes", "FakeProbe", tmp_path, tmp_path / "m.pte"], check=True,
                         capture_output=True, text=True).stdout.split("\n")
    assert out[:6] == ["direct accepted", "heap refused", "capacity refused", "byte-order refused",
                       "directory refused", "file accepted"]


def test_make_app_for_another_model_goes_beside_the_default_app(tmp_path):
    """Issue 24 item 3, as a user types it: after the default app (build/app, quant_full), `invoke make-app --model
    fp32-xnnpack` with no --out writes build/app-fp32-xnnpack and leaves build/app alone (it exited 2 before)."""
    import os

    from tests.cli import invoke

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "ANDROID_"))}
    first = invoke(tmp_path, "--search-root", str(root), "make-app", "--model", "quant_full", "--models",
                   str(tiny_models()), env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    before = (tmp_path / "build/app/torchdroid-app.json").read_bytes()
    second = invoke(tmp_path, "--search-root", str(root), "make-app", "--model", "fp32-xnnpack", "--models",
                    str(tiny_programs()), env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert json.loads((tmp_path / "build/app-fp32-xnnpack/torchdroid-app.json").read_text())["variant"]
    assert (tmp_path / "build/app/torchdroid-app.json").read_bytes() == before
    assert "build-app --out build/app-fp32-xnnpack" in second.stdout, second.stdout
    # and on a phone: another application id, so installing one app does not replace the other
    ids = [json.loads((tmp_path / f"build/{d}/torchdroid-app.json").read_text())["application_id"]
           for d in ("app", "app-fp32-xnnpack")]
    assert ids[0] == "org.torchdroid.demo" and ids[1] != ids[0] and ids[1].startswith("org.torchdroid.demo."), ids


def test_the_wrapper_jar_note_names_the_command_that_rewrites_this_app(rendered):
    """Without Gradle, the note's `invoke make-app ... --force` rewrites this app, not the default one (a bare
    `invoke make-app --force` after `make-app --model fp32-xnnpack` regenerated build/app, the quant_full app)."""
    import re
    import shlex

    res = rendered["fp32-xnnpack"]
    note = next(n for n in res.notes if "gradle-wrapper.jar" in n)
    argv = shlex.split(re.search(r"`(invoke make-app [^`]*--force[^`]*)`", note).group(1))
    assert argv[argv.index("--model") + 1] == "fp32-xnnpack", note
    assert Path(argv[argv.index("--out") + 1]) == res.out, note
