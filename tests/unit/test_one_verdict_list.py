"""One verdict list per device (issue 31 item 1, h13): a phone's TorchScript models and ExecuTorch programs are
judged into the same list, deploy's summary shows that one list, and the run's document holds it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from deploy.device_run import DeviceReport
from deploy.executorch import record_executorch
from deploy.orchestrate import DeployResult
from toolchain.numerics_records import NumericsVerdict

TS = NumericsVerdict("S1", "m-quant_none-cpu.pt", "cpu", "none", "agrees", reference="host-cpu")
ET = NumericsVerdict("S1", "m-fp32-xnnpack.pte", "executorch", "fp32", "differs", reason="off by 0.5")


def _record(tmp_path: Path, rep: DeviceReport):
    s = SimpleNamespace(results=tmp_path, models=tmp_path / "models",
                        options=SimpleNamespace(warmup=1, iters=2, repeat=1, threads=1))
    et = SimpleNamespace(programs=[], inputs={}, build_info=tmp_path / "build-info.json", traced_timing=False)
    return record_executorch(s, et, [rep])


def test_the_runs_document_takes_the_programs_verdicts_from_the_devices_one_list(tmp_path):
    """Before (h13) the programs' verdicts went to a numerics file of the ExecuTorch record; now to the run's one
    document beside the models' (no second file)."""
    from deploy.formats import run_numerics
    from deploy.plan import DeployPlan
    from deploy.results import export

    rep = DeviceReport("S1", numerics=[TS, ET])
    rec = _record(tmp_path, rep)
    export([], tmp_path, "run-0001", (), run_numerics([rep], DeployPlan(None, [], None)), None, rec.facts)
    written = json.loads((tmp_path / "run-0001.json").read_text())
    assert [v["file"] for v in written["numerics"]] == [TS.file, ET.file] and written["executorch"]["checked"]
    assert not list(tmp_path.glob("executorch-*"))


def test_deploy_shows_one_verdict_list_for_both_formats(tmp_path, capsys):
    from workflow import show

    rep = DeviceReport("S1", numerics=[TS, ET])
    result = DeployResult([rep], None, None, {}, [], "/data/local/tmp/torchdroid/p",
                          executorch=_record(tmp_path, rep))
    show.deployed(result, ["torchscript", "executorch"])
    out = capsys.readouterr()
    said = out.out + out.err
    assert said.count("is the answer right") == 1, said
    assert TS.file in said and ET.file in said and "DIFFERS" in said
    assert "were not checked" not in said


def test_an_executorch_only_deploy_shows_the_programs_verdicts_from_the_one_list(tmp_path, capsys):
    from workflow import show

    rep = DeviceReport("S1", numerics=[ET])
    result = DeployResult([rep], None, None, {}, [], "/data/local/tmp/torchdroid/p", executorch=_record(tmp_path, rep))
    show.deployed(result, ["executorch"])
    out = capsys.readouterr()
    said = out.out + out.err
    assert said.count("is the answer right") == 1 and ET.file in said, said
