"""The report's HTML page opened in a real headless browser (Debian's chromium): tables, reasons and the chart."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from deploy.report import ReportSettings, make_report
from deploy.results import ResultStore
from toolchain.records import ResultRow

BROWSER = shutil.which("chromium-headless-shell") or shutil.which("chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def _row(serial, backend, status, median=None, reason="", source="binary", sdk=30, mode="full", flags=""):
    ok = status == "ok"
    return ResultRow(serial=serial, device_model=f"Phone {serial}", board="b", release="11", sdk=sdk, abi="arm64-v8a",
                     stem="mobilenetv2" if source != "deploy" else "", variant=f"quant_{mode}",
                     mode=mode if source != "deploy" else "", backend=backend, source=source, status=status,
                     model_file=f"mobilenetv2-quant_{mode}-{backend}.pt", median_ms=median,
                     p90_ms=median * 1.1 if ok else None, min_ms=median * 0.9 if ok else None,
                     max_ms=median * 1.3 if ok else None, mean_ms=median if ok else None,
                     std_ms=median * 0.05 if ok else None, spread_pct=2.0 if ok else None, samples=200 if ok else 0,
                     load_ms=310.0 if ok else None, first_ms=median * 3 if ok else None, peak_kb=51200 if ok else None,
                     reason=reason, flags=flags)


ROWS = [
    _row("A", "cpu", "ok", 20.0), _row("A", "nnapi", "ok", 8.0, flags="nnapi-deprecated",
                                       reason="Android 15 (SDK 35) deprecates NNAPI"),
    _row("A", "cpu", "ok", 30.0, mode="none"),
    _row("A", "nnapi", "failed", reason="exit code 139: SIGSEGV (crashed)", mode="none"),
    _row("B", "cpu", "ok", 25.0), _row("B", "nnapi", "skipped", reason="Android 9 (SDK 28) < SDK 29"),
    _row("C", "", "failed", reason="device C is 'unauthorized', not ready for adb", source="deploy"),
]
DEVICES = [{"serial": "A", "soc": "Google Tensor G3", "page_size": 16384, "throttled": True,
            "warnings": ["thermal status moderate after the benchmark: the device throttled"],
            "before": {"governors": {"schedutil": 8}, "cur_khz": [1800000], "thermal_status": 0,
                       "temps_c": {"skin": 31.0}, "battery_level": 80, "battery_status": "charging"},
            "after": {"governors": {"schedutil": 8}, "cur_khz": [1200000], "thermal_status": 2,
                      "temps_c": {"skin": 44.5}, "battery_level": 78, "battery_status": "charging"}}]


@pytest.mark.skipif(BROWSER is None, reason="needs chromium (./run test installs chromium-headless-shell)")
def test_report_page_in_a_headless_browser(tmp_path):
    ResultStore(tmp_path / "results.sqlite").add_run("2026-11-23T10:00:00+00:00", "p", "abc", {}, ROWS, DEVICES)
    res = make_report(ReportSettings(results=tmp_path))
    assert res.html == tmp_path / "report-run-0001.html" and res.png.is_file()
    profile = tmp_path / "profile"
    dom = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom",
                          res.html.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    width = re.search(r'data-chart-width="(\d+)"', page)
    assert width and int(width.group(1)) > 500, "the browser could not show the chart PNG"
    text = re.sub(r"<[^>]+>", " ", page)
    # failed and skipped rows with their reason, never "n/a"
    assert "exit code 139: SIGSEGV (crashed)" in text and "Android 9 (SDK 28) &lt; SDK 29" in text
    assert "device C is 'unauthorized'" in text.replace("&#x27;", "'")
    assert "n/a" not in text
    assert page.count('<tr class="failed">') >= 2 * 2 and '<tr class="skipped">' in page  # latency + failures tables
    # the speed-up and the spread people compare; the NNAPI deprecation mark; the conditions
    assert "2.50x" in text and "nnapi-deprecated" in text and "may come from a CPU fallback driver" in text
    assert "Google Tensor G3" in text and "thermal status moderate after the benchmark" in text
    assert "16384" in text and "80% charging" in text and "44.5" in text


def test_report_page_without_a_chart_is_seen_as_broken(tmp_path):
    """The browser check can fail: a page whose PNG is missing reports width 0."""
    if BROWSER is None:
        pytest.skip("needs chromium")
    ResultStore(tmp_path / "results.sqlite").add_run("2026-11-23T10:00:00+00:00", "p", "abc", {}, ROWS, DEVICES)
    res = make_report(ReportSettings(results=tmp_path))
    res.png.unlink()
    dom = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                          "--dump-dom", res.html.as_uri()], capture_output=True, text=True, timeout=120)
    assert 'data-chart-width="0"' in dom.stdout


def _dom(tmp_path, page) -> str:
    dom = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


def _executorch_part(page: str) -> str:
    start = page.index("<h2 id=\"executorch\">")
    return page[start:page.index("<h2", start + 10)]


@pytest.mark.slow
@pytest.mark.skipif(BROWSER is None, reason="needs chromium (./run test installs chromium-headless-shell)")
def test_executorch_section_in_a_headless_browser(executorch_report_chain, tmp_path):
    """A real deploy of both formats on virtual devices: the page's ExecuTorch tables; a later run without
    ExecuTorch rows has none (the hint instead)."""
    chain = executorch_report_chain
    fresh = make_report(ReportSettings(results=shutil.copytree(chain.fresh, tmp_path / "fresh")))
    part = _executorch_part(_dom(tmp_path, fresh.html))
    text = re.sub(r"<[^>]+>", " ", part)
    for serial in chain.serials.values():
        assert serial in text
    for runtime in ("TorchScript CPU quant_none", "NNAPI quant_none", "ExecuTorch fp32-xnnpack", "ExecuTorch int8-xnnpack"):
        assert text.count(runtime) == 2, runtime
    # the console's columns (deploy/summary.py line_cells), the heading saying what the speed-up is over
    assert "speed-up over the legacy CPU model" in text and " speed-up " in text and "1.00x" in text
    by_serial = {t.serial: t for t in fresh.executorch.devices}
    int8 = next(r for r in by_serial[chain.serials["pixel"]].rows if r.runtime == "ExecuTorch int8-xnnpack")
    assert f"{int8.speedup_vs_cpu:.2f}x" in text

    older = make_report(ReportSettings(results=shutil.copytree(chain.older, tmp_path / "older")))
    part = _executorch_part(_dom(tmp_path, older.html))
    assert "<table" not in part and "no ExecuTorch rows in run 3" in part and not older.executorch.devices


# test-only: measures the laid-out page and writes the numbers onto <body> for --dump-dom to carry out
MEASURE = """<script>window.addEventListener('load', function () {
  var b = document.body, root = document.documentElement, widest = '', most = 0;
  document.querySelectorAll('body *').forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.right > most) { most = r.right; widest = el.tagName + ' ' + (el.textContent || '').slice(0, 60); }
  });
  var cut = [];
  document.querySelectorAll('#failures + * td, #failures + * th').forEach(function (td) {
    if (td.getBoundingClientRect().right > window.innerWidth) { cut.push(td.textContent.slice(0, 40)); }
  });
  b.setAttribute('data-scroll-width', String(root.scrollWidth));
  b.setAttribute('data-inner-width', String(window.innerWidth));
  b.setAttribute('data-widest', widest + ' @' + Math.round(most));
  b.setAttribute('data-cut', JSON.stringify(cut));
});</script>"""

LONG_REASON = ("device D failed: adb: failed to install /home/someone/projects/torchdroid/build/app/app/build/outputs/"
               "apk/debug/app-debug.apk: Failure [INSTALL_FAILED_UPDATE_INCOMPATIBLE: Existing package "
               "org.pytorch.torchdroid.benchmark.quant_full signatures do not match newer version; ignoring!]; "
               "cause: an app with this id signed by another key is installed; fix: uninstall it by hand with "
               "adb -s D uninstall org.pytorch.torchdroid.benchmark.quant_full, then run invoke deploy again")


@pytest.mark.skipif(BROWSER is None, reason="needs chromium (./run test installs chromium-headless-shell)")
def test_report_page_fits_a_1280_px_window(tmp_path):
    """At 1280x800 nothing is wider than the window, and the failures table's reason column is on screen,
    with a long reason (a path with no space in it too) in the latency and failures tables."""
    rows = ROWS + [_row("D", "nnapi", "failed", reason=LONG_REASON),
                   _row("E", "", "failed", reason=LONG_REASON.replace(" ", "/"), source="deploy")]
    ResultStore(tmp_path / "results.sqlite").add_run("2026-11-23T10:00:00+00:00", "p", "abc", {}, rows, DEVICES)
    res = make_report(ReportSettings(results=tmp_path))
    page = res.html.read_text()
    assert "id='failures'" in page or 'id="failures"' in page, "the failures table has an anchor to measure it by"
    measured = res.html.with_name("measure.html")
    measured.write_text(page.replace("</body>", MEASURE + "</body>"))
    dom = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,800",
                          "--virtual-time-budget=5000", "--dump-dom", measured.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    got = {k: v for k, v in re.findall(r'data-(scroll-width|inner-width|widest|cut)="([^"]*)"', dom.stdout)}
    assert got.get("inner-width") == "1280", got
    assert int(got["scroll-width"]) <= 1280, f"the page is wider than the window: {got}"
    assert got["cut"] == "[]", f"failures table cells off screen: {got['cut']}"
