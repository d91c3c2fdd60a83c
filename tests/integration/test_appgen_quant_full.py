"""The quant_full app path on the host: the app's lookup table + uint8 model give the CPU model's classes.

MobileNetV2 is converted once (random weights, the converter's synthetic calibration); the app's own
assets (input_lut.bin and the packaged uint8 model) are then run exactly as the Java does: pixels ->
table -> uint8 NHWC tensor -> model.
"""

import pytest
import torch

from appgen import AppSettings, assets, make_app
from tests.appgen_support import app_input
from tests.appgen_support.models import mobilenet_full, scratch
from toolchain import records


@pytest.fixture(scope="module")
def app():
    models = mobilenet_full()
    out = scratch("app-mobilenet") / "project"
    res = make_app(AppSettings(model="quant_full", models=models, out=out, build_dir=out.parent / "build"))
    cpu = records.ConvertManifest.load(models).find("quant_full")["cpu"]
    return res, cpu


def test_app_path_gives_the_cpu_models_classes(app):
    res, cpu = app
    asset_dir = res.out / "app/src/main/assets"
    lut = (asset_dir / "input_lut.bin").read_bytes()
    size = cpu.input.shape[-1]
    pixels = app_input.load_pixels(asset_dir / "sample.jpg", size)

    # the app: table lookup in "Java", then the packaged uint8 model
    app_model = torch.jit.load(str(asset_dir / "mobilenetv2-quant_full-cpu-uint8.pt"))
    app_u8 = torch.from_numpy(app_input.apply_lut(pixels, lut))
    assert app_u8.dtype == torch.uint8 and list(app_u8.shape) == [1, size, size, 3]
    app_scores = app_model(app_u8)
    assert app_scores.dtype == torch.float32 and list(app_scores.shape) == [1, 1000]

    # the reference: the float pipeline, quantized with the manifest's scale/zero point, into the CPU model
    mean, std = assets.normalization(cpu.conversion)
    ref_in = torch.quantize_per_tensor(app_input.preprocess_float(asset_dir / "sample.jpg", size, mean, std),
                                       cpu.input.scale, cpu.input.zero_point, torch.quint8)
    ref_scores = torch.jit.load(str(cpu.path))(ref_in.contiguous(memory_format=torch.channels_last)).dequantize()

    assert torch.equal(app_u8[0], ref_in.int_repr()[0].permute(1, 2, 0))  # the table is exact
    assert app_scores.argmax().item() == ref_scores.argmax().item()
    assert app_scores.topk(5).indices.tolist() == ref_scores.topk(5).indices.tolist()
    assert torch.allclose(app_scores, ref_scores)
    assert len(set(app_scores[0].tolist())) > 10  # not a constant output


def test_nnapi_asset_is_wrapped_the_same_way(app):
    res, cpu = app
    asset_dir = res.out / "app/src/main/assets"
    nnapi = torch.jit.load(str(asset_dir / "mobilenetv2-quant_full-nnapi-uint8.pt"))
    code = nnapi.code
    assert "quantize_per_tensor" in code and "permute" in code and "dequantize" in code
    assert nnapi.scale == pytest.approx(cpu.input.scale) and nnapi.zero_point == cpu.input.zero_point
    info = records.read_record(res.app_info, records.APP_INFO_KIND, records.APP_INFO_SCHEMA, "")
    entry = info["assets"]["mobilenetv2-quant_full-nnapi-uint8.pt"]
    assert entry["backend"] == "nnapi" and entry["input"]["layout"] == "NHWC"
    assert info["lut"]["sha256"] and info["input_mode"] == "uint8_lut"


TOPK_PROBE = """package {pkg};

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

public class TopKProbe {{
    public static void main(String[] a) throws Exception {{
        final ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(Paths.get(a[0]))).order(ByteOrder.LITTLE_ENDIAN);
        final float[] scores = new float[b.remaining() / 4];
        b.asFloatBuffer().get(scores);
        final String[] labels = new String(Files.readAllBytes(Paths.get(a[1])), StandardCharsets.UTF_8).split("\\n");
        System.out.print(TopK.describe(scores, labels, 12_345_678L, "nnapi"));
    }}
}}
"""


def _java_top5(res, work, scores) -> list:
    import subprocess

    pkg = res.application_id
    src = res.out / "app/src/main/java" / pkg.replace(".", "/") / "TopK.java"
    work.mkdir(parents=True)
    (work / "TopKProbe.java").write_text(TOPK_PROBE.format(pkg=pkg))
    subprocess.run(["javac", "-d", work / "classes", src, work / "TopKProbe.java"], check=True)
    (work / "scores.bin").write_bytes(scores.numpy().astype("<f4").tobytes())
    out = subprocess.run(["java", "-cp", work / "classes", f"{pkg}.TopKProbe", work / "scores.bin",
                          res.out / "app/src/main/assets/labels.txt"], check=True, capture_output=True, text=True)
    return out.stdout.splitlines()


def test_the_app_shows_the_models_top5(app, tmp_path):
    """The generated TopK.java, on the JVM, names the same five classes (with softmax %) as torch for the
    app model's scores on the sample image, and breaks ties towards the lower index."""
    res, cpu = app
    asset_dir = res.out / "app/src/main/assets"
    pixels = app_input.load_pixels(asset_dir / "sample.jpg", cpu.input.shape[-1])
    app_model = torch.jit.load(str(asset_dir / "mobilenetv2-quant_full-cpu-uint8.pt"))
    scores = app_model(torch.from_numpy(app_input.apply_lut(pixels, (asset_dir / "input_lut.bin").read_bytes())))[0]
    labels = (asset_dir / "labels.txt").read_text().splitlines()
    lines = _java_top5(res, tmp_path / "real", scores)
    assert lines[0] == "12.3 ms on NNAPI"
    probs = torch.softmax(scores.double(), 0)
    values = scores.tolist()
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))[:5]  # quantized scores tie: lower index first
    assert [values[i] for i in order] == scores.topk(5).values.tolist()
    assert lines[1:] == [f"{100 * probs[i].item():5.1f}%  {labels[i]}" for i in order]

    tied = torch.tensor([0.5, 2.0, 2.0, -1.0, 2.0, 0.5, 3.0])
    lines = _java_top5(res, tmp_path / "tied", tied)
    assert [line.split("%  ", 1)[1] for line in lines[1:]] == [labels[i] for i in (6, 1, 2, 4, 0)]
