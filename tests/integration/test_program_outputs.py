"""What the ExecuTorch lane's int8 check reads from the program itself (issue 35 item 5): the int8-grid check only
where a dequantize produces the output, the error bound from the model's own quantization error on held-out inputs.

Small models quantized with PT2E and lowered to XNNPACK here (a few seconds each), judged by
converter.executorch_check.judge_outputs as `invoke bench-executorch` judges them.
"""

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.converter_support.user_models import Segmenter, Tiny

pytestmark = pytest.mark.slow  # PT2E quantization and XNNPACK lowering of two small models (~20 s)


def _int8_program(model, tmp_path, hw=(32, 32)):
    """(the PT2E reference graph, the lowered int8 XNNPACK program's forward, the reference dict convert writes)."""
    import torch

    from converter.executorch import export, lower, output_rules, quantize_pt2e
    from converter.finite import output_tensors
    from toolchain.records import load_method

    torch.manual_seed(0)
    model = model.eval()
    batch = [torch.rand(1, 3, *hw) for _ in range(4)]
    held_out = [torch.rand(1, 3, *hw) for _ in range(3)]
    quantized, _ = quantize_pt2e(model, export(model, batch[0], "float"), batch)
    data, _ = lower(export(quantized, batch[0], "int8"), "xnnpack", "int8", batch[0])
    path = tmp_path / "int8.pte"
    path.write_bytes(bytes(data))
    with torch.no_grad():
        expected = {"fp32": [output_tensors(model(x))[0] for x in held_out],
                    "int8": [output_tensors(quantized(x))[0] for x in held_out]}
    ref = {"inputs": held_out, "expected": expected, "int8_output": output_rules(quantized)[0], "held_out": True}
    return quantized, load_method(path), ref


def _judge(outputs, ref):
    from converter.executorch_check import CheckRow, judge_outputs
    from converter.host_bench import PteBenchSettings

    f = SimpleNamespace(precision="int8")
    return judge_outputs(f, outputs, ref, PteBenchSettings(models="."), CheckRow("int8-xnnpack", "int8.pte", ran=True,
                                                                                 reference="PT2E int8 reference graph"))


def test_a_float_op_after_the_dequantize_is_not_judged_on_the_int8_grid(tmp_path):
    """Bilinear upsampling after the last dequantize (a segmentation head): the program's outputs are off the int8
    grid by design and pass; the grid check is not applied and the row says why; a wrong output still fails on the
    error bound (negative control)."""
    _, method, ref = _int8_program(Segmenter(), tmp_path)
    rule = ref["int8_output"]
    assert rule["on_grid"] is False and "upsample_bilinear2d" in rule["after"] and rule["scale"] > 0
    program = [method.execute([x])[0] for x in ref["inputs"]]
    row = _judge(program, ref)
    assert row.ok, row.reason
    assert "upsample_bilinear2d" in row.grid_rule and row.grid_offset_lsb is None
    wrong = _judge([0.5 * y for y in program], ref)
    assert not wrong.ok and "quantization's own error" in wrong.reason


def test_the_int8_error_bound_is_twice_the_quantizations_own_error_on_held_out_inputs(tmp_path):
    """A program k times as far from the PT2E reference as the reference is from the float model (on the held-out
    inputs) passes for k = 1.5 (a bound of 1x refused regnet_y_400mf's correct program) and fails for k = 2.5."""
    _, _, ref = _int8_program(Segmenter(), tmp_path)

    def k_away(k):
        return [q + k * (q - f) for q, f in zip(ref["expected"]["int8"], ref["expected"]["fp32"])]
    near, far = _judge(k_away(1.5), ref), _judge(k_away(2.5), ref)
    assert near.rel_budget > 0 and near.ok, near.reason
    assert not far.ok and "2x the quantization's own error" in far.reason


def test_an_output_a_dequantize_produces_keeps_the_grid_check(tmp_path):
    """The Tiny classifier's output comes from a dequantize (through flatten/linear's own dequantize): the grid check
    applies, the program passes it, a rescaled output fails it."""
    _, method, ref = _int8_program(Tiny(), tmp_path)
    assert ref["int8_output"]["on_grid"] is True
    program = [method.execute([x])[0] for x in ref["inputs"]]
    row = _judge(program, ref)
    assert row.ok and not row.grid_rule and row.grid_offset_lsb < 1e-3
    scaled = _judge([0.75 * y for y in program], ref)
    assert not scaled.ok and "not dequantized int8 values" in scaled.reason


TOKENS = f"{Path(__file__).resolve().parents[1] / 'converter_support' / 'user_models.py'}:tokens"


