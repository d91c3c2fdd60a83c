"""The ExecuTorch lane's pure logic: formats, delegates, pins, the manifest section (no torch)."""

import re
from pathlib import Path

import pytest

from converter.executorch import SDK_DELEGATES, ExecutorchSettings, convert_executorch, parse_delegates
from toolchain import pins
from toolchain.errors import RecordError, ToolNotFound, UsageError
from tests.executorch_support.section import write_section
from toolchain.records import (MANIFEST_KIND, MANIFEST_SCHEMA, ConvertManifest, load_section, pte_files, read_record,
                               write_record)
from toolchain.variants import DELEGATES

ROOT = Path(__file__).resolve().parents[2]


def test_sdk_delegates_are_refused_with_their_reason():
    for name, reason in SDK_DELEGATES.items():
        with pytest.raises(UsageError) as e:
            parse_delegates(name)
        assert reason in str(e.value) and "xnnpack" in e.value.remedy
    with pytest.raises(UsageError, match="unknown ExecuTorch delegate 'npu'"):
        parse_delegates("xnnpack,npu")
    assert parse_delegates("") == DELEGATES
    assert parse_delegates(["vulkan", "xnnpack"]) == ("xnnpack", "vulkan")


def test_run_installs_the_pinned_executorch():
    """./run's executorch_pins and toolchain/pins.py name the same version."""
    text = (ROOT / "run").read_text()
    pinned = re.findall(r"executorch==([0-9][0-9.]*)", text)
    assert pinned == [pins.EXECUTORCH_VERSION]
    assert "$(torch_pins) $(executorch_pins)" in text  # installed with torch, in one resolve
    assert re.search(r"torch==" + re.escape(pins.EXECUTORCH_TORCH) + r"\b", text)


def test_the_installed_executorch_is_the_pinned_one():
    version = pins.require_executorch()
    assert version.split("+")[0] == pins.EXECUTORCH_VERSION
    assert pins.version_note(version) is None
    assert "pins 1.5.1" in pins.version_note("1.4.0")


def test_missing_executorch_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setattr(pins, "installed_version", lambda: None)
    with pytest.raises(ToolNotFound) as e:
        convert_executorch(ExecutorchSettings(out=tmp_path / "m", weights="random"))
    assert e.value.exit_code == 3
    assert f"pip install executorch=={pins.EXECUTORCH_VERSION}" in e.value.remedy
    assert "./run main" in e.value.remedy


def test_the_section_keeps_the_legacy_manifest(tmp_path):
    write_record(tmp_path / "manifest.json", MANIFEST_KIND, MANIFEST_SCHEMA,
                 {"conversions": {"m": {"x": 1}}, "files": []})
    ConvertManifest.load(tmp_path).write_executorch({"files": [], "conversions": {}})
    data = read_record(tmp_path / "manifest.json", MANIFEST_KIND, MANIFEST_SCHEMA, "")
    assert data["files"] == [] and data["conversions"] == {"m": {"x": 1}}
    assert load_section(tmp_path) == {"files": [], "conversions": {}}
    with pytest.raises(UsageError, match="no ExecuTorch"):
        pte_files(tmp_path)


def test_an_incomplete_pte_entry_is_a_record_error(tmp_path):
    write_section(tmp_path, {"files": [{"file": "x.pte", "sha256": "0"}]})
    with pytest.raises(RecordError, match="incomplete"):
        pte_files(tmp_path)


def test_the_executorch_modules_do_not_key_the_torchscript_models(tmp_path):
    """Editing the ExecuTorch lane leaves the legacy models' code digest (and so their reuse) alone."""
    from converter.reuse import code_digest

    (tmp_path / "export.py").write_text("legacy = 1\n")
    (tmp_path / "executorch.py").write_text("x = 1\n")
    before = code_digest(tmp_path)
    (tmp_path / "executorch.py").write_text("x = 2\n")
    (tmp_path / "executorch_check.py").write_text("y = 1\n")
    (tmp_path / "executorch.py").write_text("z = 1\n")  # the format's module without an underscore (issue 31, h25)
    assert code_digest(tmp_path) == before
    (tmp_path / "export.py").write_text("legacy = 2\n")
    assert code_digest(tmp_path) != before


