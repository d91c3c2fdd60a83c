"""Records are true (issue 21 item 2): the seed a manifest states is the seed the weights came from, and two
models never write files of the same name."""

from __future__ import annotations

import shutil

import pytest

from converter import ConvertSettings, convert
from tests.adversarial.harness import ROOT
from toolchain.errors import UsageError
from toolchain.records import ConvertManifest

SUPPORT = ROOT / "tests" / "converter_support" / "user_models.py"


def _convert(out, model, seed=0):
    return convert(ConvertSettings(out=out, model=model, modes=("none",), weights="random", seed=seed,
                                   calibration_count=2, build_dir=out.parent / "build"))


def _weights(out):
    import torch

    f = next(f for f in ConvertManifest.load(out).files if f.backend == "cpu")
    return {k: v for k, v in torch.jit.load(str(f.path)).state_dict().items() if v.is_floating_point()}


def test_a_factory_models_random_weights_follow_the_recorded_seed(tmp_path):
    """Before: the factory always ran under torch.manual_seed(0) while the manifest said seed 7."""
    nets = tmp_path / "nets.py"
    shutil.copy(SUPPORT, nets)
    for seed in (0, 7):
        _convert(tmp_path / f"s{seed}", f"{nets}:tiny", seed)
    seeds = {s: ConvertManifest.load(tmp_path / f"s{s}").conversions["tiny"]["weights"]["seed"] for s in (0, 7)}
    assert seeds == {0: 0, 7: 7}
    w0, w7 = _weights(tmp_path / "s0"), _weights(tmp_path / "s7")
    assert w0.keys() == w7.keys() and w0
    assert any(not w0[k].equal(w7[k]) for k in w0), "seed 7 gave the same weights as seed 0"
    _convert(tmp_path / "again", f"{nets}:tiny", 7)  # the same seed: the same weights
    w7b = _weights(tmp_path / "again")
    assert all(w7[k].equal(w7b[k]) for k in w7)


def test_two_files_with_the_same_factory_name_never_share_outputs(tmp_path):
    """Before: b.py:make wrote make-quant_none-cpu.pt over a.py:make's, exit 0, the manifest naming only b."""
    for name in ("a", "b"):
        shutil.copy(SUPPORT, tmp_path / f"{name}.py")
        (tmp_path / f"{name}.py").write_text((tmp_path / f"{name}.py").read_text() + "\n\ndef make():\n    return Tiny()\n")
    out = tmp_path / "models"
    _convert(out, f"{tmp_path / 'a.py'}:make")
    before = {f.file: f.sha256 for f in ConvertManifest.load(out).files}
    with pytest.raises(UsageError) as e:
        _convert(out, f"{tmp_path / 'b.py'}:make", seed=3)
    assert "a.py" in e.value.what and "b.py" in e.value.what and "--out" in e.value.remedy
    assert {f.file: f.sha256 for f in ConvertManifest.load(out).files} == before
    from toolchain.fsutil import sha256_file

    assert all(sha256_file(out / name) == digest for name, digest in before.items())
    _convert(out, f"{tmp_path / 'a.py'}:make", seed=3)  # the same model again (another seed) is no clash


def test_a_torchvision_model_and_a_factory_of_the_same_stem_clash(tmp_path):
    nets = tmp_path / "resnet18.py"
    shutil.copy(SUPPORT, nets)
    nets.write_text(nets.read_text() + "\n\ndef model():\n    return Tiny()\n")
    out = tmp_path / "models"
    _convert(out, f"{nets}:model")  # stem resnet18, like torchvision's resnet18
    with pytest.raises(UsageError, match="already holds"):
        _convert(out, "resnet18")
