"""A path the user already has where torchdroid writes (issue 34, "still tracebacks"): a directory where a file
goes, a file where a directory goes, a page and its picture under one name, a number SQLite cannot hold.  Each
ends with one message naming the path and a fix (exit 2), never a traceback, and leaves the user's things as
they were."""

from __future__ import annotations

import pytest

from tests.adversarial.harness import ROOT, adversarial, assert_clean, run_invoke, snapshot
from tests.adversarial.test_fs_faults import _results

TINY = f"{ROOT / 'tests' / 'converter_support' / 'user_models.py'}:tiny"
FAST = {"INVOKE_CONVERT_CALIBRATION_COUNT": "8", "MPLBACKEND": "Agg"}


@adversarial("convert", "path in the way: a directory named like an output file")
def test_convert_with_a_directory_where_a_model_goes(tmp_path):
    (tmp_path / "m" / "tiny-quant_none-cpu.pt").mkdir(parents=True)
    (tmp_path / "m" / "tiny-quant_none-cpu.pt" / "mine.txt").write_text("mine")
    kept = snapshot([tmp_path / "m"])
    res = run_invoke(["convert", "--model", TINY, "--weights", "random", "--no-verify", "--quant", "none", "--out", "m",
                      "--force"], tmp_path, FAST)
    assert_clean(res, "usage", mentions=["tiny-quant_none-cpu.pt", "a directory of that name"], kept=kept,
                 root=tmp_path)


@adversarial("bench", "path in the way: --out is a file, or under one")
@pytest.mark.parametrize("out,said", [("notes", "notes exists and is not a directory"),
                                      ("notes/sub", "notes is a file, not a directory")], ids=["file", "under-a-file"])
def test_bench_out_in_the_way_names_the_file(tmp_path, out, said):
    """Under a file it said "the output directory (--out) notes/sub is not writable; fix its permissions"."""
    run = run_invoke(["convert", "--model", TINY, "--weights", "random", "--no-verify", "--quant", "none", "--out",
                      "m"], tmp_path, FAST)
    assert run.code == 0, run.err
    (tmp_path / "notes").write_text("mine")
    kept = snapshot([tmp_path / "notes"])
    res = run_invoke(["bench", "--models", "m", "--out", out, "--iter", "2", "--warmup", "0", "--repeat", "1"],
                     tmp_path, FAST)
    assert_clean(res, "usage", mentions=[said], kept=kept, root=tmp_path)
    assert "permissions" not in res.text


@adversarial("report", "path in the way: --out is a directory")
def test_report_out_is_a_directory(tmp_path):
    results = _results(tmp_path)
    (tmp_path / "pic.png").mkdir()
    res = run_invoke(["report", "--results", str(results), "--out", "pic.png"], tmp_path, FAST)
    assert_clean(res, "usage", mentions=["pic.png", "a directory of that name"], root=tmp_path)


@adversarial("report", "bad value: --out names the page, not the picture")
@pytest.mark.parametrize("name", ["r.html", "R.HTML"])
def test_report_out_named_html_does_not_overwrite_its_own_picture(tmp_path, name):
    results = _results(tmp_path)
    res = run_invoke(["report", "--results", str(results), "--out", name], tmp_path, FAST)
    assert_clean(res, "usage", mentions=[name, ".png"], root=tmp_path)
    assert not (tmp_path / name).exists()


@adversarial("report", "bad value: a run id SQLite cannot hold")
def test_report_of_a_huge_run_id(tmp_path):
    results = _results(tmp_path)
    res = run_invoke(["report", "--results", str(results), "--run", str(10 ** 20)], tmp_path, FAST)
    assert_clean(res, "usage", mentions=["--run"], root=tmp_path)


@adversarial("report", "deleted record: the run's document is gone")
def test_report_of_a_run_whose_document_was_deleted_says_so(tmp_path):
    """Not "deploy ran without the numerics check": the store has the run, its run-NNNN.json is gone."""
    results = _results(tmp_path)
    res = run_invoke(["report", "--results", str(results)], tmp_path, FAST)
    assert_clean(res, "ok", needs_fix=False, root=tmp_path)
    page = (results / "report-run-0001.html").read_text()
    assert "run-0001.json is missing" in res.out + page and "deploy ran without the numerics check" not in page


@adversarial("verify", "nothing to verify: an ExecuTorch-only directory")
def test_verify_of_a_directory_without_nnapi_models_says_so(tmp_path):
    """verify of a directory that holds only ExecuTorch programs exited 0 and printed nothing."""
    from toolchain.records import MANIFEST_NAME, ConvertManifest

    (tmp_path / "m").mkdir()
    ConvertManifest(tmp_path / "m" / MANIFEST_NAME, {"conversions": {}, "files": [], "executorch": {"files": []}}
                    ).write()
    res = run_invoke(["verify", "--models", "m"], tmp_path, FAST)
    assert_clean(res, "ok", needs_fix=False, mentions=["nothing verified", "no TorchScript NNAPI models",
                                                       "invoke bench-executorch"], root=tmp_path)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    """`invoke convert`'s output for the tiny model (no verify.json), converted once; each case copies it to m/."""
    from converter import ConvertSettings, convert

    out = tmp_path_factory.mktemp("tiny-src") / "m"
    convert(ConvertSettings(out=out, model=TINY, modes=("none",), weights="random", calibration_count=8,
                            build_dir=out.parent / "build"))
    return out


