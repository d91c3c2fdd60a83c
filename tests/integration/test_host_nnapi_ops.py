"""Every operation torch's NNAPI serializer emits, float and quantized, through the real host library."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import host_nnapi  # noqa: E402
from host_nnapi import runtime  # noqa: E402
from host_nnapi.graph import decode_module  # noqa: E402
from host_nnapi.kernels import supported_operations  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from host_nnapi_support import models as M  # noqa: E402

pytestmark = pytest.mark.skipif(not host_nnapi.available(), reason="no C compiler: host NNAPI unavailable")

FLOAT = M.float_cases()
QUANT = M.quant_cases()
EMITTED: set = set()


@pytest.fixture(scope="module", autouse=True)
def library():
    return host_nnapi.load()


def _run(nnapi, inputs):
    with torch.no_grad():
        return nnapi(*inputs)


@pytest.mark.parametrize("name", sorted(FLOAT))
def test_float_operation_matches_torch(name):
    module, inputs = FLOAT[name]
    nnapi = M.convert(module, *inputs)
    EMITTED.update((op.name for op in decode_module(nnapi).operations))
    before = runtime.stats()["computed"]
    got = _run(nnapi, inputs)
    with torch.no_grad():
        want = module(*inputs)
    assert runtime.stats()["computed"] == before + 1  # really ran through the library
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), f"{name}: max diff {(got - want).abs().max()}"


# QNNPACK-compatible rounding is exact for the arithmetic operations; QNNPACK's pooling requantization
# is emulated to within 1 LSB.  NNAPI-spec rounding differs from QNNPACK by up to 2 LSB (ADD, MUL).
EXACT = {"qconv2d", "qconv2d_relu", "qdepthwise", "qadd", "qadd_relu", "qmul", "qlinear", "qmax_pool", "qrelu"}


@pytest.mark.parametrize("rounding", ["qnnpack", "nnapi"])
@pytest.mark.parametrize("name", sorted(QUANT))
def test_quantized_operation_matches_qnnpack(name, rounding):
    tolerance = (0 if name in EXACT else 1) if rounding == "qnnpack" else 2
    body, example = QUANT[name]
    core, qin = M.quantized_core(body, example)
    with M.qengine("qnnpack"):
        nnapi = M.convert(core, M.nhwc(qin))
        EMITTED.update((op.name for op in decode_module(nnapi).operations))
        with torch.no_grad():
            want = core(qin)
        with runtime.using_rounding(rounding):
            got = _run(M.convert(core, M.nhwc(qin)), [qin])
    assert got.is_quantized and got.shape == want.shape
    assert (got.q_scale(), got.q_zero_point()) == (want.q_scale(), want.q_zero_point())
    lsb = (got.int_repr().int() - want.int_repr().int()).abs().max().item()
    assert lsb <= tolerance, f"{name} ({rounding}): {lsb} LSB"


def test_the_cases_cover_every_operation_the_serializer_emits():
    # runs after the parametrized cases above (file order); every kernel must have been exercised
    if len(EMITTED) < 10:
        pytest.skip("run together with the per-operation tests")
    missing = set(supported_operations()) - EMITTED
    assert missing == set(), f"kernels never exercised by a converted model: {sorted(missing)}"


def test_nnapi_average_pooling_with_padding_differs_from_torch_at_borders():
    module = torch.nn.AvgPool2d(3, stride=1, padding=1).eval()
    x = torch.rand(1, 2, 5, 5) + 1.0
    nnapi = M.convert(module, x)
    got, want = _run(nnapi, [x]), module(x)
    interior = (got - want)[:, :, 1:-1, 1:-1].abs().max()
    border = (got - want).abs().max()
    assert interior < 1e-6 and border > 0.1  # NNAPI divides by the valid count, torch by 9
    from host_nnapi import checks

    assert [f.check for f in checks.errors(checks.static_checks(decode_module(nnapi)))] == ["avg-pool-padding"]


def test_degenerate_scale_check_fires_on_a_constant_activation():
    conv = torch.nn.Conv2d(3, 4, 1)
    with torch.no_grad():
        conv.weight.zero_()
        conv.bias.zero_()
    core, qin = M.quantized_core(conv, torch.rand(1, 3, 4, 4))
    with M.qengine("qnnpack"):
        nnapi = M.convert(core, M.nhwc(qin))
    from host_nnapi import checks

    found = checks.errors(checks.static_checks(decode_module(nnapi)))
    assert any(f.check == "degenerate-scale" and "CONV_2D" in f.message for f in found), found


def test_wrong_input_quantization_is_rejected_with_an_nnapi_error():
    body, example = QUANT["qconv2d"]
    core, qin = M.quantized_core(body, example)
    with M.qengine("qnnpack"):
        nnapi = M.convert(core, M.nhwc(qin))
        other = torch.quantize_per_tensor(example, qin.q_scale() * 2, qin.q_zero_point(), torch.quint8)
        with pytest.raises(RuntimeError, match="setInput ?failed with error 4"):
            _run(nnapi, [other])
    assert "quantization (scale" in runtime.last_error() and "fixes them" in runtime.last_error()


def test_c_api_validates_operands_and_state_like_nnapi(library):
    import ctypes

    lib = ctypes.CDLL(str(library))
    lib.TorchdroidNN_lastError.restype = ctypes.c_char_p

    class OperandType(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int32), ("dimensionCount", ctypes.c_uint32),
                    ("dimensions", ctypes.POINTER(ctypes.c_uint32)), ("scale", ctypes.c_float),
                    ("zeroPoint", ctypes.c_int32)]

    model = ctypes.c_void_p()
    assert lib.ANeuralNetworksModel_create(ctypes.byref(model)) == 0
    dims = (ctypes.c_uint32 * 2)(1, 4)
    bad = OperandType(5, 2, dims, 0.0, 0)  # TENSOR_QUANT8_ASYMM with scale 0
    assert lib.ANeuralNetworksModel_addOperand(model, ctypes.byref(bad)) == 4  # BAD_DATA
    assert b"needs scale > 0" in lib.TorchdroidNN_lastError()
    good = OperandType(3, 2, dims, 0.0, 0)
    assert lib.ANeuralNetworksModel_addOperand(model, ctypes.byref(good)) == 0
    assert lib.ANeuralNetworksModel_setOperandValue(model, 0, (ctypes.c_float * 3)(), 12) == 4  # needs 16 bytes
    assert b"needs 16 bytes, got 12" in lib.TorchdroidNN_lastError()
    ins = (ctypes.c_uint32 * 1)(0)
    assert lib.ANeuralNetworksModel_addOperation(model, 19, 1, ins, 1, ins) == 0  # RELU in place is allowed to add
    assert lib.ANeuralNetworksModel_addOperation(model, 999, 1, ins, 1, ins) == 4
    assert b"operation type 999 is not supported" in lib.TorchdroidNN_lastError()
    comp = ctypes.c_void_p()
    assert lib.ANeuralNetworksCompilation_create(model, ctypes.byref(comp)) == 6  # BAD_STATE: model not finished
    lib.ANeuralNetworksModel_free(model)


def test_library_is_cached_by_source_hash(library, tmp_path):
    from host_nnapi.build import build_library

    first = build_library(tmp_path)
    mtime = first.stat().st_mtime_ns
    assert build_library(tmp_path) == first and first.stat().st_mtime_ns == mtime
    out = subprocess.run(["readelf", "-d", str(first)], capture_output=True, text=True).stdout
    assert "Library soname: [libneuralnetworks.so]" in out


def test_missing_compiler_is_reported_with_a_fix(monkeypatch, tmp_path):
    from host_nnapi.build import build_library
    from toolchain.errors import ToolNotFound

    monkeypatch.setenv("CC", "no-such-cc-torchdroid")
    with pytest.raises(ToolNotFound) as e:
        build_library(tmp_path)
    assert "CC='no-such-cc-torchdroid' was not found" in str(e.value) and "apt-get install gcc" in str(e.value)


def test_libneuralnetworks_path_alone_runs_models_in_a_fresh_process(library, tmp_path):
    """Like upstream test_nnapi.py: ctypes.cdll.LoadLibrary($LIBNEURALNETWORKS_PATH), nothing else."""
    script = tmp_path / "probe.py"
    script.write_text(
        "import ctypes, os, torch\n"
        "ctypes.cdll.LoadLibrary(os.environ['LIBNEURALNETWORKS_PATH'])\n"
        "from torch.backends._nnapi.prepare import convert_model_to_nnapi\n"
        "m = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.ReLU()).eval()\n"
        "x = torch.rand(1, 2, 6, 6)\n"
        "n = convert_model_to_nnapi(torch.jit.trace(m, x), x)\n"
        "print('DIFF', float((n(x) - m(x)).abs().max()))\n"
    )
    env = dict(os.environ, LIBNEURALNETWORKS_PATH=str(library), PYTHONPATH="")
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    diff = float(res.stdout.split("DIFF")[1])
    assert diff < 1e-5


def test_ld_library_path_alone_lets_torch_dlopen_the_library(tmp_path):
    """`python -m host_nnapi` prints the library; its directory on LD_LIBRARY_PATH before Python starts is enough."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    where = subprocess.run([sys.executable, "-m", "host_nnapi"], cwd=root, capture_output=True, text=True, timeout=300)
    assert where.returncode == 0, where.stderr
    lib = where.stdout.strip()
    assert lib.endswith("/libneuralnetworks.so") and os.path.isfile(lib)
    script = tmp_path / "probe.py"
    script.write_text(
        "import torch\n"
        "from torch.backends._nnapi.prepare import convert_model_to_nnapi\n"
        "m = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.Hardtanh(0.0, 6.0)).eval()\n"
        "x = torch.rand(1, 2, 5, 5)\n"
        "n = convert_model_to_nnapi(torch.jit.trace(m, x), x)\n"
        "with torch.no_grad():\n"
        "    print('DIFF', float((n(x) - m(x)).abs().max()))\n"
    )
    base = dict(os.environ, PYTHONPATH="")
    base.pop("LD_LIBRARY_PATH", None)
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=dict(base, LD_LIBRARY_PATH=os.path.dirname(lib)),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert float(res.stdout.split("DIFF")[1]) < 1e-5
    without = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=base, capture_output=True, text=True,
                             timeout=120)
    assert without.returncode != 0 and "libneuralnetworks.so" in without.stderr