def test_a_token_id_model_declares_its_inputs_and_the_executorch_lane_takes_them(tmp_path):
    """`tokens_example_inputs()` beside the factory: the ExecuTorch programs take int64 token ids, are calibrated
    and checked on inputs from that function (held-out: other seeds), and pass; the legacy lane takes the same
    declared inputs (its CPU model bundles int64 ids; more in test_legacy_inputs.py)."""
    import torch

    from converter import ConvertSettings, convert
    from converter.executorch import ExecutorchSettings, convert_executorch
    from toolchain.records import load_reference
    from converter.host_bench import PteBenchSettings, run_pte_bench
    from appgen.executorch_app import find_program
    from toolchain.errors import UsageError

    out = tmp_path / "models"
    r = convert_executorch(ExecutorchSettings(out=out, model=TOKENS, weights="random", calibration_count=4,
                                              delegates=("xnnpack",)))
    files = {f.variant: f for f in r.files}
    assert sorted(files) == ["fp32-xnnpack", "int8-xnnpack"]
    assert files["fp32-xnnpack"].input.shape == [1, 16] and files["fp32-xnnpack"].input.dtype == "int64"
    calibration = files["int8-xnnpack"].extra["quantization"]["calibration"]
    assert calibration["source"] == "declared" and "tokens_example_inputs()" in calibration["kind"]
    ref = load_reference(out / "tokens-executorch-reference.pt")
    assert all(x.dtype == torch.int64 and x.shape == (1, 16) for x in ref["inputs"])
    bench = run_pte_bench(PteBenchSettings(models=out, out=tmp_path / "bench", per_operator=False, legacy=False,
                                           host_nnapi=False, reference_kernels="skip", warmup=1, iters=2, repeat=1))
    assert all(c.ran and c.ok for c in bench.checks), [c.reason for c in bench.checks]
    with pytest.raises(UsageError) as app:  # the app feeds a camera image: make-app refuses, naming both
        find_program(out, "fp32-xnnpack")
    assert "int64[1, 16]" in app.value.what and "float32[1, 3, H, W]" in app.value.what and app.value.exit_code == 2
    legacy = convert(ConvertSettings(out=tmp_path / "legacy", model=TOKENS, weights="random", calibration_count=4,
                                     modes=("none",), build_dir=tmp_path / "build"))
    assert [(f.file, f.input.dtype, f.input.shape) for f in legacy.files] == [("tokens-quant_none-cpu.pt", "int64",
                                                                                [1, 16])]


SEGMENTER = f"{Path(__file__).resolve().parents[1] / 'converter_support' / 'user_models.py'}:segmenter"


def test_a_dict_output_is_recorded_and_judged_output_by_output(tmp_path):
    """A model returning {"out": upsampled scores, "aux": pooled features}: both tensors are recorded as the
    reference, each with its own int8 rule ("out" after a float upsampling: no grid check), both programs pass; a
    wrong second output ("aux" off by 1.0 in the reference) fails the fp32 check (only the first was judged before)."""
    from converter.executorch import ExecutorchSettings, convert_executorch
    from converter.executorch_check import CheckRow, check_program, judge_outputs
    from toolchain.records import load_reference
    from converter.host_bench import PteBenchSettings, run_pte_bench
    from toolchain.records import host_outputs

    out = tmp_path / "models"
    r = convert_executorch(ExecutorchSettings(out=out, model=SEGMENTER, weights="random", calibration_count=4,
                                              delegates=("xnnpack",)))
    files = {f.variant: f for f in r.files}
    ref = load_reference(out / "segmenter-executorch-reference.pt")
    assert all(len(y) == 2 for y in ref["expected"]["fp32"] + ref["expected"]["int8"])
    assert [list(t.shape) for t in ref["expected"]["fp32"][0]] == [[1, 4, 224, 224], [1, 8]]
    assert [rule["on_grid"] for rule in ref["int8_outputs"]] == [False, True]
    bench = run_pte_bench(PteBenchSettings(models=out, out=tmp_path / "bench", per_operator=False, legacy=False,
                                           host_nnapi=False, reference_kernels="skip", warmup=1, iters=2, repeat=1))
    checks = {c.variant: c for c in bench.checks}
    assert checks["fp32-xnnpack"].ok and checks["int8-xnnpack"].ok, [c.reason for c in bench.checks]
    assert "output 0" in checks["int8-xnnpack"].grid_rule and "upsample" in checks["int8-xnnpack"].grid_rule
    assert checks["int8-xnnpack"].grid_offset_lsb < 1e-3  # "aux" is on its grid, and checked
    f = files["fp32-xnnpack"]
    outputs = [tuple(y) for y in host_outputs(f.path, ref["inputs"])]
    ref["expected"]["fp32"] = [(o, a + 1.0) for o, a in ref["expected"]["fp32"]]
    wrong = judge_outputs(f, outputs, ref, PteBenchSettings(models=out), CheckRow(f.variant, f.file, ran=True))
    assert not wrong.ok and "max |diff|" in wrong.reason
    assert check_program(f, load_reference(out / "segmenter-executorch-reference.pt"), PteBenchSettings(models=out)).ok


