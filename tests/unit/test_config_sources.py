"""Config files read as Invoke reads them, and the layers in Invoke's precedence (toolchain/config_sources.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolchain.config_sources import ConfigFiles, env_layer, file_layers, read_file
from toolchain.errors import UsageError


@pytest.mark.parametrize("name,text,words", [
    ("a.yaml", "deploy:\n  iter: [1\n", ["a.yaml, line 3", "not valid YAML"]),
    ("a.yaml", "- deploy\n", ["holds a list, not a mapping"]),
    ("a.json", "{\"deploy\": ", ["cannot read the config file", "a.json"]),
    ("a.py", "import os\nbench = {'iter': 5}\n", ["binds `os` to a module", "del os"]),
    ("a.py", "bench = {'iter': 5\n", ["a.py, line", "not valid Python"]),
    ("a.py", "raise KeyError('x')\n", ["running it raised KeyError"]),
    ("a.yaml.txt", "bench: {iter: 5}\n", ["not a .yaml, .yml, .json or .py file"]),
])
def test_a_file_that_cannot_be_read_is_a_usage_error_naming_it(tmp_path, name, text, words):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UsageError) as e:
        read_file(path, asked=True)
    for word in words:
        assert word in str(e.value), str(e.value)


def test_files_read_as_invoke_reads_them(tmp_path):
    (tmp_path / "a.yaml").write_text("")
    (tmp_path / "b.py").write_text("import os as __os\nbench = {'iter': 5}\n")
    assert read_file(tmp_path / "a.yaml") == {} and read_file(tmp_path / "b.py") == {"bench": {"iter": 5}}
    with pytest.raises(UsageError, match="it does not exist"):
        read_file(tmp_path / "missing.yaml", asked=True)


def test_the_layers_in_invokes_order_and_the_first_project_file_invoke_would_pick(tmp_path):
    (tmp_path / "invoke.yml").write_text("bench: {iter: 3}\n")
    (tmp_path / "invoke.json").write_text("{\"bench\": {\"iter\": 4}}")
    runtime = tmp_path / "mine.yaml"
    runtime.write_text("bench: {iter: 5}\n")
    files = ConfigFiles(runtime=runtime, project_dir=tmp_path, user_prefix=str(tmp_path / "nouser"),
                        system_prefix=str(tmp_path / "nosystem"))
    assert [(w, Path(p).name, d) for w, p, d in file_layers(files)] == [
        ("runtime", "mine.yaml", {"bench": {"iter": 5}}), ("project", "invoke.yml", {"bench": {"iter": 3}})]
    assert env_layer({"INVOKE_BENCH_ITER": " 7 ", "INVOKE_X": "1"}, ["bench.iter", "bench.warmup"]) == \
        {"bench": {"iter": " 7 "}}
