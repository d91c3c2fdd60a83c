"""`invoke verify` on MobileNetV2 none/core/full (random weights) and on a deliberately broken conversion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import host_nnapi  # noqa: E402
from host_nnapi.verify import VerifySettings, verify  # noqa: E402
from toolchain.errors import RecordError, UsageError, VerificationError  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from host_nnapi_support import manifest as MF  # noqa: E402
from host_nnapi_support import models as M  # noqa: E402

pytestmark = pytest.mark.skipif(not host_nnapi.available(), reason="no C compiler: host NNAPI unavailable")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mobilenet_models(tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    MF.write_models(out, {mode: M.mobilenet_v2(mode, size=96) for mode in ("none", "core", "full")})
    return out


def test_mobilenetv2_all_modes_verify_end_to_end(mobilenet_models):
    result = verify(VerifySettings(models=mobilenet_models, random_inputs=2))
    data = json.loads((mobilenet_models / "verify.json").read_text())
    assert data["kind"] == "torchdroid.host-nnapi-verify" and data["ok"] is True
    rows = {r["variant"]: r for r in data["variants"]}
    assert set(rows) == {"mobilenetv2-quant_none", "mobilenetv2-quant_core", "mobilenetv2-quant_full"}
    assert rows["mobilenetv2-quant_none"]["max_abs_diff"] < 1e-3
    for mode in ("core", "full"):
        r = rows[f"mobilenetv2-quant_{mode}"]
        assert r["top1_agreement"] == 1.0 and r["max_lsb_diff"] <= 1  # QNNPACK-compatible rounding
        assert len(r["layers"]) >= 60 and all(x["ok"] for x in r["layers"])
        ops = next(f for f in r["findings"] if f["check"] == "op-list")["message"]
        for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED"):
            assert op in ops
        assert "QUANTIZE" not in ops.replace("DEQUANTIZE", "")
    fixed = [f for f in rows["mobilenetv2-quant_full"]["findings"] if f["check"] == "fixed-input-quantization"]
    assert fixed and result.ok


def test_invoke_verify_task_prints_a_table_and_exits_zero(mobilenet_models, tmp_path):
    out = tmp_path / "v.json"
    res = subprocess.run([sys.executable, "-m", "invoke", "verify", "--models", str(mobilenet_models),
                          "--variant", "quant_full", "--rounding", "nnapi", "--random-inputs", "1", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "mobilenetv2-quant_full" in res.stdout and "results:" in res.stdout
    data = json.loads(out.read_text())
    assert data["rounding"] == "nnapi" and [r["variant"] for r in data["variants"]] == ["mobilenetv2-quant_full"]


def test_a_broken_conversion_fails_and_names_the_first_diverging_operation(tmp_path):
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1)).eval()
    x = torch.rand(1, 3, 8, 8)
    cpu = torch.jit.trace(net, x)
    broken = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1)).eval()
    broken.load_state_dict(net.state_dict())
    with torch.no_grad():
        broken[2].weight.mul_(-1.0)  # the second convolution's weights were laid out wrongly
    MF.write_models(tmp_path, {"none": (cpu, M.convert(broken, x), x)}, stem="tiny")
    with pytest.raises(VerificationError) as e:
        verify(VerifySettings(models=tmp_path, random_inputs=1))
    msg = str(e.value)
    assert "tiny-quant_none" in msg and "max abs diff" in msg
    data = json.loads((tmp_path / "verify.json").read_text())
    row = data["variants"][0]
    assert row["ok"] is False and row["first_divergence"].startswith("operation 2 CONV_2D")
    assert e.value.exit_code == 8


def test_user_errors_say_what_to_do(tmp_path):
    with pytest.raises(RecordError, match="no torchdroid.convert-manifest record") as e:
        verify(VerifySettings(models=tmp_path / "nowhere"))
    assert "invoke convert" in str(e.value)
    with pytest.raises(UsageError, match="unknown rounding 'banker'") as e:
        verify(VerifySettings(models=tmp_path, rounding="banker"))
    assert "qnnpack" in str(e.value)