def test_inputs_declared_on_the_command_line_take_the_declared_inputs_path(tmp_path):
    """--inputs (convert.inputs) for a factory with no example-inputs function: two inputs, token ids in a range and
    a waveform; the ExecuTorch programs take them, are calibrated and host-checked on them, and the manifest says
    where they were declared; the legacy lane takes them too, the calibration record naming --inputs."""
    import torch

    from converter import ConvertSettings, convert
    from converter.executorch import ExecutorchSettings, convert_executorch
    from toolchain.records import load_reference

    model = TOKENS.rsplit(":", 1)[0] + ":tokens_and_audio"
    inputs = "int64[1,8]@0:50;float32[1,1,64]"
    out = tmp_path / "models"
    r = convert_executorch(ExecutorchSettings(out=out, model=model, weights="random", calibration_count=4,
                                              delegates=("xnnpack",), inputs=inputs))
    files = {f.variant: f for f in r.files}
    assert sorted(files) == ["fp32-xnnpack", "int8-xnnpack"]
    assert [(i["dtype"], i["shape"]) for i in files["fp32-xnnpack"].extra["inputs"]] == [("int64", [1, 8]),
                                                                                         ("float32", [1, 1, 64])]
    assert all(f.extra["host_check"]["ran"] for f in files.values())
    calibration = files["int8-xnnpack"].extra["quantization"]["calibration"]
    assert calibration["source"] == "declared" and f"--inputs {inputs}" in calibration["kind"]
    ref = load_reference(out / "tokens_and_audio-executorch-reference.pt")
    assert all(t.dtype == torch.int64 and int(t.max()) < 50 and a.shape == (1, 1, 64) for t, a in ref["inputs"])
    legacy = convert(ConvertSettings(out=tmp_path / "legacy", model=model, weights="random", calibration_count=4,
                                     modes=("none",), build_dir=tmp_path / "build", inputs=inputs))
    assert [(s.dtype, s.shape) for s in legacy.files[0].inputs] == [("int64", [1, 8]), ("float32", [1, 1, 64])]
    assert f"--inputs {inputs}" in legacy.files[0].conversion["calibration"]["kind"]


def test_a_refused_int8_program_leaves_the_fp32_programs_made_and_recorded(tmp_path):
    """A model whose int8 quantization collapses (constant output): its int8 program is refused on its own, with
    the reason in the manifest, the fp32 programs are written and recorded, and convert exits 10 (PartlyConverted)
    naming both; run again, the refusal stays and nothing made before is lost (the reference file included)."""
    from converter.executorch import ExecutorchSettings, convert_executorch
    from toolchain.errors import PartlyConverted
    from toolchain.records import load_section

    out = tmp_path / "models"
    settings = ExecutorchSettings(out=out, model=TOKENS.rsplit(":", 1)[0] + ":collapses_in_int8", weights="random",
                                  calibration_count=4, delegates=("xnnpack", "portable"))
    for _ in range(2):
        with pytest.raises(PartlyConverted) as e:
            convert_executorch(settings)
        assert e.value.exit_code == 10 and "int8-xnnpack" in e.value.what and "fp32-xnnpack" in e.value.what
        assert "constant output" in e.value.cause
        section = load_section(out)
        assert sorted(f["file"] for f in section["files"]) == ["collapses_in_int8-fp32-portable.pte",
                                                               "collapses_in_int8-fp32-xnnpack.pte"]
        assert all((out / f["file"]).is_file() for f in section["files"])
        assert not (out / "collapses_in_int8-int8-xnnpack.pte").exists()
        assert "constant output" in section["conversions"]["collapses_in_int8"]["refused"]["int8-xnnpack"]
        assert (out / section["reference"]["collapses_in_int8"]["file"]).is_file()
    # make-app says why the refused program is missing (not "run convert": it would refuse it again)
    from appgen.executorch_app import find_program
    from toolchain.records import RefusedVariant

    with pytest.raises(RefusedVariant) as missing:
        find_program(out, "int8-xnnpack")
    assert "collapses_in_int8-int8-xnnpack was not made" in missing.value.what
    assert "constant output" in missing.value.cause and "fp32-xnnpack" in missing.value.remedy


