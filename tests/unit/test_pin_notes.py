"""Every pin says how far it was checked; "newest known" only with two independent sources (issue 20 item 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolchain import pins

FACTS = (Path(__file__).resolve().parents[2] / "docs" / "facts.md").read_text()
VERSIONISH = re.compile(r"^(\d+\.\d+(\.\d+)?|r\d+[a-z]|[0-9a-f]{40})$")


def _module_pins(module):
    return {name for name, value in vars(module).items()
            if name.isupper() and isinstance(value, str) and VERSIONISH.match(value)}


def _lane_pins():
    return {f"LANES.{lane.name}.{f}" for lane in pins.LANES.values() for f in pins.LANE_PIN_FIELDS
            if getattr(lane, f)}


@pytest.mark.parametrize("module,expected", [(pins, None)])
def test_every_version_pin_has_a_note(module, expected):
    wanted = _module_pins(module) | (_lane_pins() if module is pins else set())
    missing = wanted - set(module.PIN_NOTES)
    assert not missing, f"pins without a PinNote in {module.__name__}: {sorted(missing)}"
    assert set(module.PIN_NOTES) <= wanted, "a note for a pin that does not exist"


@pytest.mark.parametrize("name,note", list(pins.PIN_NOTES.items()))
def test_newest_needs_two_sources_and_the_facts_rows_exist(name, note):
    assert note.status in (pins.NEWEST, pins.UNVERIFIED, pins.MATCHES)
    for fact in note.facts:
        assert re.search(rf"^\| {re.escape(fact)} \|", FACTS, re.M), f"{name}: docs/facts.md has no row {fact}"
    if note.status == pins.NEWEST:
        assert len(set(note.sources)) >= 2, f"{name} is called the newest with fewer than two sources"
        assert any(pins.NEWEST.lower() in _row(f).lower() for f in note.facts), f"{name}: no facts row says '{pins.NEWEST}'"


def _row(fact: str) -> str:
    m = re.search(rf"^\| {re.escape(fact)} \|.*$", FACTS, re.M)
    return m.group(0) if m else ""


def test_the_apps_runtime_is_not_older_than_the_exporter():
    """A .pte from a newer ExecuTorch may not load in an older runtime (EA8): the default app runtime must keep up."""
    assert not pins.app_runtime_older(pins.EXECUTORCH_ANDROID_DEFAULT), (
        f"org.pytorch:executorch-android {pins.EXECUTORCH_ANDROID_DEFAULT} is older than the exporter "
        f"executorch {pins.EXECUTORCH_VERSION}")


@pytest.mark.parametrize("app,older", [("1.0.1", True), ("1.4.1", True), ("1.5.1", False), ("1.10.0", False),
                                       ("2.0.0-rc1", False), ("1.5.0", True)])
def test_app_runtime_older_compares_releases_not_strings(app, older):
    assert pins.app_runtime_older(app, "1.5.1") is older
