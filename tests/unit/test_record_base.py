"""The one record base (issue 31 item 3): one reader with typed errors, each naming the command that remakes the
file; a record an earlier torchdroid wrote is refused with that command and left as it is."""

import json

import pytest

from toolchain import record_base as rb
from toolchain.hardware_records import Placement
from toolchain.numerics_records import NumericsVerdict, ReferenceOutputs
from toolchain.records import AppInfo, BuildInfo, ConvertManifest, DeployResults, VerifyRecord

KINDS = [ConvertManifest, BuildInfo, AppInfo, DeployResults, VerifyRecord, ReferenceOutputs]


def _file(tmp_path, text, name="record.json"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.KIND)
@pytest.mark.parametrize("case, text, error", [
    ("missing", None, rb.RecordMissing),
    ("not JSON", "{not json", rb.RecordUnreadable),
    ("another kind", json.dumps({"kind": "torchdroid.something-else", "schema": 1}), rb.RecordWrongKind),
    ("not a record", json.dumps([1, 2]), rb.RecordWrongKind),
    ("older schema", None, rb.RecordSchemaOlder),
    ("newer schema", None, rb.RecordSchemaNewer),
])
def test_each_kind_refuses_with_a_typed_error_naming_the_command_that_remakes_it(tmp_path, kind, case, text, error):
    path = tmp_path / ("torchdroid-app.json" if kind is AppInfo else "record.json")
    if case.endswith("schema"):
        older = min((kind.SCHEMA, *kind.READS)) - 1  # older than any schema the kind still reads
        text = json.dumps({"kind": kind.KIND, "schema": kind.SCHEMA + 1 if case == "newer schema" else older})
    if text is not None:
        path.write_text(text)
    with pytest.raises(error) as ei:
        kind.load(path)
    assert ei.value.exit_code == 5 and "`invoke " in ei.value.remedy
    assert (path.read_text() if text is not None else None) == text  # nothing deleted or rewritten


def test_a_record_of_an_earlier_torchdroid_says_so_and_is_kept(tmp_path):
    path = _file(tmp_path, json.dumps({"kind": ConvertManifest.KIND, "schema": 0, "files": "old layout"}), "manifest.json")
    with pytest.raises(rb.RecordSchemaOlder) as ei:
        ConvertManifest.load(tmp_path)
    assert "an earlier torchdroid wrote it" in ei.value.cause and "invoke convert" in ei.value.remedy
    assert json.loads(path.read_text())["files"] == "old layout"


def test_a_record_of_a_later_torchdroid_says_so(tmp_path):
    _file(tmp_path, json.dumps({"kind": ReferenceOutputs.KIND, "schema": 7}))
    with pytest.raises(rb.RecordSchemaNewer) as ei:
        ReferenceOutputs.load(tmp_path / "record.json")
    assert "a later torchdroid" in ei.value.cause and "use that torchdroid" in ei.value.remedy


@pytest.mark.parametrize("kind, body", [
    (DeployResults, {"numerics": [{"serial": "P", "file": "f", "backend": "cpu", "mode": "none",
                                   "verdict": "maybe"}]}),
    (DeployResults, {"hardware": [{"serial": "P"}]}),
    (DeployResults, {"results": [{"serial": "P"}]}),
    (ReferenceOutputs, {"files": [{"file": "f"}]}),
])
def test_a_malformed_body_is_a_typed_error_with_the_remedy(tmp_path, kind, body):
    path = _file(tmp_path, json.dumps({"kind": kind.KIND, "schema": kind.SCHEMA, **body}))
    with pytest.raises(rb.RecordMalformed, match="incomplete or malformed") as ei:
        kind.load(path)
    assert ei.value.remedy == kind.REMEDY


def test_a_deploy_run_is_one_document_with_its_checks(tmp_path):
    place = Placement("P", "m-nnapi.pt", "full", "accelerated", operations=[["CONV_2D", "qti-dsp"]])
    verdict = NumericsVerdict("P", "m-nnapi.pt", "nnapi", "full", "unknown", reason="no output")
    doc = DeployResults(3, "2026-11-27T12:00:00+00:00", [], numerics=[verdict], hardware=[place])
    path = doc.write(tmp_path / "run-0003.json")
    data = json.loads(path.read_text())
    assert (data["kind"], data["schema"]) == (DeployResults.KIND, DeployResults.SCHEMA) and data["written"]
    assert DeployResults.load(path) == doc
    unchecked = DeployResults(4, "", []).write(tmp_path / "run-0004.json")
    assert (DeployResults.load(unchecked).numerics, DeployResults.load(unchecked).hardware) == (None, None)


@pytest.mark.parametrize("found, error", [("0", rb.RecordSchemaOlder), ("2", rb.RecordSchemaNewer)])
def test_a_results_store_of_another_torchdroid_is_refused_the_same_way_and_kept(tmp_path, found, error):
    import sqlite3
    from contextlib import closing

    from deploy.results import ResultStore

    path = tmp_path / "results.sqlite"
    ResultStore(path).begin_run("2026-11-27T12:00:00+00:00", "p", "c", {})
    with closing(sqlite3.connect(path)) as con, con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (found,))
    before = path.read_bytes()
    with pytest.raises(error) as ei:
        ResultStore(path).runs()
    assert ei.value.exit_code == 5 and "--results" in ei.value.remedy
    assert path.read_bytes() == before