# the converter modules executorch.py imports that do not make a program: the command line's model request, the key
NOT_MAKING_PROGRAMS = {"pipeline.py", "reuse.py"}


def _converter_imports(name: str) -> set:
    """The converter modules ``name`` imports (``from .x import ...``, at any depth of the module)."""
    import ast

    directory = Path(__file__).resolve().parents[2] / "converter"
    found = set()
    for node in ast.walk(ast.parse((directory / name).read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {f"{node.module.split('.')[0]}.py"} if node.module else {f"{a.name}.py" for a in node.names}
    return {f for f in found if (directory / f).is_file()}


def test_every_module_the_executorch_export_runs_keys_the_programs():
    """CODE listed four modules; the export also runs finite.py (the non-finite output check) and host_check.py
    (its spec of the output) and the samples' stacking: a change there did not rebuild the programs (issue 31, h26).
    CODE is every converter module executorch.py reaches, but the request's parsing and the key's own code."""
    from converter.executorch import CODE

    reached, todo = set(), ["executorch.py"]
    while todo:
        name = todo.pop()
        if name not in reached and name not in NOT_MAKING_PROGRAMS:
            reached.add(name)
            todo += sorted(_converter_imports(name))
    assert set(CODE) == reached


def test_a_change_to_the_executorch_check_checks_the_programs_again(tmp_path, monkeypatch):
    """converter/executorch_check.py keys no TorchScript model (above) but keys its own checks: a check the last
    record holds is reused only when the check's code (CHECK_CODE, by content) is the same (issue 31, h25)."""
    from types import SimpleNamespace

    from converter import executorch_check
    from converter.reuse import code_digest

    (tmp_path / "executorch_check.py").write_text("y = 1\n")
    (tmp_path / "host_check.py").write_text("h = 1\n")
    real = code_digest
    monkeypatch.setattr(executorch_check, "code_digest", lambda only=(): real(tmp_path, only=only), raising=False)
    ref = tmp_path / "ref.json"
    ref.write_text("{}")
    program = SimpleNamespace(sha256="0" * 64, extra={})
    s = SimpleNamespace(float_atol=1e-4, float_rtol=1e-5, per_operator=True, debug_buffer_mb=512)
    before = executorch_check.check_key(program, ref, s)
    assert executorch_check.check_key(program, ref, s) == before
    (tmp_path / "executorch_check.py").write_text("y = 2\n")
    assert executorch_check.check_key(program, ref, s) != before


def test_a_check_is_keyed_by_the_versions_its_programs_were_made_with(tmp_path, monkeypatch):
    """The check's key took ExecuTorch's identity alone (pins.identity()); it takes reuse.made_with's, the one place
    that says which versions a program is made and run with: a new torch checks again (issue 31, h26)."""
    from types import SimpleNamespace

    from converter import executorch_check, reuse

    ref = tmp_path / "ref.json"
    ref.write_text("{}")
    program = SimpleNamespace(sha256="0" * 64, extra={})
    s = SimpleNamespace(float_atol=1e-4, float_rtol=1e-5, per_operator=True, debug_buffer_mb=512)
    monkeypatch.setattr(reuse, "torch_identity", lambda: {"version": "2.11.0"})
    before = executorch_check.check_key(program, ref, s)
    monkeypatch.setattr(reuse, "torch_identity", lambda: {"version": "2.12.0"})
    assert executorch_check.check_key(program, ref, s) != before


# --------------------------------------------------------------------------- --quant chooses the precisions


def _per_format(config: dict, **cli):
    """``invoke convert``'s settings per format, resolved as the task resolves them."""
    import tasks  # noqa: F401  its @task declarations tie each parameter to its config key
    from workflow import stage_settings

    return stage_settings.per_format(config, "convert", weights="random", **cli)


def _asked(config: dict, **cli):
    """(the programs a convert command line asks of the ExecuTorch lane, the lane's notes about them)."""
    from converter.executorch import validate

    checked = validate(_per_format(config, **cli)["executorch"])
    return [v.name for v in checked[3]], [n for n in checked[4] if "--quant" in n]


def test_quant_chooses_the_executorch_precisions(tmp_path):
    """--quant none -> the fp32 programs only, a quantized mode (core or full) -> the int8 program; the default (all
    three modes) both; one --quant, declared once, for both lanes (issue 35 item 1: the user chooses programs)."""
    config = {"build_dir": str(tmp_path / "build")}
    assert _asked(config, format=["executorch"], quant=["none"])[0] == ["fp32-xnnpack", "fp32-portable", "fp32-vulkan"]
    assert _asked(config, format=["executorch"])[0] == ["fp32-xnnpack", "int8-xnnpack", "fp32-portable", "fp32-vulkan"]
    for quantized in (["core"], ["full"], ["core", "full"]):
        assert _asked(config, format=["executorch"], quant=quantized, delegates=["xnnpack"]) == (["int8-xnnpack"], [])
    both = _per_format(config, format=["torchscript", "executorch"], quant=["none"])
    assert both["torchscript"].modes == ("none",) and both["executorch"].quant == ("none",)


def test_a_quant_value_that_makes_no_program_here_is_said_once_and_none_at_all_is_a_usage_error(tmp_path):
    """--quant full with the default delegates: the int8 program is XNNPACK's only, the portable and Vulkan delegates
    make none (one note); --quant full --delegates portable asks for nothing: exit 2 before any lane converts, naming
    the delegate and the --quant that would make programs."""
    config = {"build_dir": str(tmp_path / "build")}
    names, said = _asked(config, format=["executorch"], quant=["full"])
    assert names == ["int8-xnnpack"]
    assert len(said) == 1 and "portable, vulkan" in said[0] and "int8" in said[0]
    assert not _asked(config, format=["executorch"], quant=["none", "full"])[1]
    with pytest.raises(UsageError) as e:
        _per_format(config, format=["torchscript", "executorch"], quant=["full"], delegates=["portable"])
    assert e.value.exit_code == 2 and "asks for no ExecuTorch program" in e.value.what
    assert "--delegates xnnpack" in e.value.remedy and "--quant none" in e.value.remedy
    assert "xnnpack" in e.value.cause


def test_a_manifest_an_earlier_torchdroid_wrote_still_reads_and_keeps_its_programs(tmp_path):
    """The on-disk shape of the ExecuTorch section as torchdroid wrote it before the section was read through
    ConvertManifest: its programs read typed (names, baseline, extra keys), and a TorchScript write keeps it as is."""
    import json

    spec = {"shape": [1, 3, 8, 8], "dtype": "float32", "memory_format": "contiguous", "scale": None, "zero_point": None}
    entry = {"file": "m-fp32-xnnpack.pte", "sha256": "0" * 64, "size": 3, "model": "m", "stem": "m",
             "format": "executorch", "precision": "fp32", "delegate": "xnnpack", "input": spec, "output": spec,
             "inputs": [spec], "runs_on_host": True, "host_check": {"ran": True}, "baseline": "quant_none",
             "executorch": {"version": "1.5.1"}, "torch": {"version": "2.14.1"}}
    section = {"conversions": {"m": {"keys": {"fp32-xnnpack": "k"}, "skipped": {}}}, "files": [entry],
               "reference": {"m": {"file": "m-executorch-reference.pt", "sha256": "1" * 64}}}
    (tmp_path / "manifest.json").write_text(json.dumps({
        "kind": MANIFEST_KIND, "schema": MANIFEST_SCHEMA, "written": "2026-11-01T00:00:00+00:00",
        "conversions": {}, "files": [], "executorch": section}))
    man = ConvertManifest.load(tmp_path)
    [program] = man.programs()
    assert (program.variant, program.qualified_variant, program.baseline) == ("fp32-xnnpack", "m-fp32-xnnpack",
                                                                               "quant_none")
    assert program.extra["host_check"] == {"ran": True} and program.path == (tmp_path / entry["file"]).resolve()
    man.replace_modes("t", {"mode_keys": {}}, []).write()  # the TorchScript writer
    assert json.loads((tmp_path / "manifest.json").read_text())["executorch"] == section
    assert load_section(tmp_path) == section
