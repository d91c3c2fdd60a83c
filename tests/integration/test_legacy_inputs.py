"""The legacy TorchScript lane takes a model's declared inputs (issue 35 item 4): token ids, a waveform, several
tensors, declared beside the factory (`<factory>_example_inputs()`) or with `convert --inputs`.  Small models
converted here (a few seconds each): CPU models of every mode made and host-checked on those inputs, bundled with
them (what `bench --host`, the host references deploy compares with and speed_benchmark_torch's
--use_bundled_input take), FX graph mode quantization calibrated on them; NNAPI models made where torch's converter
takes the model and refused per mode with the real reason where it does not; make-app refuses what the app cannot
feed."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # FX quantization and TorchScript export of small models (~10 s each)

MODELS = Path(__file__).resolve().parents[1] / "converter_support" / "user_models.py"


def _convert(tmp_path, factory, modes, inputs=None):
    from converter import ConvertSettings, convert

    return convert(ConvertSettings(out=tmp_path / "models", model=f"{MODELS}:{factory}", weights="random",
                                   calibration_count=4, modes=modes, build_dir=tmp_path / "build", inputs=inputs))


def _bundled(path):
    import torch

    return torch.jit.load(str(path)).get_all_bundled_inputs()


def test_a_1d_conv_audio_net_gets_cpu_models_and_a_named_nnapi_refusal(tmp_path):
    """`audio_example_inputs()` declares a float32[1, 1, 256] waveform: quant_none and quant_full (FX graph mode: a
    plain residual add; its input quantized) are made, bundled with a waveform and host-checked; their NNAPI models are
    refused per mode naming the 1-D convolution (torch's converter converts 2-D convolutions of 4-D inputs only,
    docs/facts.md LI3), not an image size; bench --host times both, and the host reference deploy compares with is
    computed on the bundled waveform."""
    from converter.host_bench import HostBenchSettings, run_host_bench
    from host_nnapi.references import bundled_outputs

    r = _convert(tmp_path, "audio", ("none", "full"))
    files = {f.file: f for f in r.files}
    assert sorted(files) == ["audio-quant_full-cpu.pt", "audio-quant_none-cpu.pt"]
    none, full = files["audio-quant_none-cpu.pt"], files["audio-quant_full-cpu.pt"]
    assert (none.input.dtype, none.input.shape) == ("float32", [1, 1, 256])
    assert (full.input.dtype, full.input.shape) == ("quint8", [1, 1, 256]) and full.input.scale > 0
    assert r.host_check["models"] and all(not m["constant"] for m in r.host_check["models"])
    assert none.conversion["quantization"]["scheme"] == "fx"
    assert none.conversion["calibration"]["source"] == "declared"
    (x,), = _bundled(none.path)
    assert x.shape == (1, 1, 256) and x.dtype.is_floating_point
    assert sorted(x.mode for x in r.refused) == ["full", "none"]
    assert all("1-D convolution" in x.line() and "--format executorch" in x.line() for x in r.refused)
    bench = run_host_bench(HostBenchSettings(models=tmp_path / "models", warmup=1, iters=2, threads=1, repeat=1,
                                             out=tmp_path / "bench"))
    assert sorted(row.mode for row in bench.rows) == ["full", "none"] and all(row.timing.median_ms > 0 for row in bench.rows)
    (ref,), inputs = bundled_outputs(none.path)
    assert ref.shape == [1, 4] and inputs == 1


def test_token_ids_go_in_as_they_are_and_make_app_refuses_the_model(tmp_path):
    """`tokens_example_inputs()` declares int64[1, 16] token ids: quant_none and quant_core (FX graph mode, the ids
    passed as they are, nothing quantized at the input) are made and bundled with int64 ids; the NNAPI refusal names
    the int64 input (torch's serializer takes float32, int32 and quantized inputs, docs/facts.md LI2) and
    aten::embedding; make-app refuses the model, naming what it takes and what the app feeds (exit 2)."""
    import torch

    from appgen.make import AppSettings, plan
    from toolchain.errors import UsageError

    r = _convert(tmp_path, "tokens", ("none", "core"))
    assert sorted(f.file for f in r.files) == ["tokens-quant_core-cpu.pt", "tokens-quant_none-cpu.pt"]
    for f in r.files:
        (ids,), = _bundled(f.path)
        assert ids.dtype == torch.int64 and ids.shape == (1, 16) and f.input.dtype == "int64"
    assert all("is int64" in x.line() and "aten::embedding" in x.line() for x in r.refused)
    assert r.host_check["top1_agreement"]["core"]["total"] == 4
    with pytest.raises(UsageError) as e:
        plan(AppSettings(model="tokens-quant_none", models=tmp_path / "models", out=tmp_path / "app",
                         build_dir=tmp_path / "build"))
    assert "int64[1, 16]" in e.value.what and "float32[1, 3, H, W]" in e.value.what and e.value.exit_code == 2
    assert "pytorch_android" in e.value.remedy


def test_two_inputs_declared_on_the_command_line_are_bundled_together(tmp_path):
    """--inputs "int64[1,8]@0:50;float32[1,1,64]": each CPU model takes both (a bundled input is the tuple of both,
    which speed_benchmark_torch's --use_bundled_input passes as the arguments, docs/facts.md LI1); the manifest lists
    both inputs; quant_full quantizes the waveform only (its scale recorded per input) and agrees with the float
    model; deploy's --bundled-input -1 command names both inputs."""
    import torch

    from deploy.bench import BenchOptions, bench_args

    inputs = "int64[1,8]@0:50;float32[1,1,64]"
    r = _convert(tmp_path, "tokens_and_audio", ("none", "full"), inputs)
    files = {f.mode: f for f in r.files}
    assert sorted(files) == ["full", "none"]
    ids, audio = _bundled(files["none"].path)[0]
    assert ids.dtype == torch.int64 and int(ids.max()) < 50 and audio.shape == (1, 1, 64)
    assert [(s.dtype, s.shape) for s in files["full"].inputs] == [("int64", [1, 8]), ("quint8", [1, 1, 64])]
    qp = files["full"].extra["core_quantization"]["inputs"]
    assert qp[0] is None and qp[1]["scale"] > 0
    assert r.host_check["top1_agreement"]["full"]["total"] == 4
    args = bench_args(files["none"].file, "cpu", BenchOptions(bundled_input=-1), files["none"].inputs)
    assert "--input_dims=1,8;1,1,64" in args and "--input_type=int64;float" in args


def test_a_feature_vector_model_gets_its_nnapi_models(tmp_path):
    """`features_example_inputs()` declares float32[1, 32]: torch's NNAPI converter takes a 2-D float input and
    linear layers, so every mode gets its NNAPI model too (nothing is refused for not being an image)."""
    r = _convert(tmp_path, "features", ("none", "core", "full"))
    assert sorted(f.file for f in r.files if f.backend == "nnapi") == [
        "features-quant_core-nnapi.pt", "features-quant_full-nnapi.pt", "features-quant_none-nnapi.pt"]
    assert not r.refused


def test_two_float_inputs_get_nnapi_models_that_the_host_verify_runs(tmp_path):
    """`two_features_example_inputs()` declares float32[1, 32] and float32[1, 8]: each mode's NNAPI model takes
    both (torch's converter generates one argument per input, docs/facts.md LI2), and `invoke verify` runs the CPU
    and NNAPI models on both bundled and random inputs of both (end to end; the operation-by-operation reference is
    built for one input and says so) and passes."""
    from host_nnapi.verify import VerifySettings, verify

    r = _convert(tmp_path, "two_features", ("none", "full"))
    assert sorted(f.file for f in r.files if f.backend == "nnapi") == ["two_features-quant_full-nnapi.pt",
                                                                       "two_features-quant_none-nnapi.pt"]
    assert [len(args) for args in _bundled(tmp_path / "models" / "two_features-quant_full-nnapi.pt")] == [2]
    result = verify(VerifySettings(models=tmp_path / "models", cache=tmp_path / "build" / "cache"))
    assert sorted(row.variant for row in result.rows) == ["two_features-quant_full", "two_features-quant_none"]
    assert result.ok, [(row.variant, row.failures) for row in result.rows]
    assert all(row.inputs > 1 and "several inputs" in row.layerwise_note for row in result.rows)


def test_a_two_input_model_deploys_and_the_phones_outputs_are_checked(tmp_path, standin):
    """`invoke deploy` of a two-input model (CPU and NNAPI, none and full) to a virtual phone whose benchmark binary
    prints each model's real output on its bundled input (the tuple of both inputs, docs/facts.md LI1): every
    model is timed and agrees with the host's reference; with --bundled-input -1 the binary is given one
    --input_dims/--input_type/--input_memory_format item per input, which the stand-in checks as upstream's
    create_inputs does, and quant_none's two models are timed (quant_full takes quint8, which the binary cannot make:
    refused before anything is pushed, as for an image model)."""
    import shutil

    from host_nnapi.build import cache_root
    from tests.deploy_support.fixtures import invoke_cli, write_build_info
    from tests.virtual_device.harness import adb_with_devices
    from toolchain.records import ConvertManifest, DeployResults, deploy_results_path

    if shutil.which("adb") is None:
        pytest.skip("adb is not installed (./run test installs it)")
    root = Path(__file__).resolve().parents[2]
    helper = (f"env PYTHONPATH={root} TORCHDROID_HOST_NNAPI_CACHE={cache_root()} \"$VDEV_PYTHON\" "
              f"{root / 'tests' / 'deploy_support' / 'print_output.py'}")
    _convert(tmp_path, "two_features", ("none", "full"))
    models = tmp_path / "models"
    commit = ConvertManifest.load(models).files[0].torch_git_version
    build_info = write_build_info(tmp_path / "android", standin, commit=commit)
    work = tmp_path / "work"
    work.mkdir()
    args = ["deploy", "--models", str(models), "--build-info", str(build_info), "--iter", "2", "--repeat", "1",
            "--warmup", "0", "--project", "inputs"]
    with adb_with_devices(tmp_path / "adb", {"p": {"env": {"SBT_OUTPUT_CMD": helper}}}) as (server, _):
        r = invoke_cli(work, *args, "--results", str(tmp_path / "results"), port=server.port)
        assert r.returncode == 0, r.stdout + r.stderr
        verdicts = DeployResults.load(deploy_results_path(tmp_path / "results", "latest")).numerics
        assert len(verdicts) == 4 and all(v.verdict == "agrees" for v in verdicts), verdicts
        flags = invoke_cli(work, *args, "--bundled-input", "-1", "--variant", "quant_none", "--results",
                           str(tmp_path / "results-flags"), port=server.port)
        assert flags.returncode == 0, flags.stdout + flags.stderr
    rows = DeployResults.load(deploy_results_path(tmp_path / "results-flags", "latest")).rows
    assert len(rows) == 2 and all(row.status == "ok" for row in rows), [(row.file, row.status) for row in rows]


def test_pre_quantized_weights_are_refused_for_a_model_with_declared_inputs(tmp_path):
    """--quantized-weights PATH loads into eager mode's one-image structure: for a model declaring its inputs it is a
    usage error (exit 2) naming where they were declared and the default that works (calibrate), before any file."""
    from converter import ConvertSettings, convert
    from toolchain.errors import UsageError

    weights = tmp_path / "q.pth"
    weights.write_bytes(b"not read")
    with pytest.raises(UsageError) as e:
        convert(ConvertSettings(out=tmp_path / "models", model=f"{MODELS}:tokens", weights="random",
                                calibration_count=4, modes=("none", "full"), build_dir=tmp_path / "build",
                                quantized_weights=str(weights)))
    assert e.value.exit_code == 2 and "tokens_example_inputs()" in e.value.cause and "calibrate" in e.value.remedy
    assert not list((tmp_path / "models").glob("*.pt"))