def test_the_push_cache_is_a_record_and_an_earlier_ones_is_ignored_then_replaced(tmp_path):
    """local-hashes.json (deploy/hashes.py) is a kind on the record base: written with its schema, read back; the
    cache an earlier torchdroid wrote (no schema) is not trusted, and the next deploy replaces it."""
    from deploy.hashes import LocalHashes

    model = _file(tmp_path, "weights", "m.pt")
    cache = tmp_path / "local-hashes.json"
    with LocalHashes(cache) as hashes:
        digest = hashes.get(model)
    data = json.loads(cache.read_text())
    assert data["kind"] == "torchdroid.local-hashes" and data["schema"] == 1
    assert LocalHashes(cache).lookup(model)[1] == digest  # read back: not hashed again
    key = LocalHashes().lookup(model)[0]
    cache.write_text(json.dumps({"kind": "torchdroid.local-hashes", "files": {key: "0" * 64}}))  # an earlier one
    with LocalHashes(cache) as hashes:
        assert hashes.lookup(model)[1] is None and hashes.get(model) == digest
    assert json.loads(cache.read_text())["schema"] == 1


def test_the_executorch_host_bench_is_a_record_and_an_earlier_ones_is_measured_again(tmp_path):
    """executorch-host-bench.json (converter/host_bench.py) is a kind on the record base: bench reuses what this
    torchdroid wrote, and an earlier torchdroid's file (no schema) is not reused: measured again, then replaced."""
    from converter.host_bench import PteHostBenchRecord

    path = tmp_path / "executorch-host-bench.json"
    rb.write_record(path, "torchdroid.executorch-host-bench", 1, {"timing_key": "k", "rows": []})
    assert PteHostBenchRecord.last(tmp_path)["timing_key"] == "k"
    path.write_text(json.dumps({"kind": "torchdroid.executorch-host-bench", "timing_key": "k", "rows": []}))
    assert PteHostBenchRecord.last(tmp_path) == {}


def test_the_host_bench_is_a_record_and_an_earlier_ones_is_refused_with_the_command(tmp_path):
    """host-bench.json (converter/host_bench.py) is a kind on the record base, like executorch-host-bench.json:
    written with its schema (2: a row's times are its ``timing``) and its rows as CSV, read back by the one reader;
    an earlier torchdroid's file (no schema, or schema 1's flat rows) is refused naming `invoke bench`, and left as
    it is."""
    from types import SimpleNamespace

    from converter.host_bench import BenchRow, HostBenchRecord
    from converter.rounds import Timing

    row = BenchRow("m.pt", "m.pt", "torchscript-cpu", "fp32", Timing(1.0, 1.0, 1.0, 1.0), variant="m-quant_none",
                   mode="none", mobile_optimized=True)
    settings = SimpleNamespace(threads=1, warmup=1, iters=2, repeat=1)
    path, csv_path = HostBenchRecord.write_results(tmp_path, settings, "bench", [row], [], [], None)
    assert json.loads(path.read_text())["schema"] == 2
    assert HostBenchRecord.load(path).data["rows"][0]["timing"]["median_ms"] == 1.0
    assert BenchRow.from_dict(HostBenchRecord.load(path).data["rows"][0]) == row  # the one row type, read back
    assert csv_path.read_text().splitlines()[1].startswith("m.pt,m-quant_none,none,m.pt,torchscript-cpu,fp32")
    written = json.loads(path.read_text())
    for earlier in ({k: v for k, v in written.items() if k != "schema"},
                    {**written, "schema": 1, "rows": [{"file": "m.pt", "median_ms": 1.0}]}):
        path.write_text(json.dumps(earlier))
        with pytest.raises(rb.RecordSchemaOlder, match=f"schema {earlier.get('schema')}") as e:
            HostBenchRecord.load(path)
        assert "invoke bench" in e.value.remedy and json.loads(path.read_text()) == earlier


EDITS = [  # (what the hand edit does, the field set in the written document, the words of the refusal)
    ("an accelerated placement with an operation on the CPU fallback", "hardware", 0, "operations",
     [["CONV_2D", "qti-dsp"], ["ADD", "nnapi-reference"]], "status 'accelerated', but 1 of its 2"),
    ("a placement on the CPU fallback said to be accelerated", "hardware", 0, "status", "cpu", "status 'cpu'"),
    ("a top-1 count above its total", "numerics", 0, "top1", "3/1", "top-1 '3/1'"),
    ("a negative largest difference", "numerics", 0, "max_abs", -0.5, "largest difference -0.5"),
    ("a 'differs' without what differs", "numerics", 0, "verdict", "differs", "without what differs"),
    ("an ok row without latencies", "results", 0, "median_ms", None, "an ok row needs positive latencies"),
    ("a row of another run", "results", 0, "run_id", 9, "run 9, in the document of run 3"),
]


