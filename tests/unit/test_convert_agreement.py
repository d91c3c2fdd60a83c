"""quant_core's top-1 agreement is quant_full's when both give the same output on the bundled input (one quantized
core), and is measured again when they do not (converter/convert_modes.py ModeConverter._agreement)."""

from types import SimpleNamespace

import torch

from converter.convert_modes import ModeConverter


class CountingAgreement:
    def __init__(self, answers):
        self.answers = list(answers)
        self.calls = []

    def measure(self, module, qparams):
        self.calls.append((module, qparams))
        return self.answers.pop(0)

    def set_reference(self, ref):
        raise AssertionError("not used here")


def _converter(answers):
    conv = ModeConverter.__new__(ModeConverter)  # only the state _agreement reads
    conv._first_quantized, conv._float_top1 = None, None
    conv.agreement = CountingAgreement(answers)
    return conv


def _ex(mode):
    return SimpleNamespace(mode=mode, core_qparams={"input": {"scale": 0.1, "zero_point": 3}})


def test_core_reuses_fulls_agreement_when_the_outputs_are_identical():
    conv = _converter([{"agree": 30, "total": 32}])
    full_out = torch.quantize_per_tensor(torch.tensor([[0.5, 1.5, -0.2]]), 0.1, 3, torch.quint8)
    full = conv._agreement(_ex("full"), SimpleNamespace(output=full_out, module="full-module"))
    core = conv._agreement(_ex("core"), SimpleNamespace(output=full_out.dequantize(), module="core-module"))
    assert full == {"agree": 30, "total": 32}
    assert core == {"agree": 30, "total": 32, "measured_on": "quant_full"}
    # full's input quantization as recorded (converter.host_check.predict applies "input", or "inputs" per argument)
    assert conv.agreement.calls == [("full-module", {"input": {"scale": 0.1, "zero_point": 3}})]


def test_core_is_measured_when_its_output_differs():
    conv = _converter([{"agree": 30, "total": 32}, {"agree": 12, "total": 32}])
    conv._agreement(_ex("full"), SimpleNamespace(output=torch.tensor([[0.5, 1.5]]), module="full-module"))
    core = conv._agreement(_ex("core"), SimpleNamespace(output=torch.tensor([[0.5, 1.6]]), module="core-module"))
    assert core == {"agree": 12, "total": 32}
    assert [c[0] for c in conv.agreement.calls] == ["full-module", "core-module"]
    assert conv.agreement.calls[1][1] is None  # core takes float input: no quantization parameters
