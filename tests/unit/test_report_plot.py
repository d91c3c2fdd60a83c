"""The report's PNG by its geometry, not its pixels: every figure saved by ``invoke report`` is caught at
``savefig`` and its texts, bars and legends are measured (issue 24 item 5)."""

from __future__ import annotations


import matplotlib
import pytest

matplotlib.use("Agg")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from deploy.report import ReportSettings, make_report  # noqa: E402
from deploy.results import ResultStore  # noqa: E402
from tests.deploy_support.report_rows import LONG, manifest, row  # noqa: E402

@pytest.fixture
def saved(monkeypatch):
    """The figures report saves, kept open for measuring."""
    figures = []
    original = Figure.savefig

    def spy(self, *a, **k):
        figures.append(self)
        return original(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", spy)
    return figures


def report(tmp_path, rows, models=None):
    settings = {"models": str(models)} if models else {}
    ResultStore(tmp_path / "results.sqlite").add_run("2026-11-23T10:00:00+00:00", "p", "abc", settings, rows)
    return make_report(ReportSettings(results=tmp_path))


def _drawn(fig):
    """The saved figure laid out again on an Agg canvas (pyplot.close took its own)."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


def _boxes(fig, artists):
    r = fig.canvas.get_renderer()
    return [(a, a.get_window_extent(r)) for a in artists if a.get_visible() and a.get_text()]


def _axis_texts(ax):
    """Tick labels drawn (those of ticks inside the view limits), axis labels and the title."""
    (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    xs = [t for t in ax.get_xticklabels() if x0 <= t.get_position()[0] <= x1]
    ys = [t for t in ax.get_yticklabels() if y0 <= t.get_position()[1] <= y1]
    return [*xs, *ys, ax.xaxis.label, ax.yaxis.label, ax.title]


def _bars(ax):
    return [p for p in ax.patches if isinstance(p, Rectangle)]


MIXED = [row("A", "cpu", "ok", 20.0), row("A", "nnapi", "ok", 8.0, flags="unstable"),
         row("A", "cpu", "ok", 30.0, mode="none"), row("A", "nnapi", "failed", reason="exit code 139", mode="none"),
         row("B", "cpu", "ok", 25.0), row("B", "nnapi", "ok", 40.0),
         row("C", "", "failed", reason=LONG, source="deploy"),
         row("D", "", "failed", reason="device D went offline: " + LONG, source="deploy")]


def test_the_failed_devices_footnote_overlaps_no_axis_text(tmp_path, saved):
    report(tmp_path, MIXED)
    fig = _drawn(saved[-1])
    notes = _boxes(fig, fig.texts)
    assert any("device C is 'unauthorized'" in t.get_text() for t, _ in notes), [t.get_text() for t in fig.texts]
    axis = [b for ax in fig.axes for _, b in _boxes(fig, _axis_texts(ax))]
    page = fig.bbox
    for text, box in notes:
        hits = [b for b in axis if box.overlaps(b)]
        assert not hits, f"{text.get_text()!r} overlaps axis labels at {hits}"
        assert box.x0 >= page.x0 - 1 and box.x1 <= page.x1 + 1 and box.y0 >= page.y0 - 1, \
            f"cut off by the figure's edge: {text.get_text()!r}"


def test_a_run_where_everything_failed_draws_no_bar(tmp_path, saved):
    rows = [row("A", "cpu", "failed", reason="exit code 1: model file not found"),
            row("A", "nnapi", "skipped", reason="Android 9 (SDK 28) < SDK 29")]
    report(tmp_path, rows)
    fig = saved[-1]
    latency, speedup = fig.axes[:2]
    assert _bars(latency) == [] and _bars(speedup) == []
    said = " ".join(t.get_text() for t in latency.texts)
    assert "no measurement" in said and "exit code 1: model file not found" in said
    assert list(latency.get_yticks()) == [], "an empty latency panel has no millisecond scale to read"


def test_a_failed_row_beside_measured_ones_has_no_bar(tmp_path, saved):
    report(tmp_path, MIXED)
    latency = saved[-1].axes[0]
    ok = [r for r in MIXED if r.status == "ok"]
    assert len(_bars(latency)) == len(ok)  # one bar per measurement, none for the failed NNAPI quant_none
    assert any("no measurement" in t.get_text() for t in latency.texts)


def _legend_texts(ax):
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def _legend_colors(ax):
    legend = ax.get_legend()
    handles = getattr(legend, "legend_handles", None) or getattr(legend, "legendHandles", [])
    return {matplotlib.colors.to_hex(h.get_facecolor()) for h in handles if hasattr(h, "get_facecolor")}


def test_every_marker_has_a_legend(tmp_path, saved):
    report(tmp_path, MIXED)
    latency, speedup = saved[-1].axes[:2]
    assert any("⚠" in t.get_text() for t in latency.texts), "the test needs a flagged number"
    assert any("⚠" in t for t in _legend_texts(latency)), _legend_texts(latency)
    for ax in (latency, speedup):
        drawn = {matplotlib.colors.to_hex(p.get_facecolor()) for p in _bars(ax)}
        assert drawn and drawn <= _legend_colors(ax), (ax.get_ylabel(), drawn, _legend_texts(ax))
    assert any("1x" in t or "same speed" in t for t in _legend_texts(speedup)), "the dashed line at 1x"


def test_the_weights_origin_is_on_the_picture(tmp_path, saved):
    report(tmp_path, MIXED[:2], manifest(tmp_path))
    fig = _drawn(saved[-1])
    said = [t for t, _ in _boxes(fig, fig.texts) if "weights" in t.get_text()]
    assert said and "random" in said[0].get_text(), [t.get_text() for t in fig.texts]


def test_the_failed_devices_footnote_cuts_no_fix_short(tmp_path, saved):
    """A failed device's reason is an error's what/cause/fix text: the picture shows what failed whole and never a
    fix cut off mid-word (it showed "fix: u…" for the unauthorized phone's fix) - the page and the console have
    the cause and the fix."""
    what = "device 127.0.0.1:43897 is 'unauthorized', not ready for adb"
    fix = ("unlock the phone and accept the \"Allow USB debugging?\" prompt (tick \"Always allow\"); if no prompt "
           "appears: `adb kill-server`, replug the cable, and revoke/re-grant USB debugging authorizations in "
           "Developer options")
    reason = f"{what}\n  cause: adb can see the device but may not use it\n  fix: {fix}"
    report(tmp_path, [row("A", "cpu", "ok", 20.0), row("A", "nnapi", "ok", 8.0),
                      row("127.0.0.1:43897", "", "failed", reason=reason, source="deploy")])
    fig = _drawn(saved[-1])
    foot = " ".join(" ".join(t.get_text().split()) for t in fig.texts if "failed devices" in t.get_text())
    assert " ".join(what.split()) in foot, foot
    assert "…" not in foot and "..." not in foot, foot
    assert "fix:" not in foot or " ".join(fix.split()) in foot, foot
