"""doctor covers every stage's tools (issue 24 item 9): an ExecuTorch row and a host C/C++ compiler row."""

from __future__ import annotations

from toolchain import pins
from workflow.doctor import INFO, OK, WARN, DoctorSettings, by_id, run_doctor


def test_doctor_has_an_executorch_row_and_a_compiler_row():
    rows = by_id(run_doctor(DoctorSettings()))
    assert rows["convert.executorch"].status in (OK, INFO, WARN)
    assert rows["verify.compiler"].status == OK  # ./run test installs g++


def test_a_missing_compiler_and_a_missing_executorch_say_what_they_cost(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(pins, "installed_version", lambda: None)
    rows = by_id(run_doctor(DoctorSettings()))
    compiler = rows["verify.compiler"]
    assert compiler.status == WARN and "host NNAPI library" in compiler.fix and "flatc" in compiler.fix
    et = rows["convert.executorch"]
    assert et.status == INFO and "pip install executorch==" in et.fix
