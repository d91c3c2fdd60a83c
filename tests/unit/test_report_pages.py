"""The report's console output and HTML page: failed devices with their reason at the end of the console,
"unknown" (and why) in every empty device-condition cell, the weights' origin on every page (issue 24 item 5)."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from deploy.report import ReportSettings, make_report
from deploy.results import ResultStore
from workflow import show

from tests.deploy_support.report_rows import LONG, manifest, row

ROWS = [row("A", "cpu", "ok", 20.0), row("A", "nnapi", "ok", 8.0),
        row("B", "cpu", "ok", 25.0), row("B", "nnapi", "failed", reason="exit code 139: SIGSEGV"),
        row("C", "", "failed", reason=LONG, source="deploy")]
FULL = {"governors": {"schedutil": 8}, "cur_khz": [1800000], "thermal_status": 0, "temps_c": {"skin": 31.0},
        "battery_level": 80, "battery_status": "charging"}
SILENT = {"governors": {}, "cur_khz": [], "thermal_status": None, "temps_c": {}, "battery_level": None,
          "battery_status": None}
DEVICES = [{"serial": "A", "soc": "Google Tensor G3", "page_size": 16384, "before": FULL, "after": FULL,
            "warnings": []},
           {"serial": "B", "soc": "", "page_size": None, "before": SILENT, "after": None, "warnings": []}]


def _run(tmp_path, rows=ROWS, devices=DEVICES, models=None):
    settings = {"models": str(models)} if models else {}
    ResultStore(tmp_path / "results.sqlite").add_run("2026-11-23T10:00:00+00:00", "p", "abc", settings, rows,
                                                     devices)
    return make_report(ReportSettings(results=tmp_path))


class _Tables(HTMLParser):
    """Each table's rows of cell texts, keyed by the id of the heading before it."""

    def __init__(self):
        super().__init__()
        self.tables, self.heading, self.cell = {}, "", None

    def handle_starttag(self, tag, attrs):
        if tag in ("h2", "h3"):
            self.heading = dict(attrs).get("id") or ""
        elif tag == "tr":
            self.tables.setdefault(self.heading, []).append([])
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[self.heading][-1].append(self.cell.strip())
            self.cell = None


def _tables(page: str) -> dict:
    p = _Tables()
    p.feed(page)
    return p.tables


def test_console_ends_with_the_failed_devices_and_their_reasons(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    show.report(_run(tmp_path))
    out = capsys.readouterr().out
    tail = out[out.index("picture: "):]  # after every table: where people read the outcome
    assert "failed devices (1 of 3)" in tail, tail
    assert f"Phone C (C): {LONG}" in tail.replace("\n  ", " ")


def test_console_says_no_device_failed(tmp_path, capsys):
    show.report(_run(tmp_path, ROWS[:4]))
    out = capsys.readouterr().out
    assert "failed devices" not in out


def test_condition_cells_say_unknown_and_why(tmp_path):
    page = _run(tmp_path).html.read_text()
    rows = _tables(page)["conditions"]
    head, body = rows[0], rows[1:]
    by_serial = {r[0]: dict(zip(head, r)) for r in body}
    assert set(by_serial) == {"A", "B", "C"}, "every device of the run, the failed one too"
    assert all(cell for r in body for cell in r), f"an empty condition cell: {body}"
    a, b, c = by_serial["A"], by_serial["B"], by_serial["C"]
    assert a["SoC"] == "Google Tensor G3" and "unknown" not in " ".join(a.values())
    assert b["SoC"].startswith("unknown (") and "ro.soc" in b["SoC"]
    assert b["page size"].startswith("unknown (")
    assert b["CPU before"].startswith("unknown (") and "cpufreq" in b["CPU before"]
    assert b["thermal before"].startswith("unknown (") and b["battery before"].startswith("unknown (")
    assert b["CPU after"].startswith("unknown (not read")
    assert c["SoC"].startswith("unknown (") and "device C is 'unauthorized'" in c["SoC"]


def test_weights_origin_on_the_console_page_and_json(tmp_path, capsys):
    res = _run(tmp_path, models=manifest(tmp_path))
    show.report(res)
    out = capsys.readouterr().out
    assert "weights: mobilenetv2: random" in out and str(tmp_path / "models" / "manifest.json") in out
    page = res.html.read_text()
    assert "id='weights'" in page and "mobilenetv2: random" in page and "predictions are meaningless" in page
    show.report(res, as_json=True)
    assert "random" in json.dumps(json.loads(capsys.readouterr().out)["weights"])


def test_weights_origin_pretrained(tmp_path, capsys):
    res = _run(tmp_path, models=manifest(tmp_path, "pretrained"))
    show.report(res)
    out = capsys.readouterr().out
    assert "weights: mobilenetv2: pretrained (MobileNet_V2_QuantizedWeights.IMAGENET1K_QNNPACK_V1)" in out
    assert "random" not in out


def test_weights_unknown_without_a_manifest(tmp_path, capsys):
    show.report(_run(tmp_path))
    out = capsys.readouterr().out
    assert "weights: unknown (" in out and "models" in out
    (tmp_path / "again").mkdir()
    show.report(_run(tmp_path / "again", models=tmp_path / "gone"))
    out = capsys.readouterr().out
    assert "weights: unknown (" in out and str(tmp_path / "gone") in out


def test_convert_table_shows_every_declared_input():
    """convert's table: a model declaring two inputs shows each one's shape, dtype and quantization (a two-input
    quant_full model's quint8 waveform showed '-', the first input's, before)."""
    from pathlib import Path

    from toolchain.records import ModelFile, TensorSpec
    from workflow.show import _convert_row

    ids, wave = TensorSpec([1, 8], "int64"), TensorSpec([1, 1, 64], "quint8", scale=0.02, zero_point=123)
    f = ModelFile(file="m-quant_full-cpu.pt", path=Path("/m.pt"), sha256="0", size=2_000_000, model="m.py:m", stem="m",
                  mode="full", backend="cpu", input=ids, output=TensorSpec([1, 3], "quint8"), conversion={},
                  extra={"inputs": [ids.to_dict(), wave.to_dict()]})
    assert _convert_row(f)[3:7] == ("1x8; 1x1x64", "int64; quint8", "-; 0.02000", "-; 123")