def test_quant_none_asks_for_the_fp32_programs_alone(tmp_path, monkeypatch):
    """--quant none (ExecutorchSettings.quant): the fp32 programs only, no PT2E quantization tried (a model whose
    int8 program would be refused converts whole: exit 0), and the manifest records what was asked; the later
    stages' reference has the fp32 expectations only."""
    from converter import executorch
    from converter.executorch import ExecutorchSettings, convert_executorch
    from toolchain.records import load_reference
    from toolchain.records import load_section

    def no_pt2e(*args, **kwargs):
        raise AssertionError("PT2E quantization ran for fp32 programs only")

    monkeypatch.setattr(executorch, "quantize_pt2e", no_pt2e)
    out = tmp_path / "models"
    result = convert_executorch(ExecutorchSettings(out=out, model=TOKENS.rsplit(":", 1)[0] + ":collapses_in_int8",
                                                   weights="random", calibration_count=4, quant=("none",),
                                                   delegates=("xnnpack", "portable")))
    assert sorted(result.built) == ["fp32-portable", "fp32-xnnpack"] and not result.not_made
    conv = load_section(out)["conversions"]["collapses_in_int8"]
    assert conv["asked"] == {"quant": ["none"], "precisions": ["fp32"], "delegates": ["portable", "xnnpack"]}
    assert not conv["refused"] and not (out / "collapses_in_int8-int8-xnnpack.pte").exists()
    assert set(load_reference(out / "collapses_in_int8-executorch-reference.pt")["expected"]) == {"fp32"}


def test_an_int8_program_the_runtime_cannot_load_names_the_fp32_programs_made_and_quant_none(tmp_path, monkeypatch):
    """A stand-in for swin_t's int8 XNNPACK program (written, but ExecuTorch's host runtime cannot load it): refused
    on its own, and its fix (the error's and the manifest's) names the fp32 program that was made and `--quant none`,
    which asks for it alone and then converts with exit 0, the program kept."""
    from converter import executorch
    from converter.executorch import ExecutorchSettings, convert_executorch
    from toolchain.errors import PartlyConverted, RecordError
    from toolchain.records import load_section

    real = executorch.load_method

    def int8_does_not_load(path):
        if "-int8-" in Path(path).name:
            raise RecordError(f"{path}: ExecuTorch cannot load its forward method (damaged?)",
                              cause="Failed to load method forward (stand-in for XNNPACK's delegate init)")
        return real(path)

    monkeypatch.setattr(executorch, "load_method", int8_does_not_load)
    out = tmp_path / "models"
    settings = dict(out=out, model=TOKENS.rsplit(":", 1)[0] + ":tiny", weights="random", calibration_count=4,
                    delegates=("xnnpack",))
    with pytest.raises(PartlyConverted) as e:
        convert_executorch(ExecutorchSettings(**settings))
    assert "does not run in ExecuTorch's host runtime" in e.value.cause and "stand-in" in e.value.cause
    assert "fp32-xnnpack" in e.value.remedy and "`--quant none`" in e.value.remedy and "--debug" in e.value.remedy
    refused = load_section(out)["conversions"]["tiny"]["refused"]["int8-xnnpack"]
    assert "fix: the fp32 program(s) of this model were made (fp32-xnnpack): `--quant none`" in refused
    again = convert_executorch(ExecutorchSettings(**settings, quant=("none",)))  # what the fix says: exit 0
    assert [f.variant for f in again.files] == ["fp32-xnnpack"] and not again.not_made


def test_the_legacy_lane_takes_a_dict_output_and_refuses_only_its_nnapi_models(tmp_path):
    """A model returning {"out": ..., "aux": ...} (segmentation-style): the legacy lane traces it (strict=False), makes
    and host-checks its CPU models (none and full, FX-quantized), refuses its NNAPI models per mode naming the dict
    output and the ExecuTorch lane, and bench times the CPU models."""
    from converter import ConvertSettings, convert
    from converter.host_bench import HostBenchSettings, run_host_bench

    out = tmp_path / "models"
    r = convert(ConvertSettings(out=out, model=TOKENS.rsplit(":", 1)[0] + ":segmenter", weights="random",
                                calibration_count=4, modes=("none", "full"), build_dir=tmp_path / "build"))
    assert sorted(f.file for f in r.files) == ["segmenter-quant_full-cpu.pt", "segmenter-quant_none-cpu.pt"]
    assert sorted(x.mode for x in r.refused) == ["full", "none"]
    assert all("Dict[str, Tensor]" in x.line() and "--format executorch" in x.line() for x in r.refused)
    bench = run_host_bench(HostBenchSettings(models=out, warmup=1, iters=2, threads=1, repeat=1, out=tmp_path / "b"))
    assert sorted(row.mode for row in bench.rows) == ["full", "none"] and all(row.timing.median_ms > 0 for row in bench.rows)
