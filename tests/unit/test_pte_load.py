"""A program ExecuTorch's host runtime refuses (truncated, damaged, not a program) is a record error naming the file
and the command that writes it again (issue 34: `load_program` on a truncated program was a traceback in
bench-executorch, verify and deploy)."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch.runtime")

from toolchain.errors import RecordError  # noqa: E402
from toolchain.pte_records import load_method, load_program  # noqa: E402


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
