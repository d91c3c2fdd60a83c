"""Issue 22 item 3: one layout, every output under build_dir.  The schema declares each output path's default as
<build_dir>/NAME (generated over all keys, so a new key with a literal "build/..." default fails here), the
resolution joins it onto the build_dir in force, a path given explicitly is used as given, and every stage's
settings put their outputs under that build_dir."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from toolchain import layout
from tests.unit.test_settings import real_config
from toolchain.errors import UsageError
from toolchain.layout import Layout, UnderBuildDir
from toolchain.fsutil import mark_owned
from toolchain.resolve import Resolver
from toolchain.settings import KEYS, SCHEMA, config_defaults, default
import tasks  # noqa: F401  its @task declarations tie each parameter to its config key (stage_settings reads them)
from workflow import stage_settings
from workflow.clean import execute, plan_clean
from workflow.task_options import opt

BARE_BUILD = re.compile(r"(?<![\w<>/.-])build/")  # "build/models" in a text, not "<build_dir>/models"
PATH_KEYS = [k for k in KEYS if k.kind.base == "path"]


@pytest.mark.parametrize("key", [k for k in PATH_KEYS if k.default is not None], ids=lambda k: k.name)
def test_every_path_default_is_declared_under_build_dir(key):
    if key.name == "build_dir":
        assert key.default == "build"
        return
    assert isinstance(key.default, UnderBuildDir), f"{key.name}: default {key.default!r} is not under build_dir"
    assert Resolver({"build_dir": "alt"}).path(key.name) == Path("alt") / key.default.name
    assert Resolver({}).path(key.name) == Path("build") / key.default.name
    assert str(key.default).startswith("<build_dir>/")


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k.name)
def test_no_key_says_a_bare_build_path(key):
    """Neither a default nor a help text names build/...: the schema says <build_dir>/..."""
    assert not (isinstance(key.default, str) and BARE_BUILD.search(key.default)), key.name
    assert not BARE_BUILD.search(key.help), f"{key.name}: {key.help}"
    assert not BARE_BUILD.search(opt(key.name).help("x")), key.name


def test_the_help_shows_the_default_under_build_dir():
    assert opt("convert.out").help("out").endswith("(config convert.out, default <build_dir>/models)")
    assert config_defaults()["convert"]["out"] is None  # joined onto build_dir when read, never a stale "build/..."
    assert default("convert.out") == "build/models"  # for settings built by hand in tests


@pytest.mark.parametrize("given", ["cli", "file", "env"])
def test_an_explicit_path_is_used_as_given(given, tmp_path, monkeypatch):
    env = {"INVOKE_BUILD_DIR": "alt"}
    yaml_text = "convert:\n  out: mine\n" if given == "file" else ""
    if given == "env":
        env["INVOKE_CONVERT_OUT"] = "mine"
    config = real_config(tmp_path, monkeypatch, yaml_text, env=env)
    r = Resolver(config, {"out": "mine" if given == "cli" else None})
    assert r.path("convert.out", "out") == Path("mine")
    assert Resolver(config).path("bench.out") == Path("alt/bench")  # the others still follow build_dir


STAGES = {
    "convert": dict(weights="random"), "executorch_convert": dict(weights="random"), "host_bench": {},
    "pte_bench": {}, "verify": {}, "build_android": {}, "executorch_runtime": {},
    "make_app": {}, "build_app": {}, "deploy": {}, "report": {},
}


def _paths(value):
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from ((f"{f.name}.{n}" if n else f.name, p) for n, p in _paths(getattr(value, f.name)))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from ((f"{k}.{n}" if n else k, p) for n, p in _paths(v))
    elif isinstance(value, Path):
        yield "", value


@pytest.mark.parametrize("name", sorted(STAGES) + ["check_compat"])
def test_every_stage_puts_its_outputs_under_the_build_dir_in_force(name, tmp_path):
    settings = getattr(stage_settings, name)({"build_dir": str(tmp_path / "alt")}, **STAGES.get(name, {}))
    found = dict(_paths(settings))
    assert found, name
    for field, path in found.items():
        assert tmp_path / "alt" in path.parents or path == tmp_path / "alt", f"{name}.{field} = {path}"


def test_make_app_of_another_model_sits_beside_the_layouts_app():
    alt = Layout("alt")
    assert stage_settings.make_app({"build_dir": "alt"}).out == alt.app
    assert stage_settings.make_app({"build_dir": "alt"}, model="fp32-xnnpack").out == Path("alt/app-fp32-xnnpack")
    assert stage_settings.make_app({"build_dir": "alt"}, model="a b").out == Path("alt/app-a_b")
    assert stage_settings.make_app({"build_dir": "alt"}, model="a b", out="mine").out == Path("mine")


def test_clean_finds_the_app_of_another_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("app", layout.app_dir_name("fp32-xnnpack")):
        (tmp_path / "alt" / name).mkdir(parents=True)
        mark_owned(tmp_path / "alt" / name, "make-app")
    (tmp_path / "alt" / "app-notes").mkdir()  # someone's own directory with an app- name: refused, not removed
    (tmp_path / "alt" / "app-notes" / "todo.txt").write_text("mine")
    with pytest.raises(UsageError, match="app-notes"):
        plan_clean(Path("alt"), ("outputs",))
    assert (tmp_path / "alt" / "app-notes" / "todo.txt").read_text() == "mine"
    shutil.rmtree(tmp_path / "alt" / "app-notes")
    plan = plan_clean(Path("alt"), ("outputs",))
    assert sorted(p.name for p, _ in plan.targets) == ["app", "app-fp32-xnnpack"]
    execute(plan)
    assert not (tmp_path / "alt" / "app").exists() and not (tmp_path / "alt" / "app-fp32-xnnpack").exists()


def test_schema_knows_every_layout_output_that_has_a_key():
    declared = {k.default.name for k in SCHEMA.values() if isinstance(k.default, UnderBuildDir)}
    assert declared <= set(layout.OUTPUTS + layout.HISTORY)
