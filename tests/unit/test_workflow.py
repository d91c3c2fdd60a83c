"""`invoke all`'s decisions: which stage runs on which machine, the weights policy, app freshness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolchain.errors import UsageError
from workflow import plan
from workflow.plan import Facts
from tests.virtual_device.harness import held_dead_port

NOTHING = Facts(host_nnapi=(False, "no C compiler"), ndk=(False, "ANDROID_NDK unset"), sdk=(False, "no ANDROID_HOME"),
                devices=(False, "none attached"))
EVERYTHING = Facts(host_nnapi=(True, ""), ndk=(True, "r21e"), sdk=(True, "/sdk"), devices=(True, "emulator-5554"),
                   build_info=Path("b.json"), apk=Path("a.apk"), ran=("deploy",))


def runs(f: Facts, skip=()):
    return {s: plan.decide(s, f, skip).run for s in plan.STAGES}


def test_a_bare_machine_runs_the_host_stages_and_says_why_it_skips_the_rest():
    decided = {s: plan.decide(s, NOTHING) for s in plan.STAGES}
    assert [s for s, d in decided.items() if d.run] == ["convert", "make-app", "bench"]
    assert "no C compiler" in decided["verify"].reason
    assert "ANDROID_NDK unset" in decided["build-android"].reason
    assert "no ANDROID_HOME" in decided["build-app"].reason
    assert "none attached" in decided["deploy"].reason
    assert "build-info" in decided["check-compat"].reason


def test_a_full_machine_runs_everything():
    assert all(runs(EVERYTHING).values())


def test_deploy_needs_something_to_deploy():
    f = Facts(**{**EVERYTHING.__dict__, "build_info": None, "apk": None})
    d = plan.decide("deploy", f)
    assert not d.run and "nothing to deploy" in d.reason
    assert plan.decide("deploy", Facts(**{**f.__dict__, "apk": Path("a.apk")})).run


def test_report_only_after_a_deployment():
    f = Facts(**{**EVERYTHING.__dict__, "ran": (), "failed": ("deploy",)})
    assert plan.decide("report", f).reason == "deploy failed"


def test_a_failed_convert_stops_everything_after_it():
    f = Facts(**{**EVERYTHING.__dict__, "failed": ("convert",)})
    assert not any(runs(f).values())


def test_skip_is_honoured_and_validated():
    assert not plan.decide("bench", NOTHING, ["bench"]).run
    assert not plan.decide("build-app", EVERYTHING, ["make-app"]).run
    with pytest.raises(UsageError, match="unknown stage deplyo"):
        plan.check_stage_names(["deplyo"])


def test_auto_weights_prefer_pretrained_and_announce_a_substitution():
    assert plan.resolve_weights("auto", "mobilenet_v2", lambda m: (True, "cached")) == (
        "pretrained", "pretrained weights (cached)", False)
    used, note, substituted = plan.resolve_weights(None, "mobilenet_v2", lambda m: (False, "offline"))
    assert used == "random" and substituted and "RANDOM" in note and "offline" in note


def test_explicit_weights_are_never_substituted():
    def unreachable(model):
        raise AssertionError("an explicit choice must not probe")

    assert plan.resolve_weights("pretrained", "mobilenet_v2", unreachable)[:2] == (
        "pretrained", "--weights pretrained (as requested)")
    assert plan.resolve_weights("/w.pth", "mobilenet_v2", unreachable)[0] == "/w.pth"


def test_the_summary_is_a_record(tmp_path):
    s = plan.AllSummary(weights={"used": "random"})
    s.outcomes += [plan.StageOutcome("convert", "ran", "", 3.21), plan.StageOutcome("deploy", "failed", "x")]
    data = json.loads(s.write(tmp_path / "all.json", {"ndk": [False, "unset"]}).read_text())
    assert data["kind"] == "torchdroid-all" and data["ok"] is False
    assert [st["stage"] for st in data["stages"]] == ["convert", "deploy"] and data["stages"][0]["seconds"] == 3.21
    assert s.failed == ("deploy",)


def test_deploy_runs_with_only_a_configured_binary():
    """INVOKE_DEPLOY_BINARY with a phone attached: no build-info, no APK, still something to deploy."""
    import dataclasses

    f = dataclasses.replace(NOTHING, devices=(True, "emulator-5554"), binary=Path("speed_benchmark_torch"))
    assert plan.decide("deploy", f).run
    assert not plan.decide("deploy", dataclasses.replace(f, binary=None)).run


def test_doctor_rows_are_found_by_stable_id_and_every_adb_server_counts():
    from workflow.doctor import Check

    rows = [Check("build-android", "NDK (renamed for people)", "warn", "not found", "set ANDROID_NDK", False,
                  "build-android.ndk"),
            Check("deploy", "devices (127.0.0.1:5037)", "info", "no adb server", "adb start-server", False,
                  "deploy.devices@127.0.0.1:5037"),
            Check("deploy", "devices (10.0.0.2:5037)", "ok", "R58N (device)", "", False, "deploy.devices@10.0.0.2:5037")]
    f = plan.facts_from_doctor(rows, host_nnapi=(True, ""))
    assert f.devices == (True, "R58N (device)")
    assert f.ndk[0] is False and "set ANDROID_NDK" in f.ndk[1]
    assert f.sdk[0] is False and "not checked" in f.sdk[1]


def test_all_remembers_where_pretrained_weights_live_and_still_checks_the_file(tmp_path, monkeypatch):
    import converter.models as models
    from workflow import weights

    calls = []
    cached = tmp_path / "hub" / "m.pth"

    def location(model):
        calls.append(model)
        return f"http://127.0.0.1:{held_dead_port()}/m.pth", cached

    monkeypatch.setattr(models, "pretrained_location", location)
    ok, why = weights.pretrained_status("mobilenet_v2", tmp_path / "build")
    assert not ok and "unreachable" in why
    cached.parent.mkdir()
    cached.write_bytes(b"w")
    ok, why = weights.pretrained_status("mobilenet_v2", tmp_path / "build")
    assert ok and str(cached) in why
    assert calls == ["mobilenet_v2"]  # torchvision asked once, the file checked every time


def test_a_file_where_the_cache_directory_goes_only_costs_the_memo(tmp_path, monkeypatch):
    """build/cache is a file of the user's: the remembered location is not written (the next run asks torchvision
    again), the file stays as it was, and convert with the default weights is not refused for it (it was: "the cache
    output directory build/cache exists and is not a directory", exit 2)."""
    import converter.models as models
    from workflow import weights

    monkeypatch.setattr(models, "pretrained_location", lambda model: ("https://example/m.pth", tmp_path / "m.pth"))
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "cache").write_text("mine")
    assert weights.location("mobilenet_v2", tmp_path / "build") == ("https://example/m.pth", tmp_path / "m.pth")
    assert (tmp_path / "build" / "cache").read_text() == "mine"


