"""invoke convert against real torch/torchvision (random weights: pretrained ones need a network)."""

import json
import os
import sys
from pathlib import Path

import pytest

from tests import cli
from toolchain.fsutil import OWNER_MARKER
from toolchain.records import ConvertManifest
from tests.virtual_device.harness import held_dead_port

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "converter_support" / "user_models.py"


def invoke(*args, env=None, cwd=ROOT):
    full_env = dict(os.environ, CI="1")
    full_env.update(env or {})
    return cli.invoke(cwd, "--search-root", str(ROOT), *args, env=full_env, timeout=600)


def _written(directory: Path) -> list:
    """What a run left in a directory, beside the ownership marker of the directory it made."""
    return [p for p in directory.iterdir() if p.name != OWNER_MARKER]


def test_six_files_and_manifest(mobilenet_models):
    out, result = mobilenet_models
    names = sorted(p.name for p in out.glob("*.pt"))
    assert names == sorted(f"mobilenetv2-quant_{m}-{b}.pt" for m in ("none", "core", "full") for b in ("cpu", "nnapi"))
    assert not [p for p in out.iterdir() if p.name.endswith(".partial")]
    man = ConvertManifest.load(out)
    assert len(man.files) == 6
    for f in man.files:
        f.check_hash()
        assert f.size == f.path.stat().st_size
        assert f.input.shape == [1, 3, 224, 224] and f.input.memory_format == "channels_last"
        assert f.output.shape == [1, 1000]
        if f.mode == "full":
            assert f.input.dtype == "quint8" and 0 < f.input.scale < 1 and 0 <= f.input.zero_point <= 255
            assert f.output.dtype == "quint8" and f.output.scale > 0
        else:
            assert f.input.dtype == "float32" and f.input.scale is None
        if f.mode == "core":
            assert f.extra["core_quantization"]["input"]["scale"] > 0
    conv = man.conversions["mobilenetv2"]
    assert conv["weights"]["origin"] == "random" and "batchnorm_statistics" in conv["weights"]
    assert conv["calibration"] == {"source": "synthetic", "count": 8, "seed": 0,
                                   "kind": conv["calibration"]["kind"]}
    import torch

    assert conv["torch"]["version"].split("+")[0] == torch.__version__.split("+")[0]
    assert conv["torch"]["git_version"] == torch.version.git_version
    assert conv["mobile_optimization"]["applied"] is torch._C._is_xnnpack_enabled()
    assert set(conv["host_check"]["top1_agreement"]) == {"core", "full"}


def test_models_run_on_bundled_inputs(mobilenet_models):
    import torch

    out, _ = mobilenet_models
    man = ConvertManifest.load(out)
    for f in man.files:
        m = torch.jit.load(str(f.path))
        (inp,) = m.get_all_bundled_inputs()[0]
        assert list(inp.shape) == f.input.shape
        assert str(inp.dtype).replace("torch.", "") == f.input.dtype
        assert inp.is_contiguous(memory_format=torch.channels_last)
        if f.backend == "cpu":
            with torch.no_grad():
                y = m(inp)
            y = y.dequantize() if y.is_quantized else y
            assert y.shape == (1, 1000) and float(y.max() - y.min()) > 0
        else:
            # the NNAPI model needs libneuralnetworks.so to run; its serialized model is there
            assert "_nnapi" in str(m.graph) or m.mod is not None


def test_incremental_reuse_subset_and_force(tmp_path):
    """Reuse, a subset, a changed input and --force, on a model of its own: the session's converted MobileNetV2 is
    read by other tests (in other workers) while this one rebuilds files."""
    from converter import ConvertSettings, convert

    out = tmp_path / "models"

    def run(**kw):
        return convert(ConvertSettings(out=out, model=f"{SUPPORT}:tiny", weights="random", calibration_count=4,
                                       build_dir=tmp_path, **kw))

    run()
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.pt")}
    assert len(before) == 6
    again = run()
    assert again.reused and again.built_modes == []
    sub = run(modes=("full",))
    assert sub.reused and [f.mode for f in sub.files] == ["full", "full"]
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.pt")} == before
    # a different input (the seed) rebuilds only what was asked for
    changed = run(modes=("none",), seed=1)
    assert changed.built_modes == ["none"]
    after = {p.name: p.stat().st_mtime_ns for p in out.glob("*.pt")}
    assert after["tiny-quant_none-cpu.pt"] != before["tiny-quant_none-cpu.pt"]
    assert after["tiny-quant_full-cpu.pt"] == before["tiny-quant_full-cpu.pt"]
    assert len(ConvertManifest.load(out).files) == 6
    forced = run(modes=("none",), force=True)
    assert forced.built_modes == ["none"]
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.pt")}["tiny-quant_full-cpu.pt"] == before[
        "tiny-quant_full-cpu.pt"]


