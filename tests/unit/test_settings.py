"""The config schema and the resolution of typed values from the command line, files, INVOKE_* and defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolchain import config_sources
from toolchain.errors import UsageError
from toolchain.layout import UnderBuildDir
from toolchain.resolve import Resolver, check_config, check_known_keys, parse
from toolchain.settings import KEYS, SCHEMA, config_defaults, default
import tasks  # noqa: F401  its @task declarations tie each parameter to its config key (stage_settings reads them)
from workflow import stage_settings


def real_config(tmp_path: Path, monkeypatch, yaml_text: str = "", env=None, runtime: str = ""):
    """An Invoke Config loaded the way `invoke` loads it: defaults, project file, INVOKE_* variables, -f file (the
    files also named to torchdroid as tasks.py does: workflow/invoke_hooks.start)."""
    from invoke import Config

    for k in list(__import__("os").environ):
        if k.startswith("INVOKE_"):
            monkeypatch.delenv(k)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    if yaml_text:
        (tmp_path / "invoke.yaml").write_text(yaml_text)
    runtime_path = None
    if runtime:
        runtime_path = tmp_path / "runtime.yaml"
        runtime_path.write_text(runtime)
    config = Config(project_location=str(tmp_path), runtime_path=str(runtime_path) if runtime_path else None)
    monkeypatch.setattr(config_sources, "_IN_FORCE", [])
    config_sources.use(config_sources.ConfigFiles(runtime=runtime_path, project_dir=tmp_path))
    config.load_collection(config_defaults())
    config.load_project()
    config.load_runtime()
    config.load_shell_env()
    return config


# --------------------------------------------------------------------------- the schema itself


def test_every_default_passes_its_own_type_and_range():
    for key in KEYS:
        if key.default is not None and not isinstance(key.default, UnderBuildDir):  # tests/unit/test_layout.py
            assert parse(key.kind, key.default, text=False) == (
                Path(key.default) if key.kind.base == "path" else key.default), key.name


def test_every_config_key_has_its_own_environment_variable():
    names = [k.env_var for k in KEYS if not k.cli_only]
    assert len(names) == len(set(names))


def test_the_configure_dict_holds_every_config_key_and_no_command_line_only_option():
    tree = config_defaults()
    for key in KEYS:
        node, found = tree, True
        for part in key.name.split("."):
            if not isinstance(node, dict) or part not in node:
                found = False
                break
            node = node[part]
        assert found != key.cli_only, key.name
    assert tree["deploy"]["timeout"] == "120.0" and default("deploy.timeout") == 120
    assert tree["convert"]["quant"] == "none,core,full" and tree["deploy"]["install"] is True


# --------------------------------------------------------------------------- one value from each source


def test_command_line_beats_environment_beats_project_file_beats_default(tmp_path, monkeypatch):
    config = real_config(tmp_path, monkeypatch, "bench:\n  iter: 7\n  warmup: 3\n",
                         env={"INVOKE_BENCH_WARMUP": "4"})
    r = Resolver(config, {"iter": None, "threads": "2"})
    assert (r.get("bench.iter", "iter"), r.get("bench.warmup", "warmup"), r.get("bench.threads", "threads")) == (7, 4, 2)
    assert r.get("bench.out") == Path("build/bench")
    assert "invoke.yaml" in r.origin("bench.iter")
    assert r.origin("bench.warmup") == "the environment variable INVOKE_BENCH_WARMUP"
    assert r.origin("bench.threads") == "the command line (--threads)"
    assert r.origin("bench.out") == "the default of `bench.out`"


def test_the_runtime_file_beats_the_environment(tmp_path, monkeypatch):
    config = real_config(tmp_path, monkeypatch, env={"INVOKE_BENCH_ITER": "9"}, runtime="bench: {iter: 11}\n")
    r = Resolver(config)
    assert r.get("bench.iter") == 11 and "runtime.yaml" in r.origin("bench.iter")


@pytest.mark.parametrize("source", ["cli", "env", "file"])
def test_a_non_number_names_the_option_and_its_source(tmp_path, monkeypatch, source):
    config = real_config(tmp_path, monkeypatch, "deploy:\n  iter: abc\n" if source == "file" else "",
                         env={"INVOKE_DEPLOY_ITER": "abc"} if source == "env" else None)
    with pytest.raises(UsageError) as e:
        Resolver(config, {"iter": "abc" if source == "cli" else None}).get("deploy.iter", "iter")
    text = str(e.value)
    assert "'abc' is not a whole number" in text
    assert {"cli": "--iter", "env": "INVOKE_DEPLOY_ITER", "file": "invoke.yaml"}[source] in text
    assert "fix:" in text


@pytest.mark.parametrize("name,raw", [("deploy.iter", "0"), ("bench.iter", "-3"), ("deploy.repeat", "0"),
                                      ("android.max_jobs", "0"), ("convert.calibration_count", "0"),
                                      ("deploy.timeout", "0"), ("deploy.timeout", "nan"), ("deploy.adb_port", "70000"),
                                      ("verify.min_top1_agreement", "1.5"), ("verify.random_inputs", "-1")])
def test_out_of_range_values_are_refused(name, raw):
    with pytest.raises(UsageError, match="too small|too large|is not a number"):
        Resolver({}, {"x": raw}).get(name, "x")


def test_unknown_choices_are_refused_with_a_suggestion():
    with pytest.raises(UsageError, match="did you mean 'qnnpack'"):
        Resolver({"verify": {"rounding": "qnnpak"}}).get("verify.rounding")
    assert Resolver({}, {"x": "NNAPI"}).get("verify.rounding", "x") == "nnapi"


def test_yaml_off_is_the_off_choice():
    assert Resolver({"verify": {"after_convert": False}}).get("verify.after_convert") == "off"


# --------------------------------------------------------------------------- lists and flags


def test_a_yaml_scalar_where_a_list_is_expected_is_one_item_never_characters():
    r = Resolver({"deploy": {"serials": "127.0.0.1:5555"}, "app": {"abi_filters": "x86_64"}})
    assert r.get("deploy.serials") == ["127.0.0.1:5555"]
    assert r.get("app.abi_filters") == ["x86_64"]
    assert Resolver({"deploy": {"serials": 127}}).get("deploy.serials") == ["127"]


def test_lists_from_repeated_flags_and_commas_alike_and_their_items_are_checked():
    assert Resolver({}, {"quant": ["none,core", "full"]}).get("convert.quant", "quant") == ["none", "core", "full"]
    with pytest.raises(UsageError, match="unknown ABI 'x'"):
        Resolver({"app": {"abi_filters": ["x"]}}).get("app.abi_filters")
    with pytest.raises(UsageError, match="not a list"):
        Resolver({"deploy": {"serials": {"a": 1}}}).get("deploy.serials")


def test_a_list_from_an_environment_variable(tmp_path, monkeypatch):
    config = real_config(tmp_path, monkeypatch, env={"INVOKE_DEPLOY_SERIALS": "A1,B2"})
    assert Resolver(config).get("deploy.serials") == ["A1", "B2"]


@pytest.mark.parametrize("text,want", [("false", False), ("0", False), ("no", False), ("true", True), ("on", True)])
def test_boolean_environment_variables_mean_what_they_say(tmp_path, monkeypatch, text, want):
    config = real_config(tmp_path, monkeypatch, env={"INVOKE_DEPLOY_INSTALL": text})
    assert Resolver(config).get("deploy.install") is want


def test_a_key_finds_the_command_line_value_of_the_parameter_declared_for_it():
    """The task's declaration (opt("bench.iter") on ``iter``) ties the parameter to the key: get(key) says it once."""
    r = Resolver({"bench": {"iter": 9}}, {"iter": "7", "out": None}, {"iter": "bench.iter", "out": "bench.out"})
    assert r.get("bench.iter") == 7 and r.origin("bench.iter") == "the command line (--iter)"
    assert r.get("bench.warmup") == default("bench.warmup")  # no parameter declared for it: the config's
    assert r.given("bench.iter") and not r.given("bench.out") and not r.given("bench.warmup")
    flags = {"install": "deploy.install"}
    assert not Resolver({}, {"no_install": True}, flags).get_flag("deploy.install")  # --no-x: derived from --x
    unset = {"install": False, "no_install": False}  # what the task's body gets when neither flag is given
    assert Resolver({"deploy": {"install": True}}, unset, flags).get_flag("deploy.install")  # the config's
    with pytest.raises(UsageError, match="both given"):
        Resolver({}, {"install": True, "no_install": True}, flags).get_flag("deploy.install")
    assert stage_settings.verify({}, variant=["quant_full"]).variants == ("quant_full",)  # verify's own declaration
    assert stage_settings.host_bench({}, out="o", models="m").out == Path("o")  # bench's out, not convert.out


