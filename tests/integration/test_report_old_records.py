"""`invoke report` over a results directory an earlier torchdroid wrote (issue 31 item 3): the run's document in an
older schema is not guessed at: the report says which file, that an earlier torchdroid wrote it and the command
that remakes it, and leaves the file as it is.  The results come from real deploys onto virtual devices
(tests/executorch_support/report_chain.py); only the run's document is turned into the old layout by hand."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.deploy_support.fixtures import invoke_cli
from tests.virtual_device.harness import held_dead_port

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="adb is not installed (./run test installs it)")


def test_a_run_document_of_an_earlier_torchdroid_is_named_with_its_remedy_and_kept(executorch_report_chain, tmp_path):
    chain = executorch_report_chain
    results = shutil.copytree(chain.legacy_only, tmp_path / "results")
    doc = max(results.glob("run-[0-9][0-9][0-9][0-9].json"))
    old = json.loads(doc.read_text())
    old["schema"] = 1  # schema 1 kept the numerics verdicts and NNAPI placements in files beside it
    for key in ("numerics", "hardware"):
        old.pop(key, None)
    doc.write_text(json.dumps(old))
    before = doc.read_bytes()

    r = invoke_cli(chain.work, "report", "--results", str(results), port=held_dead_port())
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())  # a note may wrap in a narrow console
    assert f"{doc.name}" in out and "an earlier torchdroid wrote it" in out and "invoke deploy" in out, out
    assert out.count("an earlier torchdroid wrote it") == 1, out  # once, in a note; the sections point at it
    assert f"numerics: not shown: {doc.name} cannot be read" in out and f"hardware: not shown: {doc.name}" in out, out
    assert doc.read_bytes() == before  # not rewritten, not deleted
