"""`bench-executorch` and `deploy-executorch` are shorthands of `bench --format executorch` and `deploy --format
executorch`, nothing more (issue 31 item 1): each of their options is the full task's own declaration, and both
spellings resolve the same settings."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from invoke import Context

import tasks
from tests.unit.test_settings import real_config

SHORTHANDS = {"bench-executorch": ("bench", {}), "deploy-executorch": ("deploy", {"build_info": "runner_build_info"})}


def _declared(task):
    return inspect.signature(task.body.__wrapped__).parameters


@pytest.mark.parametrize("name", sorted(SHORTHANDS))
def test_a_shorthand_has_only_options_of_its_full_task_with_the_same_key_default_and_help(name):
    full_name, renamed = SHORTHANDS[name]
    short, full = tasks.ns.tasks[name], tasks.ns.tasks[full_name]
    own, theirs = _declared(short), _declared(full)
    assert "format" not in own and "format" in theirs
    for param, p in list(own.items())[1:]:
        there = theirs[renamed.get(param, param)].default
        assert (p.default.key, p.default.text, p.default.metavar) == (there.key, there.text, there.metavar), param
        assert not there.formats or "executorch" in there.formats, f"{name} --{param} is an error every time"
        there_help = full.help[renamed.get(param, param)]
        assert short.help[param] == there_help.replace("with --format executorch, ", ""), param
        assert (param in short.iterable) == (renamed.get(param, param) in full.iterable), param
    assert {a.name: a.default for a in short.get_arguments()} == {
        a.name: a.default for a in full.get_arguments() if a.name in own}


def _captured(monkeypatch, where, attr):
    """Replace ``where.attr`` (a settings resolver) by one that keeps what it returned and stops the task there."""
    seen = []

    class Stop(Exception):
        pass

    real = getattr(where, attr)

    def keep(*args, **kw):
        seen.append(real(*args, **kw))
        raise Stop

    monkeypatch.setattr(where, attr, keep)
    return seen, Stop


BENCH_OPTIONS = dict(no_legacy=True, no_per_operator=True, reference_kernels="skip", again=True, iter="7")


@pytest.mark.parametrize("call", [
    lambda c: tasks.bench_executorch(c, **BENCH_OPTIONS),
    lambda c: tasks.bench(c, format=["executorch"], **BENCH_OPTIONS)], ids=["bench-executorch", "bench --format"])
def test_bench_format_executorch_takes_what_bench_executorch_takes(tmp_path, monkeypatch, call):
    """Before: `invoke bench --format executorch --no-legacy` was an error (bench had no --no-legacy, --no-per-operator,
    --reference-kernels, --again): only bench-executorch could time the programs alone."""
    from workflow import stage_settings

    monkeypatch.chdir(tmp_path)
    seen, stop = _captured(monkeypatch, stage_settings, "per_format")
    with pytest.raises(stop):
        call(Context(real_config(tmp_path, monkeypatch)))
    (settings,) = seen
    pte = settings["executorch"]
    assert list(settings) == ["executorch"]
    assert (pte.legacy, pte.per_operator, pte.reference_kernels, pte.again) == (False, False, "skip", True)
    assert pte.iters == 7


@pytest.mark.parametrize("call", [
    lambda c: tasks.deploy_executorch(c, build_info="runner.json", iter="3", project="p"),
    lambda c: tasks.deploy(c, format=["executorch"], runner_build_info="runner.json", iter="3", project="p")],
    ids=["deploy-executorch", "deploy --format"])
def test_deploy_format_executorch_is_deploy_executorch(tmp_path, monkeypatch, call):
    """deploy-executorch --build-info is deploy --runner-build-info: the same settings but for the command a remedy
    names (the one the user typed)."""
    from workflow import stage_settings

    monkeypatch.chdir(tmp_path)
    resolve = stage_settings.deploy
    seen, stop = _captured(monkeypatch, stage_settings, "deploy")
    with pytest.raises(stop):
        call(Context(real_config(tmp_path, monkeypatch)))
    (settings,) = seen
    assert settings.formats == ("executorch",) and settings.runner_build_info.name == "runner.json"
    assert settings.options.iters == 3 and settings.project == "p"
    assert settings.rerun in (("invoke", "deploy-executorch"), ("invoke", "deploy", "--format", "executorch"))
    same = dataclasses.replace(settings, rerun=())
    expected = resolve(real_config(tmp_path, monkeypatch), format=["executorch"],
                                     runner_build_info="runner.json", iter="3", project="p")
    assert same == dataclasses.replace(expected, rerun=())


def test_each_format_declares_its_own_steps_around_a_stage_and_only_its_own_run(monkeypatch):
    """Before: `if "torchscript" in settings.formats: deploy_compat(...); host_references(...)` in tasks.py, and
    convert's verify read results["torchscript"] there.  Now a format's steps are its entries in workflow/stage_flows.py
    (a misspelt format would never run its steps: the keys are formats), run in order for the formats the stage runs."""
    from types import SimpleNamespace

    from converter.formats import FORMATS
    from workflow import stage_flows

    assert set(stage_flows.BEFORE_DEPLOY) | set(stage_flows.AFTER_CONVERT) <= set(FORMATS)
    assert stage_flows.BEFORE_DEPLOY["torchscript"] == (stage_flows.deploy_compat, stage_flows.host_references)
    calls = []
    monkeypatch.setattr(stage_flows, "BEFORE_DEPLOY", {"torchscript": (lambda s: calls.append("compat"),
                                                                      lambda s: calls.append("references"))})
    stage_flows.before_deploy(SimpleNamespace(formats=("executorch",)))
    assert calls == []
    stage_flows.before_deploy(SimpleNamespace(formats=("executorch", "torchscript")))
    assert calls == ["compat", "references"]
    monkeypatch.setattr(stage_flows, "AFTER_CONVERT", {"torchscript": (lambda c, r, d: calls.append(("verify", r)),)})
    stage_flows.after_convert(None, {"executorch": "pte", "torchscript": "ts"})
    assert calls[2:] == [("verify", "ts")]