@pytest.mark.parametrize("what, section, index, key, value, said", EDITS, ids=[e[0] for e in EDITS])
def test_a_record_that_contradicts_itself_is_refused_with_the_remedy(tmp_path, what, section, index, key, value,
                                                                     said):
    """Issue 34 item 7: hand-edited or self-contradicting records were drawn as measurements."""
    from toolchain.records import ResultRow

    row = ResultRow("P", "Pixel", "b", "14", 34, "arm64-v8a", "m", "quant_full", "full", "nnapi", "binary", "ok",
                    "m-nnapi.pt", 5.0, 6.0, 4.0, 1.0, 10, run_id=3)
    place = Placement("P", "m-nnapi.pt", "full", "accelerated", operations=[["CONV_2D", "qti-dsp"]])
    verdict = NumericsVerdict("P", "m-nnapi.pt", "nnapi", "full", "agrees", top1="1/1", max_abs=0.01)
    path = DeployResults(3, "2026-11-27T12:00:00+00:00", [row], numerics=[verdict], hardware=[place]).write(
        tmp_path / "run-0003.json")
    assert DeployResults.load(path).hardware == [place]  # as written: consistent
    data = json.loads(path.read_text())
    data[section][index][key] = value
    if key == "verdict":
        data[section][index]["reason"] = ""
    path.write_text(json.dumps(data))
    with pytest.raises(rb.RecordMalformed) as ei:
        DeployResults.load(path)
    assert "contradicts itself" in ei.value.what and said in ei.value.cause, ei.value.cause
    assert "invoke deploy" in ei.value.remedy


def test_a_programs_verdict_that_contradicts_itself_is_refused_with_the_run_document(tmp_path):
    """Moved from the ExecuTorch numerics record (gone: the programs' verdicts are in the run's document)."""
    verdict = NumericsVerdict("P", "m.pte", "executorch", "fp32", "agrees", top5="5/5")
    path = DeployResults(1, "", [], numerics=[verdict]).write(tmp_path / "run-0001.json")
    data = json.loads(path.read_text())
    data["numerics"][0]["top5"] = "7/5"
    path.write_text(json.dumps(data))
    with pytest.raises(rb.RecordMalformed, match="contradicts itself") as ei:
        DeployResults.load(path)
    assert "invoke deploy" in ei.value.remedy


@pytest.mark.parametrize("when", ["CREATE TABLE IF NOT EXISTS meta", "INSERT INTO runs"])
def test_a_results_database_on_a_full_disk_is_called_a_full_disk(tmp_path, monkeypatch, when):
    """Issue 34: results on a full disk were called "not a torchdroid results database"."""
    import sqlite3

    from deploy import results as store_module
    from toolchain.errors import NoSpaceError

    real = sqlite3.connect

    class Full:
        def __init__(self, con):
            self.con = con

        def __getattr__(self, name):
            return getattr(self.con, name)

        def __enter__(self):
            return self.con.__enter__()

        def __exit__(self, *a):
            return self.con.__exit__(*a)

        def execute(self, sql, *args):
            if sql.startswith(when):
                raise sqlite3.OperationalError("database or disk is full")
            return self.con.execute(sql, *args)

    monkeypatch.setattr(store_module.sqlite3, "connect", lambda *a, **k: Full(real(*a, **k)))
    path = tmp_path / "results" / "results.sqlite"
    with pytest.raises(NoSpaceError) as ei:
        store_module.ResultStore(path).begin_run("2026-11-27T12:00:00+00:00", "p", "c", {})
    assert f"results.sqlite in {path.parent}" in ei.value.what and "mounted at" in ei.value.cause
    assert "not a torchdroid results database" not in str(ei.value)


def test_a_results_store_of_an_earlier_torchdroid_is_read_its_rows_torchscript_ones(tmp_path):
    """A store written before rows had a format (every row TorchScript's then): read, its rows TorchScript's, and
    it takes the next run's ExecuTorch rows beside them; nothing of it is lost."""
    import dataclasses
    import sqlite3
    from contextlib import closing

    from deploy.results import ResultStore
    from tests.deploy_support.report_rows import row

    path = tmp_path / "results.sqlite"
    ResultStore(path).add_run("2026-11-27T12:00:00+00:00", "p", "c", {}, [row("A", "cpu", "ok", 10.0)])
    with closing(sqlite3.connect(path)) as con, con:
        con.execute("ALTER TABLE results DROP COLUMN format")  # the layout of an earlier torchdroid
    store = ResultStore(path)
    assert [(r.serial, r.backend, r.format) for r in store.rows(1)] == [("A", "cpu", "torchscript")]
    program = dataclasses.replace(row("A", "cpu", "ok", 5.0), variant="fp32-xnnpack", backend="xnnpack",
                                  model_file="m-fp32-xnnpack.pte", format="executorch")
    store.add_run("2026-11-27T13:00:00+00:00", "p", "c", {}, [program])
    assert [r.format for r in store.rows(0)] == ["torchscript", "executorch"]
