"""The command-line surface: --json, tables that fit the terminal, short flags that mean one thing."""

from __future__ import annotations

import json

from tests.adversarial.harness import run_invoke


def test_doctor_json_is_one_document_with_stable_ids(tmp_path):
    out = run_invoke(["doctor", "--json"], tmp_path)
    assert out.code == 0, out.text[-2000:]
    data = json.loads(out.out)
    ids = {c["id"] for c in data["checks"]}
    assert {"build-android.ndk", "make-app.sdk", "deploy.adb"} <= ids


def test_every_task_that_prints_a_table_takes_json(tmp_path):
    """Issue 31 item 5: --json where a table is printed (build-android, deploy and deploy-executorch had none)."""
    for task in ("all", "convert", "bench", "bench-executorch", "verify", "build-android", "doctor", "deploy",
                 "deploy-executorch", "report"):
        help_text = run_invoke([task, "--help"], tmp_path).out
        assert "--json" in help_text, task


def test_tables_take_the_terminals_width_and_wrap_instead_of_cutting(tmp_path):
    narrow = run_invoke(["doctor"], tmp_path, env={"COLUMNS": "70"})
    assert narrow.code == 0
    lines = narrow.out.splitlines()
    assert lines and max(len(line) for line in lines) <= 70
    assert "…" not in narrow.out  # wrapped, never cut
    piped = run_invoke(["doctor"], tmp_path)  # not a terminal, no COLUMNS: whole cells on one line
    fixes = [line for line in piped.out.splitlines() if "ANDROID_HOME" in line]
    assert fixes, piped.out


def test_o_is_out_everywhere_and_h_is_always_help(tmp_path):
    for task in ("convert", "bench", "verify", "make-app", "build-app", "report"):
        help_text = run_invoke([task, "--help"], tmp_path).out
        assert "-o STRING, --out=STRING" in help_text, task
    for task in ("bench", "deploy", "doctor", "build-android"):
        out = run_invoke([task, "-h"], tmp_path)
        assert out.code == 0 and "Options:" in out.out, task
    assert not (tmp_path / "build").exists()


def test_a_deploy_flag_switches_off_what_the_config_has_on(tmp_path):
    """--no-install over deploy.install: true, --install over false: both parse; both together is refused."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("deploy:\n  install: false\n")
    out = run_invoke(["-f", str(cfg), "deploy", "--install", "--no-install"], tmp_path)
    assert out.code == 2 and "both given" in out.err


def test_help_says_what_to_type_and_shows_no_flag_that_is_an_error(tmp_path):
    """bench --help: no `--[no-]host` pair (`--no-host` was an error), and each value option leads its help with
    what to type (Invoke's own column can only say STRING: workflow/task_options.py)."""
    text = " ".join(run_invoke(["bench", "--help"], tmp_path).out.split())
    assert "--[no-]host" not in text and "--host run the models on this machine" in text
    for option, what in (("--iter=STRING", "N: timed iterations"), ("--format", "FORMAT[,FORMAT...]: what"),
                         ("--out=STRING", "PATH: where host benchmark results go")):
        assert f"{option} {what}" in text, (option, text)
    out = run_invoke(["bench", "--no-host"], tmp_path)
    assert out.code == 1 and "--no-host" in out.err and not (tmp_path / "build").exists()


def test_the_task_list_shows_each_description_whole(tmp_path):
    """`invoke --list` shows a docstring's first line: it is the whole first paragraph and ends a sentence."""
    import tasks

    for name, t in tasks.ns.tasks.items():
        first, _, rest = t.__doc__.strip().partition("\n")
        assert not rest or not rest.strip() or rest.startswith("\n"), f"{name}: the first paragraph spans lines"
        assert first.rstrip().endswith((".", ")", "?")), f"{name}: {first!r}"
    listed = run_invoke(["--list"], tmp_path).out
    assert "Benchmark the converted models on this machine" in listed


def test_an_option_of_a_format_the_stage_does_not_run_is_refused_with_the_fix(tmp_path):
    """bench took --no-legacy, --reference-kernels... only as bench-executorch (issue 31: the shorthand is `bench
    --format executorch`, nothing more); with the TorchScript format alone they would be ignored: exit 2 naming the
    --format that takes them.  With --format executorch the same option is taken (the run then fails later: no
    models)."""
    for args in (["--no-legacy"], ["--reference-kernels", "full"], ["--again"]):
        out = run_invoke(["bench", *args], tmp_path)
        assert out.code == 2 and f"{args[0]} applies to the ExecuTorch lane" in out.err, out.text[-2000:]
        assert "--format torchscript,executorch" in out.err
    taken = run_invoke(["bench", "--format", "executorch", "--no-legacy"], tmp_path)
    assert "applies to" not in taken.err, taken.text[-2000:]
