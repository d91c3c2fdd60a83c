"""converter/precheck.py: what torch's NNAPI converter would refuse or get wrong, found before converting.

The facts the checks encode (docs/facts.md V3-V7) are proven here against the real serializer: a model
with ceil_mode / output_padding converts *without error* but to the wrong shape, which is why the check
must refuse it up front.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from converter.export import quantized_op_remedy  # noqa: E402
from converter.precheck import check_model, nnapi_refused, refuse  # noqa: E402
from toolchain.errors import ConversionError  # noqa: E402

HW = (32, 32)
ALL = ("none", "core", "full")


def kinds(model, modes=ALL):
    return [(p.kind, p.blocking) for p in check_model(model.eval(), HW, modes).problems]


def test_a_plain_conv_net_passes_and_reports_its_operations_and_api_level():
    check = check_model(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                      nn.Linear(4, 2)).eval(), HW, ALL)
    assert check.problems == [] and check.api_level == 29
    assert check.nnapi_ops == {"CONV_2D": 1, "RELU": 1, "AVERAGE_POOL_2D": 1, "RESHAPE": 1, "FULLY_CONNECTED": 1}


@pytest.mark.parametrize("pool", [nn.MaxPool2d(3, 2, ceil_mode=True), nn.AvgPool2d(3, 2, ceil_mode=True)])
def test_ceil_mode_is_refused_because_the_serializer_ignores_it(pool):
    assert ("ignored-attribute", True) in kinds(nn.Sequential(nn.Conv2d(3, 4, 1), pool))
    # the fact: torch's real converter accepts it and builds the floor-mode shape (15x15 here, not 16x16)
    from torch.backends._nnapi.prepare import convert_model_to_nnapi

    from host_nnapi.graph import decode_module

    x = torch.rand(1, 4, 32, 32)
    want = pool(x).shape[-1]
    g = decode_module(convert_model_to_nnapi(torch.jit.trace(pool.eval(), x), [x]))
    got = g.operands[g.outputs[0]].dims[-1]
    assert (want, got) == (16, 15)


def test_output_padding_of_a_transposed_convolution_is_refused_because_it_is_ignored():
    tconv = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)
    assert ("ignored-attribute", True) in kinds(tconv, ("none",))
    from torch.backends._nnapi.prepare import convert_model_to_nnapi

    from host_nnapi.graph import decode_module

    x = torch.rand(1, 3, 8, 8)
    g = decode_module(convert_model_to_nnapi(torch.jit.trace(tconv.eval(), x), [x]))
    assert tconv(x).shape[-1] == 16 and g.operands[g.outputs[0]].dims[-1] == 15


def test_grouped_convolution_dilation_and_padded_average_pooling():
    assert ("refused-attribute", True) in kinds(nn.Sequential(nn.Conv2d(3, 4, 1), nn.Conv2d(4, 4, 3, groups=2)))
    assert ("refused-attribute", True) in kinds(nn.Sequential(nn.Conv2d(3, 4, 3, dilation=2)))
    assert ("avg-pool-padding", True) in kinds(nn.Sequential(nn.Conv2d(3, 4, 1), nn.AvgPool2d(3, 1, padding=1)))
    depthwise = nn.Sequential(nn.Conv2d(3, 4, 1), nn.Conv2d(4, 4, 3, groups=4))
    assert kinds(depthwise) == []


def test_unsupported_operations_are_named_with_their_module():
    class Sin(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 4, 1), nn.Hardswish())

        def forward(self, x):
            return torch.sin(self.body(x))

    problems = check_model(Sin().eval(), HW, ("none",)).problems
    text = " | ".join(p.line() for p in problems)
    assert "aten::hardswish" in text and "body.1" in text and "aten::sin" in text
    check = check_model(Sin().eval(), HW, ("none",))
    refuse(check, "sin")  # only NNAPI cannot take them: the CPU models are still made
    assert [p.kind for p in nnapi_refused(check, "none")] == ["unsupported-op", "unsupported-op"]
    assert all("CPU models are written" in p.fix for p in nnapi_refused(check, "none"))


def test_what_stops_the_cpu_models_too_is_still_refused_as_a_whole():
    class PlainAdd(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1)

        def forward(self, x):  # a plain add FX graph mode cannot quantize either (Python branching on a value)
            y = self.a(x) + self.b(x)
            return y if float(y.mean()) > -1e9 else -y

    check = check_model(PlainAdd().eval(), HW, ("full",))
    assert nnapi_refused(check, "full") == []
    with pytest.raises(ConversionError) as err:
        refuse(check, "plain_add", ("full",))
    assert err.value.exit_code == 6 and "checked before converting" in err.value.what
    assert "correct NNAPI model" not in err.value.what  # the CPU model is what is stopped
    assert refuse(check, "plain_add", ("none", "full")) == {"full": check.problems}  # the float model converts


class _Add(nn.Module):
    def __init__(self, functional: bool):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1)
        self.f = torch.ao.nn.quantized.FloatFunctional() if functional else None

    def forward(self, x):
        return self.f.add(self.a(x), self.b(x)) if self.f is not None else self.a(x) + self.b(x)


class _BranchingAdd(_Add):
    """A plain add and Python branching on a tensor value: torch.fx cannot trace it, so FX mode cannot quantize it."""

    def forward(self, x):
        y = self.a(x) + self.b(x)
        return y if float(y.mean()) > -1e9 else -y


def test_a_plain_add_is_quantized_in_fx_graph_mode_and_eager_mode_stays_for_float_functional():
    check = check_model(_Add(False).eval(), HW, ("full",))
    assert check.problems == [] and check.quantization == "fx" and "1 plain tensor add" in check.quantization_reason
    assert check_model(_Add(False).eval(), HW, ("none",)).problems == []  # float adds convert
    written_for_eager = check_model(_Add(True).eval(), HW, ALL)
    assert written_for_eager.problems == [] and written_for_eager.quantization == "eager"


def test_a_plain_add_fx_cannot_trace_either_says_use_float_functional_and_why_fx_cannot():
    (problem,) = check_model(_BranchingAdd(False).eval(), HW, ("full",)).problems
    assert problem.kind == "plain-arithmetic" and "FloatFunctional" in problem.fix
    assert "FX graph mode" in problem.what and "symbolic_trace" in problem.fix


def test_batchnorm_after_a_convolution_is_folded_for_any_model_and_computes_the_same():
    from converter.export import fused_float

    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.BatchNorm1d(4)).eval()
    for bn in (net[1], net[4], net[7]):
        bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2), bn.weight.data.uniform_(0.5, 2)
    check = check_model(net, HW, ALL)
    (left,) = check.problems  # only the BatchNorm1d after Flatten, which no convolution feeds
    assert left.where.startswith("7 (aten::batch_norm") and "cannot handle aten::batch_norm" in left.what
    assert check.batchnorm["layers"] == 3 and check.batchnorm["folded"] == 2
    assert "7 do not follow a convolution" in check.batchnorm["kept_because"]
    fused, x = fused_float(net), torch.rand(2, 3, *HW)
    assert isinstance(fused[1], nn.Identity) and isinstance(fused[4], nn.Identity)
    torch.testing.assert_close(fused(x), net(x), rtol=1e-4, atol=1e-5)


def test_float_functional_cat_is_refused_in_quantized_modes_only():
    class Cat(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.cat = nn.Conv2d(3, 4, 1), torch.ao.nn.quantized.FloatFunctional()

        def forward(self, x):
            return self.cat.cat([self.conv(x), self.conv(x)], 1)

    assert [p.kind for p in check_model(Cat().eval(), HW, ("core",)).problems] == ["unsupported-op"]
    assert check_model(Cat().eval(), HW, ("none",)).problems == []


def test_outputs_tuples_convert_except_in_core_and_other_outputs_are_refused():
    class Two(nn.Module):
        def forward(self, x):
            return x * 2.0, x + 1.0

    class Dict(nn.Module):
        def forward(self, x):
            return {"y": x}

    assert [p.kind for p in check_model(Two().eval(), HW, ("none", "full")).problems] == []
    assert [p.kind for p in check_model(Two().eval(), HW, ("core",)).problems] == ["outputs"]
    assert {"outputs", "trace"} & {p.kind for p in check_model(Dict().eval(), HW, ("none",)).problems}


def test_fuse_model_is_honoured_when_the_model_is_wrapped_for_quantization():
    from converter.export import fused_float

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

        def forward(self, x):
            return self.bn(self.conv(x))

        def fuse_model(self, is_qat=False):
            torch.ao.quantization.fuse_modules(self, [["conv", "bn"]], inplace=True)

    wrapped = fused_float(torch.ao.quantization.QuantWrapper(Net()))
    assert isinstance(wrapped.module.bn, nn.Identity)


def test_the_remedy_for_a_quantized_add_is_float_functional_and_only_for_arithmetic():
    add = NotImplementedError("Could not run 'aten::add.out' with arguments from the 'QuantizedCPU' backend. ...")
    other = NotImplementedError("Could not run 'aten::quantize_per_tensor' with arguments from the 'QuantizedCPU' backend")
    assert "FloatFunctional" in quantized_op_remedy(add)
    assert quantized_op_remedy(other) is None and quantized_op_remedy(RuntimeError("x")) is None


def _serializer_refuses(model, example) -> str:
    """What torch's NNAPI converter itself says of ``model`` on ``example`` ("" when it converts it)."""
    import torch.backends._nnapi.prepare as nnapi_prepare

    traced = torch.jit.trace(model.eval(), example)
    try:
        nnapi_prepare.convert_model_to_nnapi(traced, list(example))
    except Exception as e:  # noqa: BLE001 - the serializer raises bare Exceptions and assertions
        return f"{type(e).__name__}: {e}"
    return ""


