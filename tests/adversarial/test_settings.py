"""Values are typed: bad values from every source, broken config files, help and --dry, through the real CLI.

Every case runs `invoke` from a fresh directory.  A bad value must be a usage error (exit 2) naming the
option or key and where it came from (command line, the config file, which INVOKE_* variable), before
any work starts: nothing but the run log is written.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.adversarial.harness import INVOKE, ROOT, Outcome, adversarial, assert_clean, clean_env, run_invoke

WRITES = ("models", "app", "bench", "android", "results", "src", "all.json")


def nothing_written(cwd: Path) -> None:
    build = cwd / "build"
    made = [p.name for p in build.iterdir()] if build.is_dir() else []
    assert not [m for m in made if m in WRITES], f"work was done before the usage error: {made}"


# --------------------------------------------------------------------------- command line

CLI_CASES = [
    (["bench", "--iter", "abc"], "--iter"),
    (["bench", "--warmup", "-1"], "--warmup"),
    (["bench", "--threads", "0"], "--threads"),
    (["bench", "--iter", "1e9"], "--iter"),
    (["deploy", "--iter", "0"], "--iter"),
    (["deploy", "--repeat", "-2"], "--repeat"),
    (["deploy", "--adb-port", "99999"], "--adb-port"),
    (["deploy", "--bundled-input", "first"], "--bundled-input"),
    (["deploy", "--threads", "two"], "--threads"),
    (["verify", "--random-inputs", "-1"], "--random-inputs"),
    (["verify", "--api-level", "ten"], "--api-level"),
    (["verify", "--rounding", "fast"], "--rounding"),
    (["verify", "--layerwise", "sometimes"], "--layerwise"),
    (["build-android", "--max-jobs", "0"], "--max-jobs"),
    (["build-android", "--api-level", "5"], "--api-level"),
    (["build-android", "--abi", "mips"], "--abi"),
    (["build-android", "--lane", "future"], "--lane"),
    (["make-app", "--min-sdk", "abc"], "--min-sdk"),
    (["make-app", "--target-sdk", "1000"], "--target-sdk"),
    (["make-app", "--abi-filters", "x86_64,mips"], "mips"),
    (["convert", "--quant", "half"], "--quant"),
    (["report", "--run", "0"], "--run"),
    (["report", "--run", "latest"], "--run"),
    (["report", "--source", "phone"], "--source"),
    (["clean", "--older-than", "-1"], "--older-than"),
    (["clean", "--what", "everything"], "--what"),
    (["deploy", "--install", "--no-install"], "--no-install"),
    (["all", "--skip", "deplyo"], "deplyo"),
    (["convert", "--quant", ""], "--quant"),  # an empty list
    (["convert", "--weights", ""], "--weights"),  # an empty text
]


@adversarial("settings", "values are not typed")
@pytest.mark.parametrize("args,mention", CLI_CASES, ids=[" ".join(a) for a, _ in CLI_CASES])
def test_a_bad_command_line_value_is_a_usage_error_naming_the_option(tmp_path, args, mention):
    out = run_invoke(args, tmp_path)
    assert_clean(out, "usage", mentions=[mention], root=tmp_path)
    nothing_written(tmp_path)


PARSE_CASES = [
    (["covnert"], "'covnert'"),  # a misspelt task
    (["bench", "--iter"], "needed value"),  # a flag without its value
    (["bench", "--itr", "5"], "'--itr'"),  # an unknown flag
]


@adversarial("settings", "values are not typed")
@pytest.mark.parametrize("args,mention", PARSE_CASES, ids=[" ".join(a) for a, _ in PARSE_CASES])
def test_a_command_line_invoke_cannot_parse_is_invokes_own_error_naming_the_word(tmp_path, args, mention):
    """Invoke has no public hook around its parser: its own message (exit 1, no traceback) names the word, and
    nothing runs (issue 31 item 2: acceptable)."""
    out = run_invoke(args, tmp_path)
    assert out.code == 1 and mention in out.err and "Traceback" not in out.text, out.text[-2000:]
    assert not (tmp_path / "build").exists()


# --------------------------------------------------------------------------- INVOKE_* variables

ENV_CASES = [
    ("INVOKE_BENCH_ITER", "abc", ["bench"]),
    ("INVOKE_DEPLOY_TIMEOUT", "-5", ["deploy"]),
    ("INVOKE_DEPLOY_INSTALL", "maybe", ["deploy"]),
    ("INVOKE_ANDROID_ABI", "mips", ["build-android"]),
    ("INVOKE_CONVERT_CALIBRATION_COUNT", "0", ["convert"]),
    ("INVOKE_VERIFY_MIN_TOP1_AGREEMENT", "2", ["verify"]),
    ("INVOKE_APP_ABI_FILTERS", "x86_64,mips", ["make-app"]),
    ("INVOKE_VERIFY_AFTER_CONVERT", "sometimes", ["convert"]),
    ("INVOKE_PYTORCH_GIT_JOBS", "many", ["build-android"]),
    ("INVOKE_DEPLOY_ITER", "abc", ["convert", "--weights", "random"]),  # another stage's key: still before any work
    ("INVOKE_CONVERT_QUANT", "none,half", ["all", "--weights", "random"]),
    ("INVOKE_DEPLOY_ADB_PORT", "adb", ["doctor"]),
    # adb's own variables: `all` decides whether to start an adb server from them before any work
    ("ANDROID_ADB_SERVER_PORT", "50x7", ["all", "--weights", "random"]),
    ("ANDROID_ADB_SERVER_ADDRESS", "bad host!", ["all", "--weights", "random"]),
    ("ADB_SERVER_SOCKET", "tcp:localhost:port", ["all", "--weights", "random"]),
    ("INVOKE_BENCH_ITERS", "5", ["bench"]),  # a typo: would be ignored silently
    ("INVOKE_CONVRT_WEIGHTS", "random", ["convert"]),
]


@adversarial("settings", "values are not typed")
@pytest.mark.parametrize("var,value,args", ENV_CASES, ids=[f"{v}={x}" for v, x, _ in ENV_CASES])
def test_a_bad_environment_variable_is_a_usage_error_naming_the_variable(tmp_path, var, value, args):
    out = run_invoke(args, tmp_path, env={var: value})
    assert_clean(out, "usage", mentions=[var], root=tmp_path)
    nothing_written(tmp_path)


# --------------------------------------------------------------------------- values before records

# A malformed value in a directory with no records at all: the value's error (exit 2, naming it), never the
# missing manifest, build-info or results, and no work done.  Every task that reads a record has a case.
RECORD_WORDS = (": record:", "run `invoke convert` first", "nothing to deploy", "no results database")
VALUE_BEFORE_RECORD_CASES = [
    (["check-compat", "--pytorch-android", "x y"], {}, ["--pytorch-android", "'x y'"]),
    (["check-compat", "--source", "no/such/checkout"], {}, ["--source", "no/such/checkout"]),
    (["deploy", "--device-dir", "relative dir"], {}, ["'relative dir"]),
    (["deploy", "--adb-server", "nohostport"], {}, ["'nohostport'"]),
    (["deploy", "--adb-host", "bad host!"], {}, ["'bad host!'"]),
    (["deploy", "--variant", "quant_half"], {}, ["'quant_half'"]),
    (["deploy", "--profile-with-gatord", "no/such/gatord"], {}, ["gatord", "no/such/gatord"]),
    (["deploy-executorch"], {"INVOKE_DEPLOY_ADB_HOST": "bad host!"}, ["'bad host!'"]),
    (["verify", "--variant", "quant_half"], {}, ["'quant_half'"]),
    (["make-app", "--pytorch-android", "x y"], {}, ["--pytorch-android", "'x y'"]),
    (["make-app", "--model", "bogus model"], {}, ["'bogus model'"]),
    (["convert", "--model", "bogus model"], {}, ["'bogus model'"]),
    (["convert", "--delegates", "xnnpack"], {}, ["--delegates", "--format torchscript,executorch"]),
    (["convert", "--format", "executorch", "--quant", "full", "--delegates", "portable"], {},
     ["--quant full with --delegates portable asks for no ExecuTorch program", "--delegates xnnpack"]),
    (["all", "--weights", "no/such/weights.pth"], {}, ["--weights", "no/such/weights.pth"]),
    (["all", "--model", "bogus model"], {}, ["'bogus model'"]),
    (["all"], {"INVOKE_CONVERT_CALIBRATION": "no/such/images"}, ["no/such/images"]),
    (["all"], {"INVOKE_CONVERT_QUANTIZED_WEIGHTS": "no/such/int8.pth"}, ["no/such/int8.pth"]),
]


@adversarial("settings", "a value checked only after the records")
@pytest.mark.parametrize("args,env,mentions", VALUE_BEFORE_RECORD_CASES,
                         ids=[" ".join(a + [f"{k}={v}" for k, v in e.items()]) for a, e, _ in VALUE_BEFORE_RECORD_CASES])
def test_a_malformed_value_is_reported_before_any_record_is_read(tmp_path, args, env, mentions):
    out = run_invoke(args, tmp_path, env)
    assert_clean(out, "usage", mentions=mentions, root=tmp_path)
    assert not [w for w in RECORD_WORDS if w in out.text], f"a record was read before the value:\n{out.text}"
    nothing_written(tmp_path)


def _typed_option_cases():
    """Every option of every task that takes a typed value (a number or a choice), found from the tasks' own help
    (``(config KEY``), with a value of the wrong kind: generated, so a task or option added later is covered."""
    import inspect
    import re

    import tasks
    from toolchain.settings import SCHEMA

    cases = []
    for name, t in sorted(tasks.ns.tasks.items()):
        params = inspect.signature(t.body).parameters
        for param, text in sorted(t.help.items()):
            m = re.search(r"\(config ([\w.]+)", text)
            if not m or param not in params or isinstance(params[param].default, bool):
                continue  # on/off flags take no value
            kind = SCHEMA[m.group(1)].kind
            if kind.base in ("int", "float"):
                bad = "not-a-number"
            elif kind.choices:
                bad = "no-such-choice"
            else:
                continue  # free text and paths: no generic malformed value (the listed cases above)
            cases.append((name, "--" + param.replace("_", "-"), bad))
    return cases


TYPED_OPTION_CASES = _typed_option_cases()


@adversarial("settings", "a value checked only after the records")
@pytest.mark.parametrize("task,option,value", TYPED_OPTION_CASES, ids=[" ".join(c) for c in TYPED_OPTION_CASES])
def test_every_tasks_typed_options_are_checked_before_any_record_or_work(tmp_path, task, option, value):
    out = run_invoke([task, option, value], tmp_path)
    assert_clean(out, "usage", mentions=[option, value], root=tmp_path)
    assert not [w for w in RECORD_WORDS if w in out.text], f"a record was read before the value:\n{out.text}"
    nothing_written(tmp_path)


def test_the_generated_cases_cover_every_task_with_typed_options():
    assert len(TYPED_OPTION_CASES) >= 30 and {c[0] for c in TYPED_OPTION_CASES} >= {
        "bench", "build-android", "convert", "deploy", "make-app", "verify", "clean", "report", "doctor"}


# --------------------------------------------------------------------------- config files

YAML_CASES = [
    ("deploy:\n  iter: [1\n", "line 3"),  # unclosed flow list
    ("deploy:\n\titer: 5\n", "line 2"),  # a tab
    ("deploy:\n  iter: 5\n warmup: 2\n", "line 3"),  # bad indentation
    ("convert: {weights: 'random}\n", "starts at line 1"),  # unclosed quote
    ("- deploy\n- iter\n", "not a mapping"),
    ("deploy: 5\n", "not a mapping"),
    ("bench:\n  iters: 5\n", "bench.iter"),  # typo: did you mean
    ("convrt:\n  weights: random\n", "unknown config section"),
    ("bench:\n  iter: [1, 2]\n", "bench.iter"),
    ("deploy:\n  serials: {a: 1}\n", "deploy.serials"),
    ("app:\n  abi_filters: mips\n", "'mips'"),
    ("verify:\n  max_lsb: -1\n", "verify.max_lsb"),
    ("build_dir:\n  path: b\n", "build_dir"),  # a mapping where a path is expected
    ("convert:\n  quant: []\n", "convert.quant"),  # an empty list where one mode is needed
    ("bench:\n  iter: 5.5\n", "bench.iter"),
    ("deploy:\n  install: perhaps\n", "deploy.install"),
]


@adversarial("settings", "values are not typed")
@pytest.mark.parametrize("text,mention", YAML_CASES, ids=[t.splitlines()[0] + f" #{i}" for i, (t, _) in
                                                          enumerate(YAML_CASES)])
def test_a_broken_config_file_is_a_usage_error_naming_the_file(tmp_path, text, mention):
    cfg = tmp_path / "mine.yaml"
    cfg.write_text(text)
    out = run_invoke(["-f", str(cfg), "bench"], tmp_path)
    assert_clean(out, "usage", mentions=[mention, "mine.yaml"], root=tmp_path)
    assert cfg.read_text() == text
    nothing_written(tmp_path)


@adversarial("settings", "values are not typed")
@pytest.mark.parametrize("what", ["missing", "directory", "suffix"])
def test_a_runtime_config_file_that_cannot_be_read_is_named_not_skipped(tmp_path, what):
    target = tmp_path / ("mine.yaml.txt" if what == "suffix" else "mine.yaml")
    if what == "directory":
        target.mkdir()
    if what == "suffix":
        target.write_text("bench: {iter: 5}\n")
    out = run_invoke(["-f", str(target), "bench"], tmp_path)
    assert_clean(out, "usage", mentions=["mine.yaml", "config file"], root=tmp_path)
    nothing_written(tmp_path)


@adversarial("settings", "values are not typed")
def test_a_broken_project_invoke_yaml_next_to_tasks_py_names_file_and_line(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "tasks.py").symlink_to(ROOT / "tasks.py")
    (project / "invoke.yaml").write_text("convert:\n  weights: random\n  quant: [none, core\n")
    res = subprocess.run([INVOKE, "--search-root", str(project), "convert"], cwd=tmp_path, env=clean_env(),
                         capture_output=True, text=True, timeout=120)
    out = Outcome(res.returncode, res.stdout, res.stderr)
    assert_clean(out, "usage", mentions=["invoke.yaml, line", "not valid YAML"], root=tmp_path)


@adversarial("settings", "values are not typed")
def test_an_empty_section_with_its_keys_commented_out_is_named_with_its_fix(tmp_path):
    """`convert:` with every key commented out: Invoke cannot merge an empty section into its own (a traceback in
    Invoke's merge; the hook that made it an empty mapping used Invoke's private loaders).  torchdroid names the
    section and the fix before Invoke reads the file; with the fix the same file works."""
    cfg = tmp_path / "mine.yaml"
    cfg.write_text("convert:\n  # weights: random\nrun:\nbench:\n  iter: 7\n")
    out = run_invoke(["-f", str(cfg), "clean", "-n"], tmp_path)
    assert_clean(out, "usage", mentions=["mine.yaml", "`convert:`", "{}"])
    cfg.write_text("convert: {}\n  # weights: random\nbench:\n  iter: 7\n")
    assert_clean(run_invoke(["-f", str(cfg), "clean", "-n"], tmp_path), "ok")


@adversarial("settings", "values are not typed")
def test_yaml_scalars_where_lists_are_expected_are_one_item_each(tmp_path):
    """`serials: 127.0.0.1:5555` is one serial and `abi_filters: x86_64` one ABI, never their characters."""
    cfg = tmp_path / "mine.yaml"
    cfg.write_text("deploy:\n  serials: 127.0.0.1:5555\napp:\n  abi_filters: x86_64\nconvert:\n  quant: full\n")
    out = run_invoke(["-f", str(cfg), "clean", "--dry-run"], tmp_path)  # checks every key of the config
    assert_clean(out, "ok")
    out = run_invoke(["-f", str(cfg), "make-app", "--min-sdk", "0"], tmp_path)
    assert_clean(out, "usage", mentions=["--min-sdk"])
    assert "'x'" not in out.text and "1, 2, 7" not in out.text


# --------------------------------------------------------------------------- help, -h, --dry

TASKS = ["all", "bench", "build-android", "build-app", "check-compat", "clean", "convert", "deploy", "doctor",
         "make-app", "report", "verify"]


@adversarial("settings", "help runs nothing")
@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("name", TASKS)
def test_help_of_every_task_exits_0_and_runs_nothing(tmp_path, name, flag):
    out = run_invoke([name, flag], tmp_path)
    assert_clean(out, "ok")
    assert "Options:" in out.out and f"{name} [--options]" in out.out
    assert not (tmp_path / "build").exists(), "help wrote something"


@adversarial("settings", "dry run")
def test_dry_is_refused_with_a_reason_not_silently_ignored(tmp_path):
    out = run_invoke(["--dry", "convert", "--weights", "random"], tmp_path)
    assert_clean(out, "usage", mentions=["--dry", "not supported"])
    assert not (tmp_path / "build").exists()


@adversarial("settings", "dry run")
def test_dry_clean_previews_and_removes_nothing(tmp_path):
    logs = tmp_path / "build" / "logs"
    logs.mkdir(parents=True)
    old = logs / "convert-20200101-000000-1.log"
    old.write_text("old")
    os.utime(old, (0, 0))
    (tmp_path / "build" / "models").mkdir()
    for args in (["--dry", "clean", "--what", "logs,outputs"], ["clean", "-n", "--what", "logs,outputs"]):
        out = run_invoke(args, tmp_path)
        assert_clean(out, "ok")
        assert "would remove" in out.out and str(old.name) in out.out
        assert old.exists() and (tmp_path / "build" / "models").exists()
    out = run_invoke(["clean", "--what", "logs,outputs"], tmp_path)
    assert_clean(out, "ok")
    assert not old.exists() and not (tmp_path / "build" / "models").exists()


@adversarial("settings", "values are not typed")
def test_clean_refuses_a_build_dir_that_is_the_working_directory(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mine.pt").write_text("mine")
    out = run_invoke(["clean", "--what", "outputs"], tmp_path, env={"INVOKE_BUILD_DIR": "."})
    assert_clean(out, "usage", mentions=["refusing"])
    assert (tmp_path / "models" / "mine.pt").read_text() == "mine"


@adversarial("settings", "a user's config file Invoke cannot merge (issue 34)")
@pytest.mark.parametrize("text, mention", [("convert: 5\n", "`convert` is a section"),
                                           ("build_dir:\n  a: 1\n", "`build_dir` is a value"),
                                           ("deploy:\n  iter:\n    x: 1\n", "`deploy.iter` is a value")])
def test_a_home_config_file_that_cannot_be_merged_names_the_file(tmp_path, text, mention):
    """~/.invoke.yaml with a value where a section goes was Invoke's AmbiguousMergeError traceback."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".invoke.yaml").write_text(text)
    out = run_invoke(["doctor"], tmp_path, env={"HOME": str(home)}, fresh=True)
    assert_clean(out, "usage", mentions=[str(home / ".invoke.yaml"), mention], root=tmp_path)