def test_tampered_file_is_rebuilt(tmp_path):
    from converter import ConvertSettings, convert

    model = f"{SUPPORT}:tiny"
    s = ConvertSettings(out=tmp_path / "m", model=model, modes=("full",), weights="random", calibration_count=4,
                        build_dir=tmp_path)
    convert(s)
    victim = tmp_path / "m" / "tiny-quant_full-cpu.pt"
    victim.write_bytes(b"corrupt")
    res = convert(s)
    assert res.built_modes == ["full"]
    ConvertManifest.load(tmp_path / "m").find("tiny-quant_full")["cpu"].check_hash()


@pytest.mark.slow
def test_user_factory_and_calibration_dir(tmp_path):
    from PIL import Image

    calib = tmp_path / "images"
    calib.mkdir()
    for i in range(3):
        Image.new("RGB", (64 + 10 * i, 48), (40 * i, 100, 200 - 30 * i)).save(calib / f"img{i}.png")
    r = invoke("convert", "--model", f"{SUPPORT}:tiny", "--weights", "random", "--calibration", str(calib),
               "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    man = ConvertManifest.load(tmp_path / "out")
    assert sorted(f.file for f in man.files) == sorted(
        f"tiny-quant_{m}-{b}.pt" for m in ("none", "core", "full") for b in ("cpu", "nnapi"))
    cal = man.conversions["tiny"]["calibration"]
    assert cal["source"] == "dir" and cal["count"] == 3 and len(cal["digest"]) == 64
    assert "tiny-quant_full-cpu.pt" in r.stdout and "manifest:" in r.stdout


def test_weights_file_is_recorded_and_mismatch_is_explained(tmp_path):
    import torch

    sys.path.insert(0, str(SUPPORT.parent))
    try:
        from user_models import Tiny
    finally:
        sys.path.pop(0)
    good = tmp_path / "tiny.pth"
    torch.save(Tiny().state_dict(), good)
    r = invoke("convert", "--model", f"{SUPPORT}:tiny", "--weights", str(good), "--quant", "none",
               "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    w = ConvertManifest.load(tmp_path / "out").conversions["tiny"]["weights"]
    assert w["origin"] == "file" and w["path"] == str(good.resolve()) and len(w["sha256"]) == 64
    bad = tmp_path / "other.pth"
    torch.save(torch.nn.Linear(2, 2).state_dict(), bad)
    r = invoke("convert", "--model", f"{SUPPORT}:tiny", "--weights", str(bad), "--quant", "none",
               "--out", str(tmp_path / "out2"))
    assert r.returncode == 6
    assert "do not fit the model" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args, code, needles",
    [
        (["--model", "vgg16"], 2, ["unknown model 'vgg16'", "mobilenet_v2", "file.py:factory"]),
        (["--quant", "half"], 2, ["'half'", "none, core, full"]),
        (["--weights", "imagenet"], 2, ["neither 'pretrained', 'random' nor an existing file", "--weights random"]),
        (["--calibration", "/nonexistent/images"], 2, ["does not exist", "built-in synthetic set"]),
        (["--model", "missing.py:factory"], 2, ["does not exist"]),
    ],
)
def test_bad_input_messages(tmp_path, args, code, needles):
    r = invoke("convert", "--out", str(tmp_path / "out"), *args)
    assert r.returncode == code, (r.returncode, r.stderr)
    for n in needles:
        assert n in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_empty_calibration_dir_and_unwritable_out(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    r = invoke("convert", "--weights", "random", "--calibration", str(empty), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "has no images" in r.stderr
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = invoke("convert", "--weights", "random", "--out", str(blocker / "sub"))
    assert r.returncode == 2 and "--out" in r.stderr and f"{blocker} is a file, not a directory" in r.stderr
    r = invoke("convert", "--weights", "random", "--out", str(blocker))
    assert r.returncode == 2 and "not a directory" in r.stderr


def test_unsupported_op_names_op_and_place(tmp_path):
    """NNAPI cannot take aten::sin: the CPU model is written, the NNAPI refusal recorded with the op and place."""
    r = invoke("convert", "--model", f"{SUPPORT}:with_sin", "--weights", "random", "--quant", "none",
               "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    text = r.stdout + r.stderr
    assert "cannot handle aten::sin" in text and "user_models.py:" in text  # what and where
    assert "Traceback" not in text
    assert sorted(p.name for p in _written(tmp_path / "out")) == ["manifest.json", "with_sin-quant_none-cpu.pt"]
    (refused,) = ConvertManifest.load(tmp_path / "out").refused
    assert refused.file == "with_sin-quant_none-nnapi.pt" and "aten::sin" in refused.reason


def test_a_model_nnapi_refuses_still_gets_its_cpu_models(tmp_path):
    """MobileNetV3's hardswish/hardsigmoid: every mode's CPU model, each NNAPI refusal typed in the manifest, and the
    lane that takes the model named (before: exit 6, nothing written, no word of --format executorch)."""
    out = tmp_path / "out"
    few = {"INVOKE_CONVERT_CALIBRATION_COUNT": "4"}
    r = invoke("convert", "--model", f"{SUPPORT}:tiny_hardswish", "--weights", "random", "--out", str(out), env=few)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in _written(out)) == ["manifest.json"] + [
        f"tiny_hardswish-quant_{m}-cpu.pt" for m in ("core", "full", "none")]
    manifest = ConvertManifest.load(out)
    assert sorted((f.mode, f.backend) for f in manifest.files) == [("core", "cpu"), ("full", "cpu"), ("none", "cpu")]
    refused = {r.mode: r for r in manifest.refused}
    assert sorted(refused) == ["core", "full", "none"]
    for mode, refusal in refused.items():
        assert refusal.file == f"tiny_hardswish-quant_{mode}-nnapi.pt" and refusal.stem == "tiny_hardswish"
        assert "aten::hardswish" in refusal.reason and "aten::hardsigmoid" in refusal.reason
        assert "--format executorch" in refusal.alternative
    assert "--format executorch" in r.stdout and "no NNAPI model for tiny_hardswish-quant_full" in r.stdout
    # the same request again is up to date (the refusal stands for the NNAPI file)
    again = invoke("convert", "--model", f"{SUPPORT}:tiny_hardswish", "--weights", "random", "--out", str(out),
                   env=few)
    assert again.returncode == 0 and "(reused: " in again.stdout, again.stdout + again.stderr


def test_degenerate_quantization_is_refused(tmp_path):
    r = invoke("convert", "--model", f"{SUPPORT}:dead", "--weights", "random", "--quant", "core",
               "--out", str(tmp_path / "out"))
    assert r.returncode == 6, r.stderr
    assert "degenerate" in r.stderr and "float floor" in r.stderr and "--calibration" in r.stderr
    assert _written(tmp_path / "out") == []


def test_a_factory_s_untrained_batchnorm_is_estimated_as_torchvision_s_and_its_int8_model_no_longer_collapses(tmp_path):
    """A factory model (--weights random: as the factory returns it) whose BatchNorm layers all have the untrained
    statistics: without them estimated its activations shrink to the float floor and quant_full is refused as
    degenerate (seen before the change); estimated on the calibration inputs as torchvision's random weights' are,
    both modes are made, the manifest records it and the run's notes say it once."""
    from converter import ConvertSettings, convert

    r = convert(ConvertSettings(out=tmp_path / "m", model=f"{SUPPORT}:shrinks", weights="random", calibration_count=4,
                                modes=("none", "full"), build_dir=tmp_path / "b"))
    assert sorted(f.mode for f in r.files if f.backend == "cpu") == ["full", "none"] and not r.refused
    record = r.files[0].conversion["weights"]
    assert record["origin"] == "random" and "factory returned them untrained" in record["batchnorm_statistics"]
    assert len([n for n in r.notes if "BatchNorm statistics estimated" in n]) == 1


def test_a_refused_quantized_mode_keeps_the_float_model_and_exits_10(tmp_path):
    """Each mode is made or refused on its own (issue 35 item 1): quant_core's degenerate calibration leaves quant_none
    made, the refusal in the manifest and the table, and the exit status says some were refused (docs/convert.md)."""
    out = tmp_path / "out"
    r = invoke("convert", "--model", f"{SUPPORT}:dead", "--weights", "random", "--quant", "none,core", "--no-verify",
               "--out", str(out), env={"INVOKE_CONVERT_CALIBRATION_COUNT": "4"})
    assert r.returncode == 10, r.stdout + r.stderr
    assert "not made: dead-quant_core-cpu.pt" in r.stdout and "dead-quant_none-cpu.pt" in r.stdout
    assert "partly made" in r.stderr and "quant_core: quantization of dead (quantized modes) is degenerate" in r.stderr
    assert "--quant none" in r.stderr and r.stderr.count("is degenerate") == 1  # said once
    manifest = ConvertManifest.load(out)
    assert {f.mode for f in manifest.files} == {"none"}
    assert "degenerate" in manifest.conversions["dead"]["refused"]["quant_core"]
    assert "core" not in manifest.conversions["dead"]["mode_keys"]  # tried again next time


def test_factory_returning_non_module(tmp_path):
    r = invoke("convert", "--model", f"{SUPPORT}:not_a_module", "--weights", "random", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "not a torch.nn.Module" in r.stderr


def test_pretrained_offline_names_alternatives(tmp_path):
    # A proxy on a closed local port makes the download fail the way an offline machine does.
    r = invoke("convert", "--weights", "pretrained", "--quant", "none", "--out", str(tmp_path / "o"),
               env={"TORCH_HOME": str(tmp_path / "torch-home"), "https_proxy": f"http://127.0.0.1:{held_dead_port()}",
                    "HTTPS_PROXY": f"http://127.0.0.1:{held_dead_port()}"})
    assert r.returncode == 2, r.stderr
    assert "could not be downloaded" in r.stderr
    assert "--weights random" in r.stderr and "--weights path/to/state_dict.pth" in r.stderr
    assert "https://download.pytorch.org/models/mobilenet_v2-" in r.stderr and "checkpoints" in r.stderr
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_host_bench_writes_results(mobilenet_models, tmp_path):
    from converter.host_bench import HostBenchSettings, run_host_bench

    out, _ = mobilenet_models
    res = run_host_bench(HostBenchSettings(models=out, warmup=1, iters=3, threads=1, out=tmp_path))
    assert [r.mode for r in res.rows] == ["none", "core", "full"]
    assert all(r.timing.min_ms <= r.timing.median_ms <= r.timing.p90_ms <= r.timing.max_ms for r in res.rows)
    # load, first inference, warm-up, repeats with their spread, peak memory: measured, not left at 0
    assert all(t.load_ms > 0 and t.first_ms > 0 and t.warmup_ms > 0 and t.repeats == 3
               and t.std_ms >= 0 and t.unstable == (t.spread_pct > 10.0) for t in (r.timing for r in res.rows))
    data = json.loads(res.json_path.read_text())
    assert data["kind"] == "torchdroid.host-bench" and len(data["rows"]) == 3
    assert res.csv_path.read_text().startswith("file,variant,mode")
    from toolchain.fsutil import ownership  # the bench directory is torchdroid's per file (issue 34 item 1)

    assert sorted(ownership(tmp_path).ours) == ["host-bench.csv", "host-bench.json"]
    # how the rounds were taken (issue 32 item 5): this machine's /proc, the threads pinned for the rounds
    taken = data["conditions"]
    assert taken == res.conditions.as_dict() and taken["threads"] == 1 and taken["cores"] >= 1
    assert len(taken["load_before"]) == 3 and taken["others_cpu_pct"] is not None and taken["seconds"] > 0
    assert taken["busy"] == (taken["others_cpu_pct"] > 10.0)
    assert all("noisy" in r for r in data["ratios"])


def test_bench_without_manifest_says_run_convert(tmp_path):
    r = invoke("bench", "--models", str(tmp_path))
    assert r.returncode == 5 and "invoke convert" in r.stderr


def test_unchanged_convert_decides_without_torch_and_without_verifying_again(tmp_path):
    """The no-op path: hashes and records alone (no torch import), verify.json reused while current."""
    args = ("convert", "--model", f"{SUPPORT}:tiny", "--weights", "random", "--quant", "none", "--out", "m")
    env = {"INVOKE_CONVERT_CALIBRATION_COUNT": "8"}
    first = invoke(*args, env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    if not (tmp_path / "m" / "verify.json").is_file():
        pytest.skip("no host NNAPI here (no C compiler): nothing to reuse")
    again = invoke(*args, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "verify: up to date" in again.stdout
    imported = [line for line in again.stderr.splitlines() if line.rstrip().endswith("| torch")]
    assert not imported, "an unchanged convert imported torch"
    (tmp_path / "invoke.yaml").write_text("verify:\n  max_lsb: 3\n")  # other settings: verify again
    other = invoke("-f", "invoke.yaml", *args, env=env, cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    assert "verify: up to date" not in other.stdout and "results:" in other.stdout


@pytest.mark.slow
def test_the_default_weights_work_offline_and_say_they_are_random(tmp_path):
    """`invoke convert` as the README's first command after `./run main`, offline, from another directory with no
    options and an empty home: the same default as `invoke all` (auto), so it converts with random weights, says so
    as a warning and records `random` (it exited 2 demanding pretrained weights before)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INVOKE_", "TORCH_HOME", "XDG_"))}
    env.update({"HOME": str(home), "https_proxy": f"http://127.0.0.1:{held_dead_port()}", "HTTPS_PROXY": f"http://127.0.0.1:{held_dead_port()}", "CI": "1"})
    work = tmp_path / "work"
    work.mkdir()
    r = cli.invoke(work, "--search-root", str(ROOT), "convert", "--quant", "none", "--no-verify", env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "RANDOM weights" in r.stderr
    manifest = json.loads((work / "build" / "models" / "manifest.json").read_text())
    weights = {c["weights"]["origin"] for c in manifest["conversions"].values()}
    assert weights == {"random"}, weights