def _library_key() -> str:
    from host_nnapi.build import CCompiler, source_key

    return source_key(CCompiler.locate().verify())


def _cache_dir_is_a_file(root):
    (root / "hnc").write_text("mine")
    return {"TORCHDROID_HOST_NNAPI_CACHE": "hnc"}, "hnc"


def _cache_dir_under_a_file(root):
    (root / "hnc").write_text("mine")
    return {"TORCHDROID_HOST_NNAPI_CACHE": "hnc/sub"}, "hnc"


def _cache_from_config_under_a_file(root):
    (root / "hnc").write_text("mine")
    return {"INVOKE_VERIFY_CACHE": str(root / "hnc" / "sub")}, "hnc"


def _library_dir_is_a_file(root):
    (root / "hnc").mkdir()
    (root / "hnc" / _library_key()).write_text("mine")
    return {"TORCHDROID_HOST_NNAPI_CACHE": "hnc"}, _library_key()


def _build_log_is_a_directory(root):
    (root / "hnc" / _library_key() / "build.log").mkdir(parents=True)
    return {"TORCHDROID_HOST_NNAPI_CACHE": "hnc"}, "build.log"


def _results_dir_under_a_file(root):
    (root / "a").write_text("mine")
    return {"args": ["--out", "a/b/verify.json"]}, "a"


def _build_dir_is_a_file(root):
    (root / "build").write_text("mine")
    return {}, "build"


def _logs_dir_is_a_file(root):
    (root / "build").mkdir()
    (root / "build" / "logs").write_text("mine")
    return {}, "build/logs"


VERIFY_PATHS = {  # every path verify creates or writes, with a file (or a directory) of the user's in its way
    "build_dir is a file": _build_dir_is_a_file,
    "build/logs is a file": _logs_dir_is_a_file,
    "--out's directory is under a file": _results_dir_under_a_file,
    "host NNAPI cache is a file": _cache_dir_is_a_file,
    "host NNAPI cache is under a file": _cache_dir_under_a_file,
    "verify.cache is under a file": _cache_from_config_under_a_file,
    "the library's directory in the cache is a file": _library_dir_is_a_file,
    "the library's build log is a directory": _build_log_is_a_directory,
}


@adversarial("verify", "path in the way: a file where verify makes a directory, at each path verify writes")
@pytest.mark.parametrize("where", sorted(VERIFY_PATHS))
def test_verify_with_a_file_in_the_way(tmp_path, tiny_models, where):
    """issue 34's `NotADirectoryError` in verify: one message naming what is in the way (exit 2), for every
    path verify creates, nothing of the user's changed."""
    import shutil

    shutil.copytree(tiny_models, tmp_path / "m")
    env, named = VERIFY_PATHS[where](tmp_path)
    args = env.pop("args", [])
    kept = snapshot([p for p in tmp_path.iterdir()])
    res = run_invoke(["verify", "--models", "m", "--random-inputs", "0", *args], tmp_path, env)
    assert_clean(res, "usage", mentions=[named], kept=kept, root=tmp_path)
    assert not (tmp_path / "m" / "verify.json").exists()


@adversarial("convert", "path in the way: the host NNAPI cache of convert's verify is under a file")
def test_convert_with_the_host_nnapi_cache_under_a_file(tmp_path):
    (tmp_path / "hnc").write_text("mine")
    kept = snapshot([tmp_path / "hnc"])
    res = run_invoke(["convert", "--model", TINY, "--weights", "random", "--quant", "none", "--out", "m"], tmp_path,
                     {**FAST, "TORCHDROID_HOST_NNAPI_CACHE": "hnc/sub"})
    assert_clean(res, "usage", mentions=["hnc", "host NNAPI"], kept=kept, root=tmp_path)


@adversarial("report", "bad value: a directory option names a file, or a path under one")
@pytest.mark.parametrize("argv,blocker", [
    (["report", "--results", "mine.txt"], "mine.txt"),
    (["make-app", "--models", "mine.txt"], "mine.txt"),
    (["bench", "--models", "mine.txt/models"], "mine.txt"),
    (["deploy", "--models", "mine.txt"], "mine.txt"),
], ids=["report-results", "make-app-models", "bench-models-under", "deploy-models"])
def test_a_directory_option_naming_a_file_says_so(tmp_path, argv, blocker):
    """It said "no results database at mine.txt/results.sqlite, run `invoke deploy` first" (exit 5), or named a
    convert command whose --out is the same file."""
    (tmp_path / "mine.txt").write_text("mine")
    kept = snapshot([tmp_path / "mine.txt"])
    res = run_invoke(argv, tmp_path, FAST)
    assert_clean(res, "usage", mentions=[f"{blocker} is a file, not a directory", "the path of a directory"],
                 kept=kept, root=tmp_path)
