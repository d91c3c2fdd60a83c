"""The typed manifest record: one reader that checks every entry, one writer, one path helper."""

import json

import pytest

from toolchain import records
from toolchain.errors import RecordError
from toolchain.fsutil import sha256_file


def _file(tmp_path, mode, backend, data=b"abc"):
    p = tmp_path / records.model_file_names("m", mode)[0 if backend == "cpu" else 1]
    p.write_bytes(data + mode.encode() + backend.encode())
    spec = records.TensorSpec([1, 3, 224, 224], "float32")
    return records.ModelFile(file=p.name, path=p, sha256=sha256_file(p), size=p.stat().st_size, model="m", stem="m",
                             mode=mode, backend=backend, input=spec, output=spec, conversion={},
                             extra={"format": "torchscript"})


def test_paths_and_names():
    assert records.manifest_path("out").name == records.MANIFEST_NAME
    assert records.manifest_path("out/custom.json").name == "custom.json"
    assert records.model_file_names("mobilenetv2", "full") == ("mobilenetv2-quant_full-cpu.pt",
                                                               "mobilenetv2-quant_full-nnapi.pt")


def test_replace_modes_keeps_other_modes_and_round_trips(tmp_path):
    man = records.ConvertManifest.empty(tmp_path)
    man = man.replace_modes("m", {"mode_keys": {"none": "k1"}}, [_file(tmp_path, "none", "cpu"),
                                                                  _file(tmp_path, "none", "nnapi")])
    man.write()
    man = records.ConvertManifest.load(tmp_path)
    man = man.replace_modes("m", {"mode_keys": {"none": "k1", "full": "k2"}},
                            [_file(tmp_path, "full", "nnapi"), _file(tmp_path, "full", "cpu")])
    man.write()
    back = records.ConvertManifest.load(tmp_path)
    assert [(f.mode, f.backend) for f in back.files] == [("none", "cpu"), ("none", "nnapi"), ("full", "cpu"),
                                                         ("full", "nnapi")]
    assert back.conversions["m"]["mode_keys"] == {"none": "k1", "full": "k2"}
    assert back.find("quant_full")["cpu"].extra == {"format": "torchscript"}
    for f in back.files:
        f.check_hash()
        assert f.conversion["mode_keys"]["full"] == "k2"


@pytest.mark.parametrize("files", ["x", [42], [{"file": "a.pt"}], [{"file": "../up.pt", "sha256": "0", "size": 1,
                                                                     "model": "m", "stem": "m", "mode": "none",
                                                                     "backend": "cpu", "input": {}, "output": {}}]])
def test_malformed_entries_are_record_errors(tmp_path, files):
    records.write_record(records.manifest_path(tmp_path), records.MANIFEST_KIND, records.MANIFEST_SCHEMA,
                         {"conversions": {}, "files": files})
    with pytest.raises(RecordError, match="malformed"):
        records.ConvertManifest.load(tmp_path)


def test_manifest_owner(tmp_path):
    assert records.manifest_owner(tmp_path) == "absent"
    records.manifest_path(tmp_path).write_text("not json")
    assert records.manifest_owner(tmp_path) == "foreign"
    records.manifest_path(tmp_path).write_text(json.dumps({"name": "web-app"}))
    assert records.manifest_owner(tmp_path) == "foreign"
    records.manifest_path(tmp_path).write_text(json.dumps({"kind": records.MANIFEST_KIND, "files": "tampered"}))
    assert records.manifest_owner(tmp_path) == "ours"


def _verify_record(tmp_path, files, ok=True, thresholds=None):
    variants = [{"variant": "m-quant_none", "ok": ok,
                 "files": {f.backend: {"file": f.file, "sha256": f.sha256} for f in files}}]
    return records.VerifyRecord(records.verify_path(tmp_path), "manifest.json", "/lib.so", "libsha", "qnnpack",
                                thresholds or {"max_lsb": 2, "ops": ("a", "b")}, variants, code="code1")


def test_verify_record_is_current_only_for_the_same_files_library_code_and_settings(tmp_path):
    files = [_file(tmp_path, "none", "cpu"), _file(tmp_path, "none", "nnapi")]
    _verify_record(tmp_path, files).write()
    rec = records.VerifyRecord.load(tmp_path)
    same = dict(library_sha256="libsha", code="code1", rounding="qnnpack", thresholds={"max_lsb": 2, "ops": ("a", "b")})
    assert rec.current_for(files, **same)[0]  # tuples read back as lists still compare equal
    assert not rec.current_for(files, **{**same, "library_sha256": "other"})[0]
    assert not rec.current_for(files, **{**same, "library_sha256": None})[0]  # not built: must verify
    assert not rec.current_for(files, **{**same, "code": "code2"})[0]
    assert not rec.current_for(files, **{**same, "rounding": "nnapi"})[0]
    assert not rec.current_for(files, **{**same, "thresholds": {"max_lsb": 3, "ops": ["a", "b"]}})[0]
    changed = _file(tmp_path, "none", "cpu", data=b"rebuilt")
    current, why = rec.current_for([changed, files[1]], **same)
    assert not current and changed.file in why
    failed = _verify_record(tmp_path, files, ok=False)
    assert not failed.current_for(files, **same)[0]


def test_an_ambiguous_variant_names_the_variants_that_exist(tmp_path):
    """Two models of one mode: the fix names their real qualified names (it said "e.g. mobilenetv2-quant_full"
    whatever the models were, a name that need not exist)."""
    from toolchain.errors import UsageError

    man = records.ConvertManifest.empty(tmp_path)
    for stem in ("a_net", "b_net"):
        files = []
        for backend in ("cpu", "nnapi"):
            f = _file(tmp_path, "full", backend, data=stem.encode())
            p = tmp_path / records.model_file_names(stem, "full")[0 if backend == "cpu" else 1]
            f.path.rename(p)
            files.append(records.ModelFile(**{**f.__dict__, "file": p.name, "path": p, "model": stem, "stem": stem}))
        man = man.replace_modes(stem, {"mode_keys": {"full": stem}}, files)
    with pytest.raises(UsageError) as e:
        man.find("quant_full")
    assert "a_net-quant_full" in e.value.remedy and "b_net-quant_full" in e.value.remedy, e.value.remedy
    assert "mobilenetv2" not in str(e.value)
    assert man.find("b_net-quant_full")["cpu"].stem == "b_net"
