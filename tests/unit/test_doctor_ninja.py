"""doctor and build-android --lane executorch agree: ninja is required for that lane (docs/facts.md E16)."""

import shutil

import pytest

from workflow.doctor import WARN, DoctorSettings, _build_tools


def _row(env):
    return next(c for c in _build_tools(DoctorSettings(env=env)) if c.id == "build-android.ninja")


def test_without_ninja_doctor_says_the_executorch_lane_cannot_build(tmp_path):
    row = _row({"PATH": str(tmp_path)})
    assert row.status == WARN and "--lane executorch cannot build without it" in row.found
    assert "required for --lane executorch" in row.fix and "ninja-build" in row.fix


@pytest.mark.skipif(not shutil.which("ninja"), reason="needs ninja")
def test_with_ninja_the_row_is_ok(tmp_path):
    (tmp_path / "ninja").symlink_to(shutil.which("ninja"))
    row = _row({"PATH": str(tmp_path)})
    assert row.status == "ok" and str(tmp_path) in row.found
