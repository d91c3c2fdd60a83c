"""The report's formats section (deploy/summary.py)'s notes: every command it prints runs as printed in a shell."""

from __future__ import annotations

import shlex
from pathlib import Path

from deploy.summary import FormatsSection, formats_section, section_notes


def test_a_missing_devices_command_quotes_the_serial():
    serial = "192.168.1.5:5555 $(x)"
    section = FormatsSection(2, present=True, path=Path("r.json"), missing_devices=[serial])
    (line,) = section_notes(section)
    cmd = line.split("`")[1]
    assert shlex.split(cmd) == ["invoke", "deploy", "--format", "torchscript,executorch", "--serial", serial]


def test_an_earlier_torchdroids_executorch_record_is_named_kept_and_not_drawn(tmp_path):
    """An executorch-latest.json an earlier torchdroid wrote joined its lines to another run: a run without
    ExecuTorch rows shows the hint naming it (not its lines), and the file is left as it is."""
    from tests.deploy_support.report_rows import row

    old = tmp_path / "executorch-latest.json"
    old.write_text('{"kind": "torchdroid.executorch-deploy", "schema": 1, "rows": "an earlier layout"}')
    run = [row("A", "cpu", "ok", 10.0)]
    run[0].run_id = 4
    section = formats_section(tmp_path, run, {})
    (line,) = section_notes(section)
    assert not section.present and not section.devices
    assert "no ExecuTorch rows in run 4" in line and str(old) in line and "not drawn" in line
    assert "invoke deploy --format torchscript,executorch" in line
    assert old.read_text().endswith('"an earlier layout"}')