@pytest.mark.parametrize("weights", ["random", "pretrained"])
def test_all_with_explicit_weights_never_looks_for_pretrained_ones(weights, tmp_path, monkeypatch, caplog):
    """Before: `invoke all --weights random` still probed for the pretrained weights (a download check) while
    checking convert's values, and warned that 'this run uses RANDOM weights' because they were missing."""
    import tasks  # noqa: F401  its @task declarations tie each parameter to its config key (stage_settings reads them)
    from workflow import chain, weights as weights_module

    looked = []
    monkeypatch.setattr(weights_module, "pretrained_status", lambda model, build: looked.append(model) or (False, "x"))
    plan = chain.prepare({"build_dir": str(tmp_path / "build")}, weights=weights,
                         pretrained_status=lambda model: looked.append(model) or (False, "x"))
    assert plan.weights == weights and not looked
    assert "RANDOM weights" not in caplog.text


def test_a_partly_converted_convert_is_not_a_failure_and_the_chain_goes_on(tmp_path):
    """convert's exit 10 (PartlyConverted: some modes or programs made, others refused) is 'partly made', not a
    failed stage: the stages after it run with what was made, and the summary says which were refused."""
    from invoke import Exit

    from workflow import chain

    ran = []

    def partly(f):
        raise Exit("torchdroid convert: conversion (partly made): net: 1 TorchScript program(s) made (quant_none), "
                   "1 refused (quant_core)\n  cause: quant_core: ...", code=10)

    runs_ = {s: (lambda f, s=s: ran.append(s)) for s in plan.STAGES}
    runs_["convert"] = partly
    p = chain.AllPlan(skip=(), weights="random", weights_note="", substituted=False, variant="net-quant_none",
                      models=tmp_path / "m", app_dir=tmp_path / "app", app_id="x.y", build_dir=tmp_path,
                      build_info=tmp_path / "b.json", binary=None, apk=None, replace_app=False, adb_host=None,
                      adb_port=None, adb_servers=())
    summary = chain.run_chain(p, NOTHING, runs_, plan.AllSummary(weights={}), say=lambda text: None)
    convert = summary.outcomes[0]
    assert convert.status == plan.PARTLY and "1 refused (quant_core)" in convert.detail
    assert summary.failed == () and summary.partly == ("convert",)
    assert ran == ["make-app", "bench"]  # what a bare machine runs after convert
    data = json.loads(summary.write(tmp_path / "all.json").read_text())
    assert data["ok"] is True and data["partly"] == ["convert"]
