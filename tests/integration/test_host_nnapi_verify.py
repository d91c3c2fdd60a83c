"""`invoke verify` on MobileNetV2 none/core/full (random weights) and on a deliberately broken conversion."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.cli import invoke

torch = pytest.importorskip("torch")

import host_nnapi  # noqa: E402
from host_nnapi.verify import VerifySettings, verify  # noqa: E402
from toolchain.errors import RecordError, UsageError, VerificationError  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from host_nnapi_support import manifest as MF  # noqa: E402
from host_nnapi_support import models as M  # noqa: E402

pytestmark = [pytest.mark.slow,  # MobileNetV2 verified operation by operation (~40 s in all)
              pytest.mark.skipif(not host_nnapi.available(), reason="no C compiler: host NNAPI unavailable")]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """MobileNetV2 (random weights) through the real `invoke convert` pipeline: six files and a manifest (a copy of
    the run's one conversion: verify writes verify.json beside the models)."""
    import shutil

    from tests.converter_support.mobilenet import converted_mobilenet

    out = tmp_path_factory.mktemp("converted") / "models"
    shutil.copytree(converted_mobilenet()[0], out)
    return out


def test_converted_mobilenetv2_all_three_modes_match_their_cpu_models(converted):
    result = verify(VerifySettings(models=converted, random_inputs=1))
    data = json.loads((converted / "verify.json").read_text())
    assert data["kind"] == "torchdroid.host-nnapi-verify" and data["ok"] is True and result.ok
    assert data["rounding"] == "qnnpack" and Path(data["library"]).name == "libneuralnetworks.so"
    rows = {r["variant"]: r for r in data["variants"]}
    assert set(rows) == {"mobilenetv2-quant_none", "mobilenetv2-quant_core", "mobilenetv2-quant_full"}
    none = rows["mobilenetv2-quant_none"]
    assert none["inputs"] == 2 and none["max_abs_diff"] < 1e-3 and none["top1_agreement"] == 1.0
    ops = next(f for f in none["findings"] if f["check"] == "op-list")["message"]
    assert "RELU x35" in ops  # separate in float
    for mode in ("core", "full"):
        r = rows[f"mobilenetv2-quant_{mode}"]
        assert r["top1_agreement"] == 1.0 and r["max_lsb_diff"] <= 1  # QNNPACK-compatible rounding
        ops = next(f for f in r["findings"] if f["check"] == "op-list")["message"]
        for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED"):
            assert op in ops
        assert "RELU" not in ops  # fused when quantized
        assert "QUANTIZE" not in ops.replace("DEQUANTIZE", "")
        # every operation, run in isolation on the scripted CPU model's own values, within 1 LSB
        assert len(r["layers"]) >= 65 and all(x["ok"] and (x["max_lsb"] or 0) <= 1 for x in r["layers"]), r["layerwise_note"]
        assert any(f["check"] == "fixed-input-quantization" for f in r["findings"])
    assert "operations of the shipped NNAPI model" in rows["mobilenetv2-quant_full"]["layerwise_note"]


def test_invoke_verify_with_nnapi_rounding_judges_operations_not_the_end_to_end_distance(converted, tmp_path):
    """With the default thresholds (issue 24 item 8: exit 8, top-1 0.00 before): random weights give flat logits
    whose top-k reshuffles under another rounding, so agreement is reported, not judged; the operations decide.
    The record goes to verify-nnapi.json: it never replaces the qnnpack check's verify.json."""
    models = tmp_path / "models"
    models.mkdir()
    for f in converted.iterdir():
        if f.suffix in (".pt", ".json"):
            (models / f.name).write_bytes(f.read_bytes())
    (models / "verify.json").unlink(missing_ok=True)
    res = invoke(ROOT, "verify", "--models", str(models), "--variant", "quant_full", "--rounding", "nnapi",
                 "--layerwise", "always", "--random-inputs", "1", env=dict(os.environ), timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out = models / "verify-nnapi.json"
    assert "mobilenetv2-quant_full" in res.stdout and f"results: {out}" in res.stdout
    assert not (models / "verify.json").exists()
    data = json.loads(out.read_text())
    assert data["rounding"] == "nnapi" and data["thresholds"]["min_top1_agreement"] == 0.75
    (row,) = data["variants"]
    assert "random weights" in row["agreement_note"] and "not judged" in res.stdout
    assert row["variant"] == "mobilenetv2-quant_full" and row["inputs"] == 2 and row["ok"] is True
    assert row["max_lsb_diff"] > 1  # NNAPI's integer rounding really differs from QNNPACK's, and accumulates...
    assert max(x["max_lsb"] or 0 for x in row["layers"]) <= 1  # ...while each operation stays within 1 LSB


def test_invoke_convert_verifies_the_fresh_models(tmp_path):
    models = tmp_path / "m"
    res = invoke(ROOT, "convert", "--model", f"{ROOT}/tests/converter_support/user_models.py:tiny", "--weights",
                 "random", "--quant", "none", "--out", str(models), env=dict(os.environ, CI="1"), timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "host NNAPI vs CPU" in res.stdout and f"results: {models / 'verify.json'}" in res.stdout
    data = json.loads((models / "verify.json").read_text())
    assert data["ok"] is True and [r["mode"] for r in data["variants"]] == ["none"]


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


def test_a_failing_check_never_replaces_a_passing_record(tmp_path):
    """Issue 24 item 8: the failing run's record goes beside the passing one (verify-failed.json)."""
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1)).eval()
    x = torch.rand(1, 3, 8, 8)
    MF.write_models(tmp_path, {"none": (torch.jit.trace(net, x), M.convert(net, x), x)}, stem="tiny")
    verify(VerifySettings(models=tmp_path, random_inputs=1))
    passing = (tmp_path / "verify.json").read_bytes()
    broken = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1)).eval()
    broken.load_state_dict(net.state_dict())
    with torch.no_grad():
        broken[2].weight.mul_(-1.0)
    MF.write_models(tmp_path, {"none": (torch.jit.trace(net, x), M.convert(broken, x), x)}, stem="tiny")
    with pytest.raises(VerificationError) as e:
        verify(VerifySettings(models=tmp_path, random_inputs=1))
    assert (tmp_path / "verify.json").read_bytes() == passing
    failed = json.loads((tmp_path / "verify-failed.json").read_text())
    assert failed["ok"] is False and "verify-failed.json" in str(e.value)
    with pytest.raises(VerificationError):  # a failing record is replaced by the next failing one, in its place
        verify(VerifySettings(models=tmp_path, random_inputs=1))
    assert (tmp_path / "verify.json").read_bytes() == passing


def test_user_errors_say_what_to_do(tmp_path):
    with pytest.raises(RecordError, match="no torchdroid.convert-manifest record") as e:
        verify(VerifySettings(models=tmp_path / "nowhere"))
    assert "invoke convert" in str(e.value)
    with pytest.raises(UsageError, match="unknown rounding 'banker'") as e:
        verify(VerifySettings(models=tmp_path, rounding="banker"))
    assert "qnnpack" in str(e.value)
