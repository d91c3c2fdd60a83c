"""Adversarial cases for `invoke verify`: missing and foreign records, files changed behind the manifest,
wrong files recorded as right ones, bad values from the command line, invoke.yaml and the environment,
results paths that cannot be written.  One small model (tests/host_nnapi_support/verify_models.py) is
converted once; every case copies it into a fresh working directory (default relative build/models)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import host_nnapi
from tests.adversarial.harness import ROOT, adversarial, assert_clean, run_invoke, snapshot

pytestmark = pytest.mark.skipif(not host_nnapi.available(), reason="no C compiler: host NNAPI unavailable")
MODEL = f"{ROOT / 'tests/host_nnapi_support/verify_models.py'}:small_net"


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    from converter import ConvertSettings, convert

    out = tmp_path_factory.mktemp("verify-src") / "models"
    convert(ConvertSettings(out=out, model=MODEL, weights="random", calibration_count=4,
                            build_dir=out.parent / "build"))
    return out


def _user_dir(tmp_path: Path, converted: Path) -> Path:
    """A working directory with `invoke convert`'s output at the default build/models."""
    shutil.copytree(converted, tmp_path / "build" / "models", ignore=shutil.ignore_patterns("verify.json"))
    return tmp_path / "build" / "models"


def verify(cwd: Path, *args: str, env=None):
    return run_invoke(["verify", "--random-inputs", "0", *args], cwd, env)


def _manifest(models: Path) -> dict:
    return json.loads((models / "manifest.json").read_text())


def _rerecord(models: Path, name: str) -> None:
    from tests.host_nnapi_support.corrupt import rerecord

    rerecord(models, name)


@adversarial("verify", "missing record: verify in a directory where nothing was converted")
def test_nothing_converted_here(tmp_path):
    assert_clean(verify(tmp_path), "record", mentions=["invoke convert"], root=tmp_path)