def test_flags_default_to_not_given_so_the_command_line_can_switch_either_way():
    off_in_config = {"deploy": {"install": False, "caching_allocator": True}}
    assert Resolver(off_in_config, {"install": True}).get_flag("deploy.install", on="install", off="no_install")
    assert not Resolver(off_in_config, {}).get_flag("deploy.install", on="install", off="no_install")
    assert not Resolver(off_in_config, {"no_caching_allocator": True}).get_flag(
        "deploy.caching_allocator", on="caching_allocator", off="no_caching_allocator")
    with pytest.raises(UsageError, match="both given"):
        Resolver({}, {"install": True, "no_install": True}).get_flag("deploy.install", on="install", off="no_install")


# --------------------------------------------------------------------------- whole files


def test_a_typo_in_a_section_is_refused_with_the_known_keys():
    with pytest.raises(UsageError, match="did you mean `bench.iter`"):
        check_known_keys({"bench": {"iters": 5}}, "invoke.yaml")
    with pytest.raises(UsageError, match="not a mapping"):
        check_known_keys({"deploy": 5}, "invoke.yaml")
    with pytest.raises(UsageError, match="unknown config section `convrt`"):
        check_known_keys({"convrt": {}}, "invoke.yaml", invoke_keys=("run", "tasks"))
    check_known_keys({"run": {"echo": True}, "build_dir": "b"}, "invoke.yaml", invoke_keys=("run",))


