"""Both formats' host benches are one result type (converter.host_bench.HostBenchResult) shown by one function
(workflow.show.host_bench), their differences data (show.BENCH_VIEWS: the title, the ratios as verdict lines or as
the table's speed-up column); the programs' check table comes with the results that have checks (issue 31, h26)."""

from __future__ import annotations

from pathlib import Path

from converter.executorch_check import CheckRow
from converter.host_bench import BenchRow, HostBenchResult
from converter.rounds import Ratio, Timing
from toolchain import console
from toolchain.records import UNOPTIMIZED_CPU
from workflow import show

T = Timing(2.0, 2.2, 1.9, 2.0, repeats=2)


def _results() -> dict:
    none, full = "m-quant_none-cpu.pt", "m-quant_full-cpu.pt"
    ts = HostBenchResult([BenchRow(none, none, "torchscript-cpu", "fp32", T, mode="none", mobile_optimized=False),
                          BenchRow(full, full, "torchscript-cpu", "int8", T, mode="full", mobile_optimized=False)],
                         Path("host-bench.json"), Path("host-bench.csv"), [UNOPTIMIZED_CPU],
                         [Ratio(none, full, [1.5, 1.6])], quantized_engine="qnnpack")
    base, pte = "TorchScript CPU quant_none", "ExecuTorch fp32-portable"
    et = HostBenchResult([BenchRow(base, none, "torchscript-cpu", "fp32", T, mode="none", mobile_optimized=False),
                          BenchRow(pte, "m-fp32-portable.pte", "executorch", "fp32", T, note="reference kernels")],
                         Path("executorch-host-bench.json"), Path("executorch-host-bench.csv"), [UNOPTIMIZED_CPU],
                         [Ratio(base, pte, [0.5, 0.6])],
                         checks=[CheckRow("fp32-portable", "m-fp32-portable.pte", True, "eager model", max_abs_diff=1e-6,
                                          limit=1e-4, ok=True, operator_note="op by op")])
    return {"torchscript": ts, "executorch": et}


def test_both_formats_benches_are_shown_by_one_function_their_differences_as_data(capsys):
    results = _results()
    with console.one_run():
        show.by_format(results, "bench", False)
    out = capsys.readouterr().out
    assert out.count("CPU models on this host (quantized engine qnnpack") == 1
    assert out.count("host latency, same protocol") == 1
    assert out.count("ExecuTorch programs against their reference") == 1  # the results with checks only
    assert results["torchscript"].ratios[0].summary() in out  # TorchScript: a verdict line per ratio
    assert results["executorch"].ratios[0].summary() not in out  # ExecuTorch: the table's speed-up column
    assert "ExecuTorch fp32-portable: reference kernels" in out and "per operator, fp32-portable: op by op" in out
    assert out.count("optimize_for_mobile") == 1  # the one note, said once; no title says it again
    assert "results: host-bench.json" in out and "results: executorch-host-bench.json" in out