@adversarial("verify", "foreign file: a manifest.json that is not torchdroid's")
def test_foreign_manifest(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    (models / "manifest.json").write_text(json.dumps({"kind": "someone-elses", "files": []}))
    kept = snapshot([models])
    assert_clean(verify(tmp_path), "record", mentions=["manifest.json"], kept=kept, root=tmp_path)


@adversarial("verify", "tampered record: a manifest cut in half")
def test_truncated_manifest(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    text = (models / "manifest.json").read_text()
    (models / "manifest.json").write_text(text[: len(text) // 2])
    assert_clean(verify(tmp_path), "record", mentions=["cannot be read"], root=tmp_path)


@adversarial("verify", "tampered file: a model file changed after conversion (manifest not updated)")
def test_model_changed_behind_the_manifest(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    with open(models / "small_net-quant_full-nnapi.pt", "ab") as f:
        f.write(b"\0")
    out = verify(tmp_path)
    assert_clean(out, "record", mentions=["does not match its manifest entry", "invoke convert --force"], root=tmp_path)
    assert not (models / "verify.json").exists()  # nothing verified, nothing claimed


@adversarial("verify", "missing file: a model file the manifest lists was deleted")
def test_model_file_deleted(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    (models / "small_net-quant_core-cpu.pt").unlink()
    assert_clean(verify(tmp_path), "record", mentions=["missing"], root=tmp_path)


@adversarial("verify", "wrong file recorded as right: quant_core's NNAPI file replaced by quant_full's")
def test_nnapi_file_of_another_mode(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    shutil.copy(models / "small_net-quant_full-nnapi.pt", models / "small_net-quant_core-nnapi.pt")
    _rerecord(models, "small_net-quant_core-nnapi.pt")
    assert_clean(verify(tmp_path, "--variant", "quant_core"), "verification", mentions=["first differing"],
                 root=tmp_path)


@adversarial("verify", "wrong file recorded as right: the CPU model shipped as the NNAPI model")
def test_cpu_model_shipped_as_nnapi(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    shutil.copy(models / "small_net-quant_full-cpu.pt", models / "small_net-quant_full-nnapi.pt")
    _rerecord(models, "small_net-quant_full-nnapi.pt")
    assert_clean(verify(tmp_path, "--variant", "quant_full"), "verification",
                 mentions=["no NNAPI module", "the serialized NNAPI model"], root=tmp_path)


@adversarial("verify", "wrong file recorded as right: a truncated model file")
def test_truncated_model_file_recorded(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    p = models / "small_net-quant_none-nnapi.pt"
    p.write_bytes(p.read_bytes()[:2000])
    _rerecord(models, p.name)
    assert_clean(verify(tmp_path, "--variant", "quant_none"), "verification", mentions=["cannot load"], root=tmp_path)


@adversarial("verify", "wrong file recorded as right: one mid-network zero point moved by 5")
def test_corrupted_zero_point_names_the_operation(tmp_path, converted):
    from tests.host_nnapi_support.corrupt import ShippedNnapi, operation_label

    models = _user_dir(tmp_path, converted)
    sh = ShippedNnapi(models / "small_net-quant_core-nnapi.pt")
    o = sh.middle_activation()
    sh.set_zero_point(o, sh.zero_point(o) + 5)
    sh.save()
    assert_clean(verify(tmp_path, "--variant", "quant_core"), "verification",
                 mentions=[operation_label(sh.producer(o)), "zero point"], root=tmp_path)


@adversarial("verify", "bad value on the command line: unknown rounding")
def test_unknown_rounding(tmp_path, converted):
    _user_dir(tmp_path, converted)
    assert_clean(verify(tmp_path, "--rounding", "banker"), "usage", mentions=["qnnpack"], root=tmp_path)


@adversarial("verify", "bad value from the environment: INVOKE_VERIFY_ROUNDING")
def test_unknown_rounding_from_the_environment(tmp_path, converted):
    _user_dir(tmp_path, converted)
    assert_clean(verify(tmp_path, env={"INVOKE_VERIFY_ROUNDING": "fast"}), "usage", mentions=["nnapi"], root=tmp_path)


@adversarial("verify", "bad value on the command line: a variant that was never converted")
def test_unknown_variant(tmp_path, converted):
    _user_dir(tmp_path, converted)
    assert_clean(verify(tmp_path, "--variant", "other_net-quant_full"), "usage", mentions=["small_net-quant_full"], root=tmp_path)


@adversarial("verify", "bad value on the command line: --out is a directory")
def test_results_path_is_a_directory(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    kept = snapshot([models])
    assert_clean(verify(tmp_path, "--out", "build/models"), "usage", mentions=["directory", "--out"], kept=kept,
                 root=tmp_path)


@adversarial("verify", "bad value on the command line: --models names a file, not a directory")
def test_models_path_is_a_file(tmp_path):
    (tmp_path / "models.txt").write_text("not a directory")
    kept = snapshot([tmp_path / "models.txt"])
    assert_clean(verify(tmp_path, "--models", "models.txt"), "usage", mentions=["models.txt is a file"], kept=kept,
                 root=tmp_path)


@adversarial("verify", "tampered record: the manifest lists a file outside its directory")
def test_manifest_entry_escapes_the_directory(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    data = _manifest(models)
    data["files"][0]["file"] = "../../../etc/passwd"
    (models / "manifest.json").write_text(json.dumps(data))
    assert_clean(verify(tmp_path), "record", root=tmp_path)


@adversarial("verify", "clean run from the default relative directory, twice (results replaced atomically)")
def test_clean_models_pass_twice(tmp_path, converted):
    models = _user_dir(tmp_path, converted)
    for _ in range(2):
        out = verify(tmp_path)
        assert_clean(out, "ok", root=tmp_path)
    data = json.loads((models / "verify.json").read_text())
    assert data["ok"] and {v["variant"] for v in data["variants"]} == {
        "small_net-quant_none", "small_net-quant_core", "small_net-quant_full"}


@adversarial("verify", "misleading message: --api-level below the models' (API 29 models, target 28)")
def test_an_api_level_below_the_models_blames_the_api_level_not_convert(tmp_path, converted):
    _user_dir(tmp_path, converted)
    out = verify(tmp_path, "--api-level", "28")
    assert_clean(out, "verification", mentions=["api level 29", "--api-level"], root=tmp_path)
    assert "re-run `invoke convert" not in out.text, out.text[-2000:]
