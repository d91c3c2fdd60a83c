"""The ExecuTorch report's notes: every command it prints runs as printed in a shell."""

from __future__ import annotations

import shlex
from pathlib import Path

from deploy.pte_report import PteReportSection, summary_lines


def test_a_missing_devices_command_quotes_the_serial():
    serial = "192.168.1.5:5555 $(x)"
    section = PteReportSection(2, present=True, path=Path("r.json"), missing_devices=[serial])
    (line,) = summary_lines(section)
    cmd = line.split("`")[1]
    assert shlex.split(cmd) == ["invoke", "deploy", "--format", "torchscript,executorch", "--serial", serial]
