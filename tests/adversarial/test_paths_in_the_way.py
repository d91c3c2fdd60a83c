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


@adversarial("bench", "path in the way: --out is a file")
def test_bench_out_is_a_file(tmp_path):
    run = run_invoke(["convert", "--model", TINY, "--weights", "random", "--no-verify", "--quant", "none", "--out",
                      "m"], tmp_path, FAST)
    assert run.code == 0, run.err
    (tmp_path / "notes").write_text("mine")
    kept = snapshot([tmp_path / "notes"])
    res = run_invoke(["bench", "--models", "m", "--out", "notes", "--iter", "2", "--warmup", "0", "--repeat", "1"],
                     tmp_path, FAST)
    assert_clean(res, "usage", mentions=["notes exists and is not a directory"], kept=kept, root=tmp_path)


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