def test_check_config_finds_a_bad_value_of_any_stage(tmp_path, monkeypatch):
    config = real_config(tmp_path, monkeypatch, "verify:\n  layerwise: sometimes\n")
    with pytest.raises(UsageError, match="verify.layerwise"):
        check_config(config)


def test_a_yaml_syntax_error_is_a_usage_exit_with_file_and_line(tmp_path, monkeypatch):
    """tasks.py checks the project file when Invoke imports it, before Invoke reads it (workflow/invoke_hooks.py)."""
    from invoke.exceptions import Exit

    from workflow import invoke_hooks

    monkeypatch.setattr(config_sources, "_IN_FORCE", [])
    (tmp_path / "invoke.yaml").write_text("deploy:\n  iter: [1\n")
    with pytest.raises(Exit) as e:
        invoke_hooks.start(tmp_path, argv=["invoke", "bench"], environ={})
    assert e.value.code == 2 and "invoke.yaml, line 3" in e.value.message and "fix:" in e.value.message


# --------------------------------------------------------------------------- stage settings


def test_deploy_settings_take_their_defaults_from_the_schema(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = stage_settings.deploy({})
    assert s.timeout == SCHEMA["deploy.timeout"].default and s.project == tmp_path.name
    assert s.build_info == Path("build/android/arm64-v8a/build-info.json") and s.app_dir == Path("build/app")
    assert s.install and s.options.iters == 200 and s.options.threads == 1
    s = stage_settings.deploy({"deploy": {"install": False, "threads": 0}}, install=True)
    assert s.install and s.options.threads is None


def test_stage_settings_carry_command_line_values_typed():
    s = stage_settings.verify({}, random_inputs="5", variant=["quant_full,quant_core"], api_level="30")
    assert (s.random_inputs, s.variants, s.api_level) == (5, ("quant_full", "quant_core"), 30)
    b = stage_settings.build_android({"android": {"max_jobs": 3}}, abi="x86_64", clean=True)
    assert (b.abi, b.max_jobs, b.clean, b.lane_explicit) == ("x86_64", 3, True, False)
    a = stage_settings.make_app({"app": {"models": None}, "convert": {"out": "m"}})
    assert a.models == Path("m") and a.abi_filters == ("arm64-v8a",)


def test_a_misspelt_invoke_variable_is_refused_not_ignored(tmp_path, monkeypatch):
    config = real_config(tmp_path, monkeypatch, env={"INVOKE_DEPLOY_ITERS": "5", "INVOKE_RUN_ECHO": "1"})
    with pytest.raises(UsageError, match="INVOKE_DEPLOY_ITERS names no config key") as e:
        check_config(config)
    assert "INVOKE_DEPLOY_ITER" in str(e.value)
    monkeypatch.delenv("INVOKE_DEPLOY_ITERS")
    check_config(config)  # Invoke's own variables (run.echo) are fine


def test_apps_of_several_models_live_side_by_side_by_default():
    """Issue 24 item 3: the app `invoke all` made (build/app, the default model) is not in the way of make-app for
    another model; an --out the user gives (or app.out in a config) is used as given."""
    assert stage_settings.make_app({}).out == Path("build/app")
    assert stage_settings.make_app({}, model="fp32-xnnpack").out == Path("build/app-fp32-xnnpack")
    assert stage_settings.make_app({}, model="net-quant_core").out == Path("build/app-net-quant_core")
    assert stage_settings.make_app({}, model="fp32-xnnpack", out="mine").out == Path("mine")
    assert stage_settings.make_app({"app": {"out": "apps/x"}}, model="quant_none").out == Path("apps/x")


# --------------------------------------------------------------------------- before Invoke reads (invoke_hooks)


def test_the_runtime_file_is_the_one_invoke_takes_from_its_own_core_flags():
    from workflow.invoke_hooks import runtime_path

    assert runtime_path(["invoke", "-f", "x.yaml", "convert", "-f"], {}) == Path("x.yaml")  # convert's -f: --force
    assert runtime_path(["invoke", "-r", "p", "--config=y.yaml", "bench"], {}) == Path("y.yaml")
    assert runtime_path(["invoke", "convert", "-f"], {"INVOKE_RUNTIME_CONFIG": "z.yaml"}) == Path("z.yaml")
    assert runtime_path(["invoke", "convert"], {}) is None


def test_a_variable_invoke_could_not_cast_to_a_files_value_is_named_before_invoke_tries(tmp_path):
    """Invoke casts INVOKE_X to the type of the file's value: over a list always a traceback, over a number one when
    the text is no number of that type; torchdroid names the variable (and the file) first."""
    from workflow.invoke_hooks import check_env_casts

    (tmp_path / "invoke.yaml").write_text("deploy:\n  serials: [a]\n  timeout: 30\nbench:\n  iter: 7\n")
    files = config_sources.file_layers(config_sources.ConfigFiles(project_dir=tmp_path))
    check_env_casts(files, {"INVOKE_BENCH_ITER": "9", "INVOKE_DEPLOY_TIMEOUT": "45", "INVOKE_CONVERT_QUANT": "x"})
    with pytest.raises(UsageError, match="INVOKE_BENCH_ITER") as e:
        check_env_casts(files, {"INVOKE_BENCH_ITER": "abc"})
    assert "not a whole number" in str(e.value)
    with pytest.raises(UsageError, match="INVOKE_DEPLOY_SERIALS='x,y' cannot override `deploy.serials` in") as e:
        check_env_casts(files, {"INVOKE_DEPLOY_SERIALS": "x,y"})
    assert "invoke.yaml" in str(e.value) and "fix:" in str(e.value)
    with pytest.raises(UsageError, match="INVOKE_DEPLOY_TIMEOUT"):  # int("2.5"): a valid number, not the file's type
        check_env_casts(files, {"INVOKE_DEPLOY_TIMEOUT": "2.5"})


def test_an_invoke_config_with_a_value_set_in_code_names_the_config(tmp_path, monkeypatch):
    config = real_config(tmp_path, monkeypatch, "bench:\n  iter: 7\n")
    config.bench.warmup = "x"
    with pytest.raises(UsageError, match="config key `bench.warmup`"):
        Resolver(config).get("bench.warmup")
    assert Resolver(config).get("bench.iter") == 7 and Resolver(config).origin("bench.threads").startswith("the def")
