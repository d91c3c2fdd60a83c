import os
import sys

import pytest

from toolchain import records
from toolchain.errors import RecordError, ToolFailed, ToolNotFound, UsageError
from toolchain.fsutil import atomic_dir, atomic_path, atomic_write_json, ensure_writable_dir, sha256_file
from toolchain.runner import quote_argv, run


def test_run_streams_to_log_and_returns_output(tmp_path):
    log = tmp_path / "logs" / "x.log"
    seen = []
    res = run([sys.executable, "-c", "print('a'); print('b')"], log_path=log, on_line=seen.append)
    assert res.returncode == 0
    assert seen == ["a", "b"]
    assert "a\nb" in log.read_text()


def test_run_failure_carries_tail_log_and_hint(tmp_path):
    log = tmp_path / "x.log"
    with pytest.raises(ToolFailed) as ei:
        run([sys.executable, "-c", "import sys; print('boom: no submodule'); sys.exit(3)"], log_path=log,
            hint=lambda out: "run git submodule update" if "submodule" in out else None)
    msg = str(ei.value)
    assert "exit code 3" in msg and "boom: no submodule" in msg and str(log) in msg
    assert "git submodule update" in msg


def test_run_env_override_and_removal(tmp_path):
    os.environ["TD_REMOVE_ME"] = "1"
    try:
        res = run([sys.executable, "-c", "import os; print(os.environ.get('TD_X'), os.environ.get('TD_REMOVE_ME'))"],
                  env={"TD_X": "hello", "TD_REMOVE_ME": None})
    finally:
        del os.environ["TD_REMOVE_ME"]
    assert res.output.strip() == "hello None"


def test_run_missing_tool_and_timeout(tmp_path):
    with pytest.raises(ToolNotFound):
        run(["/nonexistent/tool-xyz"])
    with pytest.raises(ToolFailed, match="did not finish"):
        run([sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)


def test_quote_argv_quotes_spaces():
    assert quote_argv(["a b", "c"]) == "'a b' c"


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    final = tmp_path / "model.pt"
    with pytest.raises(RuntimeError):
        with atomic_path(final) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("interrupted")
    assert not final.exists()
    assert list(tmp_path.iterdir()) == []
    with atomic_path(final) as tmp:
        tmp.write_bytes(b"whole")
    assert final.read_bytes() == b"whole"


def test_atomic_path_gives_the_permissions_open_would(tmp_path):
    import os
    import stat

    old = os.umask(0o027)
    try:
        with atomic_path(tmp_path / "a.pt") as tmp:
            with open(tmp, "wb") as f:  # how torch.save writes: into the existing temporary file
                f.write(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.pt").stat().st_mode) == 0o640


def test_atomic_dir_refuses_nonempty_without_force(tmp_path):
    out = tmp_path / "app"
    out.mkdir()
    (out / "mine.txt").write_text("user data")
    with pytest.raises(UsageError, match="--force"):
        with atomic_dir(out):
            pass
    assert (out / "mine.txt").read_text() == "user data"
    with atomic_dir(out, force=True) as tmp:
        (tmp / "new.txt").write_text("x")
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]


def test_ensure_writable_dir_rejects_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        ensure_writable_dir(f)


def test_manifest_roundtrip_and_errors(tmp_path):
    with pytest.raises(RecordError, match="invoke convert"):
        records.ConvertManifest.load(tmp_path)
    model = tmp_path / "m-quant_full-cpu.pt"
    model.write_bytes(b"abc")
    spec = records.TensorSpec([1, 3, 224, 224], "quint8", "channels_last", 0.02, 128).to_dict()
    records.write_record(tmp_path / records.MANIFEST_NAME, records.MANIFEST_KIND, records.MANIFEST_SCHEMA, {
        "conversions": {"m": {"torch": {"git_version": "abc123"}}},
        "files": [{"file": model.name, "sha256": sha256_file(model), "size": 3, "model": "m", "stem": "m",
                   "mode": "full", "backend": "cpu", "input": spec, "output": spec}],
    })
    man = records.ConvertManifest.load(tmp_path)
    (f,) = man.files
    assert f.variant == "quant_full" and f.torch_git_version == "abc123" and f.input.scale == 0.02
    assert man.find("quant_full")["cpu"].path == model.resolve()
    f.check_hash()
    model.write_bytes(b"changed")
    with pytest.raises(RecordError, match="does not match"):
        f.check_hash()
    with pytest.raises(UsageError, match="quant_none"):
        man.find("quant_none")


def test_record_kind_and_schema_checked(tmp_path):
    p = tmp_path / "manifest.json"
    atomic_write_json(p, {"kind": "something-else", "schema": 1})
    with pytest.raises(RecordError, match="not a"):
        records.ConvertManifest.load(tmp_path)
    atomic_write_json(p, {"kind": records.MANIFEST_KIND, "schema": 99})
    with pytest.raises(RecordError, match="schema 99"):
        records.ConvertManifest.load(tmp_path)
    p.write_text("{not json")
    with pytest.raises(RecordError, match="cannot be read"):
        records.ConvertManifest.load(tmp_path)
