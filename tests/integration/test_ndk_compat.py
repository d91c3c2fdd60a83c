"""check-compat with real TorchScript models (torch's NNAPI converter) against runtime source trees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ndk_build import check_compat
from ndk_build.compat import INCOMPATIBLE, OK, UNKNOWN, RuntimeSource, model_needs
from tests.cli import invoke
from tests.ndk_support import FIXTURE_TREE
from tests.ndk_support.models import make_models_and_manifest
from toolchain.errors import CompatibilityError, UsageError
from toolchain.records import BUILD_INFO_KIND, BUILD_INFO_SCHEMA, write_record

RUNTIME_COMMIT = "c19eb4ad73ebf16c7dc73229729ed95692472f6e"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    return make_models_and_manifest(tmp_path_factory.mktemp("models"))


def build_info(tmp_path: Path, commit: str, source: Path = None) -> Path:
    body = {"lane": "seed-2020", "commit": commit, "abi": "arm64-v8a", "artefacts": []}
    if source:
        body["source_dir"] = str(source)
    return write_record(tmp_path / "build-info.json", BUILD_INFO_KIND, BUILD_INFO_SCHEMA, body)


def runtime_2020(tmp_path: Path) -> Path:
    """The fixture runtime source: a 2020-style NNAPI binding (no init2), no relu, file format <= 5."""
    src = tmp_path / "runtime"
    shutil.copytree(FIXTURE_TREE, src)
    return src


def test_model_needs_reads_ops_nnapi_methods_and_format(models):
    cpu = model_needs(models.parent / "tiny-quant_none-cpu.pt")
    nnapi = model_needs(models.parent / "tiny-quant_none-nnapi.pt")
    assert "aten::relu" in cpu.operators and cpu.nnapi_methods == []
    assert nnapi.nnapi_methods == ["__init__", "init2", "run"]
    assert isinstance(cpu.file_format, int) and cpu.file_format >= 3


def test_same_commit_is_ok_without_looking_further(tmp_path, models):
    import torch

    report = check_compat(models, build_info=build_info(tmp_path, torch.version.git_version))
    assert report.status == OK and "runtime's commit" in report.reason
    assert report.raise_for_status() is report


def test_2020_runtime_lacks_init2_and_what_else_is_missing(tmp_path, models):
    report = check_compat(models, build_info=build_info(tmp_path, RUNTIME_COMMIT, runtime_2020(tmp_path)))
    assert report.status == INCOMPATIBLE
    missing = {(f.file, f.kind, f.name) for f in report.missing}
    assert ("tiny-quant_none-nnapi.pt", "nnapi-method", "_nnapi.Compilation.init2") in missing
    assert ("tiny-quant_none-cpu.pt", "operator", "aten::relu") in missing
    # everything the fixture source does define is not reported
    assert not any(f.name in ("aten::_convolution", "aten::permute", "_nnapi.Compilation.run") for f in report.missing)
    init2 = next(f for f in report.missing if f.name.endswith("init2"))
    assert "has only __init__, init, run" in init2.detail
    with pytest.raises(CompatibilityError) as ei:
        report.raise_for_status()
    msg = str(ei.value)
    assert "cannot run these models" in msg and "_nnapi.Compilation.init2" in msg
    assert "invoke build-android --commit" in msg
    assert any(line.startswith("missing: tiny-quant_none-nnapi.pt: nnapi-method") for line in report.lines())


def test_a_runtime_that_defines_everything_is_ok_and_file_format_is_checked(tmp_path, models):
    src = runtime_2020(tmp_path)
    bind = src / "aten" / "src" / "ATen" / "nnapi" / "nnapi_bind.cpp"
    bind.write_text(bind.read_text().replace('.def("run"', '.def("init2", &NnapiCompilation::init2)\n    .def("run"'))
    yaml = src / "aten" / "src" / "ATen" / "native" / "native_functions.yaml"
    yaml.write_text(yaml.read_text() + "\n- func: relu(Tensor self) -> Tensor\n")
    report = check_compat(models, build_info=build_info(tmp_path, RUNTIME_COMMIT, src))
    assert report.status == OK, report.lines()
    assert RuntimeSource.scan(src).max_file_format == 5
    header = src / "caffe2" / "serialize" / "inline_container.h"
    header.write_text(header.read_text().replace("0x5L", "0x2L"))
    report = check_compat(models, build_info=build_info(tmp_path, RUNTIME_COMMIT, src))
    assert report.status == INCOMPATIBLE
    assert {f.kind for f in report.missing} == {"file-format"}
    assert "reads file format versions up to 2" in report.missing[0].detail


def test_pytorch_android_version_without_source_is_unknown(tmp_path, models):
    report = check_compat(models, pytorch_android="1.13.1")
    assert report.status == UNKNOWN and "no runtime source" in report.reason
    # the fix is a whole check-compat command (make-app prints these lines too, and make-app has no --source)
    assert any("`invoke check-compat --pytorch-android 1.13.1 --source DIR`" in u for u in report.unchecked), \
        report.unchecked
    assert report.raise_for_status() is report
    with pytest.raises(CompatibilityError):
        report.raise_for_status(strict_unknown=True)
    with pytest.raises(UsageError) as ei:
        check_compat(models)
    assert "needs a runtime" in str(ei.value)


def test_tampered_model_is_refused(tmp_path, models):
    copy = tmp_path / "m"
    shutil.copytree(models.parent, copy)
    (copy / "tiny-quant_none-cpu.pt").write_bytes(b"not a model")
    with pytest.raises(Exception) as ei:
        check_compat(copy, build_info=build_info(tmp_path, RUNTIME_COMMIT, runtime_2020(tmp_path)))
    assert "does not match its manifest entry" in str(ei.value)


def test_check_compat_reads_what_invoke_convert_writes(tmp_path):
    """The record contract with the real converter: a user model through `converter.convert`."""
    from converter import ConvertSettings, convert

    support = Path(__file__).resolve().parents[1] / "converter_support" / "user_models.py"
    convert(ConvertSettings(model=f"{support}:tiny", modes=("full",), weights="random", calibration_count=4,
                            out=tmp_path / "models", build_dir=tmp_path / "build"))
    import torch

    same = check_compat(tmp_path / "models", build_info=build_info(tmp_path, torch.version.git_version))
    assert same.status == OK and len(same.checked_files) == 2
    report = check_compat(tmp_path / "models", build_info=build_info(tmp_path, RUNTIME_COMMIT, runtime_2020(tmp_path)))
    assert report.status == INCOMPATIBLE
    assert ("tiny-quant_full-nnapi.pt", "_nnapi.Compilation.init2") in {(f.file, f.name) for f in report.missing}
    assert any(u.startswith("quantized:: operators") for u in report.unchecked)


def test_pytorch_android_version_with_its_source_or_the_same_release(tmp_path, models):
    report = check_compat(models, pytorch_android="1.8.0-SNAPSHOT", source_dir=runtime_2020(tmp_path))
    assert report.status == INCOMPATIBLE and report.runtime == "pytorch_android 1.8.0-SNAPSHOT"
    assert "_nnapi.Compilation.init2" in {f.name for f in report.missing}
    import torch

    release = torch.__version__.split("+")[0]
    same = check_compat(models, pytorch_android=release)
    assert same.status == OK and f"converted by torch {release}, the runtime's release" in same.reason
    with pytest.raises(UsageError) as ei:
        check_compat(models, pytorch_android="1.13.1", source_dir=tmp_path / "no-such-checkout")
    assert "--source" in str(ei.value) and "is not a directory" in str(ei.value)


def test_deploy_runs_check_compat_and_refuses_before_touching_a_device(tmp_path, models):
    """`invoke deploy` with a 2020 runtime: exit 9 naming init2, before any adb traffic (no server on the port)."""
    import os
    import socket

    root = Path(__file__).resolve().parents[2]
    binary = tmp_path / "speed_benchmark_torch"
    binary.write_bytes(b"\x7fELF")
    info = write_record(tmp_path / "build-info.json", BUILD_INFO_KIND, BUILD_INFO_SCHEMA, {
        "lane": "seed-2020", "commit": RUNTIME_COMMIT, "abi": "arm64-v8a",
        "source_dir": str(runtime_2020(tmp_path)),
        "artefacts": [{"name": "speed_benchmark_torch", "path": binary.name, "sha256": "0" * 64}]})
    with socket.socket() as s:  # a port nobody listens on: any adb traffic would fail differently
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = invoke(root, "deploy", "--models", str(models.parent), "--build-info", str(info), "--no-install",
               "--adb-port", str(port), "--results", str(tmp_path / "results"),
               env={**os.environ, "INVOKE_BUILD_DIR": str(tmp_path / "build")})
    assert r.returncode == 9, r.stdout + r.stderr
    assert "check-compat: incompatible" in r.stdout
    assert "_nnapi.Compilation.init2" in r.stdout + r.stderr
    assert "cannot run these models" in r.stderr and "invoke build-android --commit" in r.stderr
    assert not (tmp_path / "results").exists()


def test_report_names_what_differs_and_the_torch_installed_here(tmp_path, models):
    """Issue 9: lane `current` pins the converter as torch 2.8.0 while this environment has another torch;
    check-compat says so, naming both, instead of a generic mismatch."""
    import importlib.metadata as md

    here = md.version("torch")
    bi = write_record(tmp_path / "cur" / "build-info.json", BUILD_INFO_KIND, BUILD_INFO_SCHEMA,
                      {"lane": "current", "commit": "ba56102387ef21a3b04b357e5b183d48f0afefc7", "abi": "arm64-v8a",
                       "artefacts": []})
    report = check_compat(models, build_info=bi)
    text = "\n".join(report.lines())
    assert report.status == UNKNOWN
    assert "differs: the models were converted by torch" in text and "the runtime is PyTorch ba56102387ef" in text
    if not here.startswith("2.8.0"):
        assert f"lane 'current' pins the converter as torch==2.8.0; the torch installed here is {here}" in text
    android = check_compat(models, pytorch_android="2.1.0")
    assert any("the runtime is pytorch_android 2.1.0 (it runs models of torch 2.1.0)" in d
               for d in android.differences)
