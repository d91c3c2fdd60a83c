"""The ExecuTorch lane's tolerances (deploy/executorch.py through deploy/numerics.py::difference)."""

from deploy.numerics import difference
from toolchain.numerics_records import TensorValues


def _printed(values):
    """As executor_runner's ``%f`` prints them (docs/facts.md E19)."""
    return [float("%f" % v) for v in values]


def test_the_float_rule_leaves_room_for_the_six_printed_decimals_and_no_more():
    ref = [1.23456789e-4, -3.3333333e-5, 7.7777777e-5]  # a small output: %f keeps ~3 significant digits
    host = TensorValues([1, 3], ref)
    d = difference(TensorValues([1, 3], _printed(ref)), host, "executorch")
    assert d.within and d.max_abs > 1e-3 * max(abs(v) for v in ref)  # the bare relative rule would call it wrong
    assert "printed digits" in d.rule
    off = difference(TensorValues([1, 3], _printed([v + 2e-6 for v in ref])), host, "executorch")
    assert not off.within  # 2e-6 is beyond the printing's 5e-7


def test_an_int8_programs_output_is_judged_in_lsb_of_its_recorded_quantization():
    scale, zp = 0.0031, 8
    ref = [(q - zp) * scale for q in (10, 50, -20, 100)]
    host = TensorValues([1, 4], ref, scale, zp)
    one = difference(TensorValues([1, 4], _printed([v + scale for v in ref]), scale, zp), host, "executorch")
    three = difference(TensorValues([1, 4], _printed([v + 3 * scale for v in ref]), scale, zp), host, "executorch")
    assert one.within and one.max_lsb == 1
    assert not three.within and three.max_lsb == 3 and "LSB" in three.rule
