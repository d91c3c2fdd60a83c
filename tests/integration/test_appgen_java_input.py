"""The generated Classifier.java, run on the JVM, fills exactly the input the host pipeline computes.

tests/appgen_support/jvm_fakes are working stand-ins for Bitmap and pytorch_android's Tensor/Module
(Module remembers its inputs); everything else is the generated source, unchanged.
"""

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from appgen import AppSettings, assets, make_app
from tests.appgen_support import app_input
from tests.appgen_support.java_probe import probe_head
from tests.appgen_support.models import scratch, tiny_models

FAKES = Path(__file__).resolve().parents[1] / "appgen_support" / "jvm_fakes"
PKG = "org.example.probe"

PROBE = probe_head("org.example.probe", "org.pytorch") + """
    public static void main(String[] a) throws Exception {
        int size = AppConfig.INPUT_SIZE;
        byte[] lut = "uint8_lut".equals(AppConfig.INPUT_MODE) ? Files.readAllBytes(Paths.get(a[2])) : null;
        Classifier c = new Classifier("cpu", "unused.pt", lut);
        byte[] noise = new byte[3 * size * size];
        new java.util.Random(1).nextBytes(noise);
        c.fill(frame(noise, size));
        c.run();
        Tensor first = Module.lastInputs[0].toTensor();
        c.fill(frame(Files.readAllBytes(Paths.get(a[0])), size));
        c.run();
        Tensor t = Module.lastInputs[0].toTensor();
        System.out.println("same_tensor=" + (t == first) + " shape=" + java.util.Arrays.toString(t.shape()));
        try (FileOutputStream out = new FileOutputStream(a[1])) {
            if (lut != null) {
                out.write(t.getDataAsUnsignedByteArray());
            } else {
                float[] f = t.getDataAsFloatArray();
                ByteBuffer b = ByteBuffer.allocate(4 * f.length).order(ByteOrder.LITTLE_ENDIAN);
                for (float v : f) {
                    b.putFloat(v);
                }
                out.write(b.array());
            }
        }
    }
}
"""


def _run_probe(project: Path, work: Path, pixels: np.ndarray) -> tuple:
    src = project / "app/src/main/java" / PKG.replace(".", "/")
    probe = work / "Probe.java"
    probe.write_text(PROBE)
    classes = work / "classes"
    sources = [*sorted(FAKES.rglob("*.java")), src / "AppConfig.java", src / "Classifier.java", probe]
    subprocess.run(["javac", "-d", classes, *sources], check=True)
    (work / "pixels.rgb").write_bytes(pixels.tobytes())
    res = subprocess.run(["java", "-cp", classes, f"{PKG}.Probe", work / "pixels.rgb", work / "input.bin",
                          project / "app/src/main/assets/input_lut.bin"], check=True, capture_output=True, text=True)
    return res.stdout.strip(), (work / "input.bin").read_bytes()


@pytest.mark.parametrize("mode", ["none", "full"])
def test_java_fills_the_same_input_as_the_host(mode, tmp_path):
    out = scratch(f"probe-{mode}") / "project"
    make_app(AppSettings(model=f"quant_{mode}", models=tiny_models(), out=out, application_id=PKG,
                         build_dir=out.parent / "build"))
    pixels = app_input.load_pixels(out / "app/src/main/assets/sample.jpg", 224)
    stdout, data = _run_probe(out, tmp_path, pixels)
    assert "same_tensor=true" in stdout  # the Tensor (and its buffer) is allocated once and refilled
    if mode == "full":
        assert "shape=[1, 224, 224, 3]" in stdout
        lut = (out / "app/src/main/assets/input_lut.bin").read_bytes()
        expected = app_input.apply_lut(pixels, lut)
        assert np.array_equal(np.frombuffer(data, dtype=np.uint8).reshape(1, 224, 224, 3), expected)
    else:
        assert "shape=[1, 3, 224, 224]" in stdout
        java = torch.from_numpy(np.frombuffer(data, dtype="<f4").reshape(1, 3, 224, 224).copy())
        host = app_input.preprocess_float(out / "app/src/main/assets/sample.jpg", 224, assets.IMAGENET_MEAN,
                                       assets.IMAGENET_STD)
        assert torch.allclose(java, host, atol=1e-5)
