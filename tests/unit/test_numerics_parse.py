"""deploy.numerics reads back what ATen's tensor printer writes (speed_benchmark_torch --print_output), and judges
a phone's output against the host's reference with the stated tolerances; negative controls show it can fail."""

from __future__ import annotations


import pytest

from deploy.numerics import Unreadable, difference, judge, parse_printed_tensor, printed_output
from toolchain.numerics_records import HOST_CPU, FileReference, TensorValues, host_nnapi_key
from tests.deploy_support.print_output import show
from toolchain.records import ModelFile, TensorSpec


def aten_print(t) -> str:
    """What ATen's operator<< writes for ``t`` (the virtual phone's printer: TorchScript's print())."""
    return show(t)


def _cases():
    import torch

    g = torch.Generator().manual_seed(5)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return {
        "logits": r(1, 1000) * 4,
        "tiny": r(1, 37) * 1e-3,  # a common "1e-04 *" factor glued to the column header
        "huge": r(1, 23) * 3e6,
        "wide range": torch.cat([r(1, 9) * 1e-6, r(1, 9) * 1e3], 1),  # scientific
        "integers": torch.arange(-12, 30, dtype=torch.float32).reshape(1, 42),
        "vector": r(15),
        "3-d": r(2, 3, 14) * 100,
        "negative first": -torch.ones(1, 11) * 11.5,
        "quantized": torch.quantize_per_tensor(r(1, 1000) * 3, 0.0921, 17, torch.quint8),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_parse_reads_back_every_aten_format(name):
    import torch

    t = _cases()[name]
    parsed = parse_printed_tensor(aten_print(t))
    want = (t.dequantize() if t.is_quantized else t).reshape(-1)
    assert parsed.shape == list(t.shape)
    got = torch.tensor(parsed.values, dtype=torch.float64)
    # 4 decimals of the value over its block's power-of-ten factor (5 significant digits in scientific mode)
    assert torch.allclose(got, want.double(), rtol=1e-4, atol=1e-4 * float(want.abs().max())), name
    if t.is_quantized:
        assert (parsed.scale, parsed.zero_point) == (pytest.approx(0.0921), 17)
        steps = (got / parsed.scale)
        assert float((steps - steps.round()).abs().max()) < 1e-3  # dequantized values sit on the grid


def test_unreadable_output_is_refused():
    with pytest.raises(Unreadable):
        parse_printed_tensor("Columns 1 to 3  1.0 2.0 3.0\n")  # no trailer
    with pytest.raises(Unreadable):
        parse_printed_tensor("Columns 1 to 3  1.0 2.0\n[ CPUFloatType{1,3} ]")  # a value missing
    with pytest.raises(Unreadable):
        parse_printed_tensor("Columns 1 to 2  1.0 two\n[ CPUFloatType{1,2} ]")
    assert printed_output("x\nStarting benchmark.\n") == "x\n"
    assert printed_output("Segmentation fault\n") == ""


def _model(backend="nnapi", mode="full"):
    spec = TensorSpec([1, 10], "float32")
    return ModelFile(f"m-quant_{mode}-{backend}.pt", None, "0" * 64, 1, "m", "m", mode, backend, spec, spec, {})


def _q(values, scale=0.1, zp=0):
    return TensorValues([1, len(values)], [round(v / scale) * scale for v in values], scale, zp)


def test_quantized_nnapi_tolerance_in_lsb_against_the_closest_rounding():
    base = [0.1 * i for i in range(10)]
    ref = FileReference("m-quant_full-nnapi.pt", "0" * 64, "nnapi", "full", {
        host_nnapi_key("nnapi"): [_q(base)], host_nnapi_key("qnnpack"): [_q([v + 0.3 for v in base])]})
    ok = judge("P", _model(), [_q([v + 0.2 for v in base])], [], ref)  # 2 LSB from one, 1 LSB from the other
    assert ok.verdict == "agrees" and ok.max_lsb == pytest.approx(1.0) and ok.top1 == "1/1" and ok.top5 == "5/5"
    off = judge("P", _model(), [_q([v - 0.4 for v in base])], [], ref)  # negative control: 4 LSB below both
    assert off.verdict == "differs" and off.max_lsb == pytest.approx(4.0), off
    assert "LSB" in off.reason and off.reference == host_nnapi_key("nnapi")


def test_the_platforms_quant8_tolerance_by_api_level():
    """AOSP's whole-model quant8 tolerance (getQuant8AllowedError, docs/facts.md PW5): 2 LSB on Android 10 (API 29),
    3 LSB from Android 11 (API 30); the same 3-LSB phone differs on one and is within tolerance on the other."""
    base = [0.1 * i for i in range(10)]
    ref = FileReference("m-quant_full-nnapi.pt", "0" * 64, "nnapi", "full", {host_nnapi_key("nnapi"): [_q(base)]})
    three = [_q([v + 0.3 for v in base])]
    q = judge("P", _model(), three, [], ref, sdk=29)
    assert q.verdict == "differs" and q.band == "differs" and q.max_lsb == pytest.approx(3.0), q
    assert "top-1 unchanged" in q.reason and q.shown() == "DIFFERS (3 LSB)", q
    r = judge("P", _model(), three, [], ref, sdk=30)
    assert r.verdict == "agrees" and r.band == "within tolerance" and r.sdk == 30, r
    assert r.tolerance.startswith("<= 3 LSB (AOSP's whole-model quant8 tolerance for Android 11+, API 30"), r
    assert judge("P", _model(), [_q(base)], [], ref, sdk=30).band == "exact"
    near = TensorValues([1, 10], [v + 1e-5 for v in _q(base).values], 0.1, 0)  # the printer's last digit
    printed = judge("P", _model(), [near], [], ref, sdk=30)
    assert printed.band == "exact" and printed.max_lsb == 0 and printed.max_abs > 0, printed
    four = judge("P", _model(), [_q([v + 0.4 for v in base[:9]] + [0.0])], [], ref, sdk=34)  # the top class moves
    assert four.verdict == "differs" and four.shown() == "DIFFERS (9 LSB, top-1 changed)", four
    assert "top-1 changed on 1 of 1 input(s)" in four.reason, four
    # a CPU model and a phone of unknown API level keep torchdroid's own 2 LSB
    cpu_ref = FileReference("m-quant_full-cpu.pt", "0" * 64, "cpu", "full", {HOST_CPU: [_q(base)]})
    assert judge("P", _model("cpu"), three, [], cpu_ref, sdk=30).verdict == "differs"
    assert judge("P", _model(), three, [], ref).verdict == "differs"


def test_float_tolerance_and_top5():
    ref_vals = [float(i) for i in range(10)]
    ref = FileReference("m-quant_none-cpu.pt", "0" * 64, "cpu", "none",
                        {HOST_CPU: [TensorValues([1, 10], ref_vals)]})
    near = judge("P", _model("cpu", "none"), [TensorValues([1, 10], [v + 0.005 for v in ref_vals])], [], ref)
    assert near.verdict == "agrees"  # 0.005 <= 1e-3 x 9
    swapped = list(ref_vals)
    swapped[9], swapped[0] = swapped[0], swapped[9]
    far = judge("P", _model("cpu", "none"), [TensorValues([1, 10], swapped)], [], ref)
    assert far.verdict == "differs" and far.top1 == "0/1" and far.top5 == "4/5"
    d = difference(TensorValues([1, 2], [1.0, float("nan")]), TensorValues([1, 2], [1.0, 2.0]), "cpu")
    assert not d.within


def test_unknown_says_why():
    ref = FileReference("m-quant_full-nnapi.pt", "0" * 64, "nnapi", "full", {}, {"host-nnapi-nnapi": "no C compiler"})
    v = judge("P", _model(), [_q([0.0] * 10)], [], ref)
    assert v.verdict == "unknown" and "no C compiler" in v.reason
    v = judge("P", _model(), [None], ["the phone printed no output (exit code 139)"],
              FileReference("x", "0", "nnapi", "full", {"host-nnapi-nnapi": [_q([0.0] * 10)]}))
    assert v.verdict == "unknown" and "exit code 139" in v.reason
    assert judge("P", _model(), [None], [], None).verdict == "unknown"


def test_another_printer_or_place_is_not_guessed():
    """What a changed binary could print instead (Python's repr, or the output after the benchmark) is refused."""
    import torch

    with pytest.raises(Unreadable):
        parse_printed_tensor(repr(torch.zeros(1, 3)))
    after = "Starting benchmark.\n" + aten_print(torch.zeros(1, 3))
    assert printed_output(after) == ""  # nothing before the marker: the verdict says the phone printed nothing


def test_the_output_run_prints_on_each_bundled_input_with_the_benchmarks_flags():
    from dataclasses import replace

    from deploy.bench import BenchOptions, output_command

    opts = BenchOptions(threads=2, gatord=True, caching_allocator=True)
    cmd = output_command("/data/local/tmp/x y", "m-quant_full-cpu.pt", "cpu", replace(opts, bundled_input=3))
    assert cmd.startswith("cd '/data/local/tmp/x y' && ( ./speed_benchmark_torch --model=./m-quant_full-cpu.pt ")
    assert "echo $p > .torchdroid-bench.pid" in cmd  # Ctrl-C can stop it (deploy.bench.stop_command)
    for flag in ("--use_bundled_input=3", "--warmup=0", "--iter=1", "--pthreadpool_size=2",
                 "--use_caching_allocator=true", "--print_output=true"):
        assert flag in cmd.split(), cmd
    assert "gatord" not in cmd


def test_records_refuse_what_they_would_have_to_guess(tmp_path):
    from toolchain.errors import RecordError
    from toolchain.numerics_records import NumericsVerdict, ReferenceOutputs, references_path
    from toolchain.records import DeployResults, write_record

    with pytest.raises(ValueError):
        NumericsVerdict("P", "f", "cpu", "none", "unknown")  # unknown without its reason
    with pytest.raises(ValueError):
        NumericsVerdict("P", "f", "cpu", "none", "fine")
    path = tmp_path / "n.json"
    write_record(path, DeployResults.KIND, DeployResults.SCHEMA, {"run_id": 1, "numerics": [
        {"serial": "P", "file": "f", "backend": "cpu", "mode": "none", "verdict": "maybe"}]})
    with pytest.raises(RecordError):
        DeployResults.load(path)
    write_record(references_path(tmp_path), "torchdroid.reference-outputs", 1, {"files": [
        {"file": "f", "sha256": "0", "backend": "cpu", "mode": "none",
         "outputs": {HOST_CPU: [{"shape": [1, 3], "values": [1.0, 2.0]}]}}]})
    with pytest.raises(RecordError):
        ReferenceOutputs.load(references_path(tmp_path))


def test_a_device_that_failed_gets_unknown_for_each_model_with_its_failure(tmp_path):
    from deploy.device_run import DeviceReport
    from deploy.formats import run_numerics
    from deploy.plan import DeployPlan
    from deploy.results import export
    from toolchain.numerics_records import ReferenceOutputs
    from toolchain.records import DeployResults

    plan = DeployPlan(None, [_model("cpu", "none"), _model()], None, references=ReferenceOutputs(tmp_path / "r.json"))
    ok = DeviceReport("A")
    ok.numerics.append(judge("A", _model(), [None], ["the phone printed no output"], None))
    bad = DeviceReport("B", errors=["device offline\nmore"])
    paths = export([], tmp_path, "run-0007", (), run_numerics([ok, bad], plan))
    rec = DeployResults.load(paths["json"])  # the verdicts are in the run's one document
    assert paths["json"].name == "run-0007.json"
    assert [(v.serial, v.verdict, v.reason) for v in rec.numerics][1:] == [
        ("B", "unknown", "the device failed: device offline")] * 2


def test_what_the_runtime_wrote_before_the_tensor_is_left_out():
    import torch

    t = torch.quantize_per_tensor(torch.linspace(-1, 1, 30).reshape(1, 30), 0.05, 20, torch.quint8)
    out = ("[W qlinear.cpp:42] Warning: something about packing\nW/libc: 3 things\n" + aten_print(t)
           + "\nStarting benchmark.\nRunning warmup runs.\n")
    parsed = parse_printed_tensor(printed_output(out))
    assert parsed.shape == [1, 30] and parsed.values[0] == pytest.approx(-1.0)


@pytest.mark.parametrize("structure", ["tuple", "dict", "list"])
def test_every_output_of_a_tuple_dict_or_list_is_read_back_in_order(structure):
    """speed_benchmark_torch prints the model's whole output IValue (docs/facts.md EP1): a tuple, list or dict of
    tensors is each tensor as ATen prints it, joined by ', ' (a dict's keys before its values); every one is read
    back, in order, whatever the runtime wrote before it."""
    import torch

    from deploy.numerics import printed_tensors

    cases = _cases()
    tensors = [cases["logits"], cases["3-d"], cases["quantized"], cases["tiny"]]
    out = {"tuple": tuple(tensors), "list": tensors,
           "dict": {"out": tensors[0], "aux": tensors[1], "q": tensors[2], "t": tensors[3]}}[structure]
    text = "[W something.cpp:1] Warning: a warning\n" + aten_print(out) + "\nStarting benchmark.\n"
    parts = printed_tensors(printed_output(text))
    assert len(parts) == 4, parts
    for part, t in zip(parts, tensors):
        parsed = parse_printed_tensor(part)
        want = (t.dequantize() if t.is_quantized else t).reshape(-1)
        assert parsed.shape == list(t.shape)
        assert torch.allclose(torch.tensor(parsed.values, dtype=torch.float64), want.double(), rtol=1e-3,
                              atol=1e-4 * float(want.abs().max()))
    assert parse_printed_tensor(parts[2]).scale == pytest.approx(0.0921)


def test_one_output_is_still_one_tensor():
    from deploy.numerics import printed_tensors

    t = _cases()["3-d"]
    (part,) = printed_tensors(printed_output(aten_print(t) + "\nStarting benchmark.\n"))
    assert parse_printed_tensor(part).shape == [2, 3, 14]
