"""A program ExecuTorch's host runtime refuses (truncated, damaged, not a program) is a record error naming the file
and the command that writes it again (issue 34: `load_program` on a truncated program was a traceback in
bench-executorch, verify and deploy)."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch.runtime")

from toolchain.errors import RecordError  # noqa: E402
from toolchain.records import load_method, load_program  # noqa: E402


@pytest.mark.parametrize("data", [b"", b"\x1c\x00\x00\x00ET12", b"not a program at all" * 50],
                         ids=["empty", "a header cut short", "not a program"])
def test_a_program_the_runtime_refuses_is_a_record_error_naming_the_file(tmp_path, data):
    path = tmp_path / "m-fp32-xnnpack.pte"
    path.write_bytes(data)
    for load in (load_program, load_method):
        with pytest.raises(RecordError) as e:
            load(path)
        assert str(path) in e.value.what and "invoke convert --format executorch --force" in e.value.remedy
        assert e.value.cause


@pytest.mark.parametrize("code, output, said", [
    (1, "Traceback (most recent call last):\n  ...\nRuntimeError: PytorchStreamReader failed reading zip archive: "
        "failed finding central directory\n", "failed finding central directory"),
    (-11, "", "killed by SIGSEGV"),
], ids=["a damaged ETRecord", "a crash"])
def test_the_per_operator_comparison_says_why_its_child_ended(tmp_path, monkeypatch, code, output, said):
    """A damaged ETRecord gave 'the comparison exited with 1' with no cause: the child's cause comes back."""
    from converter import executorch_check as pte_check
    from toolchain.records import TensorSpec

    spec = TensorSpec.from_dict({"shape": [1, 4], "dtype": "float32", "memory_format": "contiguous"})
    f = pte_check.PteFile("m-fp32-portable.pte", tmp_path / "m-fp32-portable.pte", "0" * 64, 1, "m", "m", "fp32",
                          "portable", spec, spec, "quant_none", True, {}, {},
                          extra={"etrecord": {"file": "m-fp32-portable.etrecord", "sha256": "0" * 64}})
    monkeypatch.setattr(pte_check, "_compare_in_child", lambda *a: (code, output))
    rows, note = pte_check.per_operator([(f, tmp_path / "ref.pt")], tmp_path, 8)[f.file]
    assert rows == [] and said in note, note