def test_declared_inputs_the_nnapi_converter_cannot_take_are_named_per_input_and_operation():
    """A model's declared inputs (docs/facts.md LI2, LI3): an int64 input, a Conv1d on a waveform and a linear layer on
    a [N, T, D] input are named before converting as NNAPI-only problems (the CPU models are made), each one a case
    the real serializer refuses with an obscure message; a [N, features] float input through linear layers passes
    and the serializer converts it."""
    mlp = nn.Sequential(nn.Linear(32, 8), nn.ReLU(), nn.Linear(8, 4))
    feats = (torch.randn(1, 32),)
    assert check_model(mlp.eval(), HW, ALL, example=feats).problems == [] and not _serializer_refuses(mlp, feats)
    cases = {"is int64": (nn.Embedding(10, 4), (torch.randint(0, 10, (1, 6)),)),
             "1-D convolution": (nn.Conv1d(1, 4, 9), (torch.randn(1, 1, 64),)),
             "linear layer on a 3-D input": (nn.Linear(16, 4), (torch.randn(1, 8, 16),))}
    for words, (model, example) in cases.items():
        problems = [p for p in check_model(model.eval(), HW, ("none",), example=example).problems if words in p.what]
        assert len(problems) == 1 and problems[0].nnapi_only and problems[0].blocking, (words, problems)
        assert "--format executorch" in problems[0].fix and _serializer_refuses(model, example), words
