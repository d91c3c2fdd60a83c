"""Corrupted shipped NNAPI files fail `invoke verify` (exit 8) naming the corrupted operation, in every mode.

Each case patches one field of the shipped ``*-nnapi.pt`` (tests/host_nnapi_support/corrupt.py), re-records
the file's sha256 in the manifest (as a converter that wrote a wrong model would have), and expects verify to
fail with exit code 8 and name the operation that first touches the corrupted operand.  The clean models pass;
a file changed behind the manifest's back is a record problem (exit 5).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Optional

import pytest

from tests.cli import invoke

torch = pytest.importorskip("torch")

import host_nnapi  # noqa: E402
from host_nnapi.verify import VerifySettings, verify  # noqa: E402
from toolchain.errors import RecordError, VerificationError  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from host_nnapi_support.corrupt import FLOAT_TENSOR, QUANT8, ShippedNnapi, operation_label  # noqa: E402

pytestmark = pytest.mark.skipif(not host_nnapi.available(), reason="no C compiler: host NNAPI unavailable")
ROOT = Path(__file__).resolve().parents[2]
MODEL = f"{ROOT / 'tests/host_nnapi_support/verify_models.py'}:small_net"
MODES = ("none", "core", "full")
CONV, DEPTHWISE, ADD, FC, MAXPOOL = 3, 4, 0, 9, 17


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """small_net in all three modes through the real `invoke convert` pipeline (random weights)."""
    from converter import ConvertSettings, convert

    out = tmp_path_factory.mktemp("small")
    convert(ConvertSettings(out=out, model=MODEL, weights="random", calibration_count=4,
                            build_dir=tmp_path_factory.mktemp("build")))
    return out


def _copy(clean: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "models"
    shutil.copytree(clean, dst, ignore=shutil.ignore_patterns("verify.json"))
    return dst


def _nnapi_file(models: Path, mode: str) -> Path:
    return models / f"small_net-quant_{mode}-nnapi.pt"


# ----------------------------------------------------------------------------- the corruptions
# Each takes the opened file and returns the operation verify must name (None: any operation, or the model).

def output_zero_point_plus_10(sh):
    o = sh.outputs[0]
    sh.set_zero_point(o, sh.zero_point(o) + 10)
    return sh.producer(o)


def _mid_zero_point(delta):
    def corrupt(sh):
        o = sh.middle_activation()
        sh.set_zero_point(o, min(255, sh.zero_point(o) + delta))
        return sh.producer(o)
    corrupt.__name__ = f"middle_zero_point_plus_{delta}"
    return corrupt


def _mid_scale(factor):
    def corrupt(sh):
        o = sh.middle_activation()
        sh.set_scale(o, sh.scale(o) * factor)
        return sh.producer(o)
    corrupt.__name__ = f"middle_scale_times_{factor}"
    return corrupt


def output_scale_times_1_3(sh):
    o = sh.outputs[0]
    sh.set_scale(o, sh.scale(o) * 1.3)
    return sh.producer(o)


def input_scale_times_1_1(sh):
    o = sh.inputs[0]
    sh.set_scale(o, sh.scale(o) * 1.1)
    return sh.first_reader(o)


def _weight_moved(op_type, quanta, real):
    def corrupt(sh):
        op = sh.ops_of(op_type)[-1]
        w = op.inputs[1]
        sh.move_weight(w, 5, quanta if sh.operands[w].type == QUANT8 else real)
        return op
    corrupt.__name__ = f"weight_of_op{op_type}_moved"
    return corrupt


def weight_zero_point_plus_3(sh):
    op = sh.ops_of(CONV)[0]
    w = op.inputs[1]
    sh.set_zero_point(w, sh.zero_point(w) + 3)
    return op


def bias_element_moved(sh):
    op = sh.ops_of(FC)[0]
    b = op.inputs[2]
    sh.move_weight(b, 1, 100 if sh.operands[b].type != FLOAT_TENSOR else 0.25)
    return op


def bias_scale_off_by_1_percent(sh):
    op = sh.ops_of(CONV)[-1]
    b = op.inputs[2]
    sh.set_scale(b, sh.scale(b) * 1.01)
    return op


def filter_layout_transposed(sh):
    op = sh.ops_of(CONV)[0]
    w = op.inputs[1]
    d = sh.operands[w].dims
    sh.set_dims(w, (d[3], d[1], d[2], d[0]))  # [O,H,W,I] read as [I,H,W,O]: same bytes, other layout
    return op


def stride_changed(sh):
    op = sh.ops_of(CONV)[0]
    s = op.inputs[7]
    sh.set_immediate_int(s, 1 if sh.immediate(s) != 1 else 2)
    return sh.first_reader(s)


def padding_changed(sh):
    op = sh.ops_of(DEPTHWISE)[0]
    p = op.inputs[3]
    sh.set_immediate_int(p, sh.immediate(p) + 1)
    return sh.first_reader(p)


def layout_flag_flipped(sh):
    op = sh.ops_of(MAXPOOL)[0]
    flag = op.inputs[-1]
    sh.flip_immediate_bool(flag)
    return sh.first_reader(flag)


def operation_rewired(sh):
    op = sh.ops_of(ADD)[0]
    sh.set_operation_input(op, 1, op.inputs[0])  # x + x instead of x + y
    return op


def input_memory_format_flipped(sh):
    fmt = list(sh.nnapi.inp_mem_fmts)[0]
    sh.set_memory_format("inp", 0, 0 if fmt == 1 else 1)
    return sh.first_reader(sh.inputs[0])


def relaxed_to_float16(sh):
    sh.set_relaxed()
    return sh.operations[0]


def quantize_step_scale_times_1_2(sh):
    q = sh.quantize_step()
    q.scale = q.scale * 1.2
    return sh.first_reader(sh.inputs[0])


CORRUPTIONS = [
    (output_zero_point_plus_10, ("core", "full")),
    (_mid_zero_point(5), ("core", "full")),
    (_mid_zero_point(30), ("core", "full")),
    (_mid_scale(1.3), ("core", "full")),
    (output_scale_times_1_3, ("core", "full")),
    (input_scale_times_1_1, ("core", "full")),
    (_weight_moved(CONV, 20, 0.5), MODES),
    (_weight_moved(DEPTHWISE, 20, 0.5), MODES),
    (_weight_moved(FC, 1, 0.05), MODES),
    (weight_zero_point_plus_3, ("core", "full")),
    (bias_element_moved, MODES),
    (bias_scale_off_by_1_percent, ("core", "full")),
    (filter_layout_transposed, MODES),
    (stride_changed, MODES),
    (padding_changed, MODES),
    (layout_flag_flipped, MODES),
    (operation_rewired, MODES),
    (input_memory_format_flipped, MODES),
    (relaxed_to_float16, MODES),
    (quantize_step_scale_times_1_2, ("core",)),
]
CASES = [pytest.param(fn, mode, id=f"{fn.__name__}-{mode}") for fn, modes in CORRUPTIONS for mode in modes]


def _expect_failure(models: Path, mode: str, expected: Optional[str]) -> dict:
    with pytest.raises(VerificationError) as err:
        verify(VerifySettings(models=models, variants=(f"quant_{mode}",), random_inputs=1))
    assert err.value.exit_code == 8
    (row,) = json.loads((models / "verify.json").read_text())["variants"]
    assert row["ok"] is False and row["failures"]
    if expected:
        assert row["first_divergence"] and row["first_divergence"].startswith(expected), (row["first_divergence"], row["failures"])
        assert expected in str(err.value)
    return row


@pytest.mark.parametrize("corrupt, mode", CASES)
def test_a_corrupted_shipped_file_fails_verify_naming_the_operation(clean, tmp_path, corrupt: Callable, mode):
    models = _copy(clean, tmp_path)
    sh = ShippedNnapi(_nnapi_file(models, mode))
    op = corrupt(sh)
    sh.save()
    _expect_failure(models, mode, operation_label(op) if op is not None else None)


def test_the_clean_models_pass_in_every_mode_at_0_lsb(clean, tmp_path):
    models = _copy(clean, tmp_path)
    result = verify(VerifySettings(models=models, random_inputs=2))
    assert result.ok
    rows = {r.mode: r for r in result.rows}
    assert set(rows) == set(MODES)
    for mode in ("core", "full"):
        r = rows[mode]
        assert r.max_lsb_diff == 0 and r.lsb_vs_reference == 0 and not r.differences
        assert r.layers and all(x["max_lsb"] == 0 for x in r.layers)
        assert "operations of the shipped NNAPI model" in r.layerwise_note
    assert rows["none"].lsb_vs_reference == 0 and rows["none"].max_abs_diff < 1e-4


def test_a_truncated_serialized_model_fails_naming_it(clean, tmp_path):
    models = _copy(clean, tmp_path)
    sh = ShippedNnapi(_nnapi_file(models, "full"))
    del sh.ser[len(sh.ser) // 2:]
    sh.ser.extend(b"\0" * ((4 - len(sh.ser) % 4) % 4))
    sh.save()
    row = _expect_failure(models, "full", None)
    assert row["first_divergence"] == "the serialized NNAPI model"


def test_a_file_changed_behind_the_manifest_is_a_record_problem(clean, tmp_path):
    models = _copy(clean, tmp_path)
    sh = ShippedNnapi(_nnapi_file(models, "core"))
    output_zero_point_plus_10(sh)
    sh.save(record=False)
    with pytest.raises(RecordError) as err:
        verify(VerifySettings(models=models, variants=("quant_core",), random_inputs=0))
    assert err.value.exit_code == 5 and "does not match its manifest entry" in str(err.value)
    _nnapi_file(models, "full").unlink()
    with pytest.raises(RecordError):
        verify(VerifySettings(models=models, variants=("quant_full",), random_inputs=0))


def test_invoke_verify_exits_8_and_names_the_operation(clean, tmp_path):
    models = _copy(clean, tmp_path)
    sh = ShippedNnapi(_nnapi_file(models, "core"))
    op = _mid_scale(1.3)(sh)
    sh.save()
    res = invoke(ROOT, "verify", "--models", str(models), "--variant", "quant_core", "--random-inputs", "0",
                 timeout=600)
    assert res.returncode == 8, res.stdout[-2000:] + res.stderr[-2000:]
    assert operation_label(op) in res.stdout + res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("corrupt, mode", [(_mid_zero_point(5), "core"), (_weight_moved(CONV, 20, 0.5), "full"),
                                           (None, "full")], ids=["zero_point-core", "weight-full", "clean-full"])
def test_nnapi_rounding_judges_the_same_file_the_same_way(clean, tmp_path, corrupt, mode):
    """Under NNAPI's own arithmetic the end-to-end distance to the CPU model is not judged; the operand
    comparison, the per-operation bound and the 0-LSB reference comparison still decide."""
    models = _copy(clean, tmp_path)
    settings = VerifySettings(models=models, variants=(f"quant_{mode}",), rounding="nnapi", random_inputs=1,
                              min_top1_agreement=0.0, min_top5_agreement=0.0)
    if corrupt is None:
        (row,) = verify(settings).rows
        assert row.ok and row.lsb_vs_reference == 0 and row.e2e_bound is None
        return
    sh = ShippedNnapi(_nnapi_file(models, mode))
    op = corrupt(sh)
    sh.save()
    with pytest.raises(VerificationError) as err:
        verify(settings)
    assert err.value.exit_code == 8 and operation_label(op) in str(err.value)
