"""Pure logic of the deploy stage: output parsing, statistics, checks, error mapping, results, tables.

The speed_benchmark_torch outputs below are in upstream's format as printed by
binaries/speed_benchmark_torch.cc (std::cout of a float: 6 significant digits),
the getprop/df/pm lines in Android 10 toybox/pm formats.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from deploy.adb import parse_getprop, state_error
from deploy.app_bench import app_command, parse_app_lines
from deploy.bench import BenchOptions, ParsedRun, bench_command, parse_output, summarize
from deploy.preflight import DeviceFacts, check_abi, check_commits, elf_abi, parse_df_available
from deploy.install import install_error, parse_failure
from deploy.push import check_dir, check_name
from deploy.report import ReportSettings, make_report
from deploy.results import ResultRow, ResultStore, export, speedups
from deploy.summary import device_tables, slower_callouts
from toolchain.errors import CompatibilityError, DeviceError, RecordError, UsageError
from toolchain.records import TensorSpec

PEP_RUN = """Starting benchmark.
Running warmup runs.
Main runs.
PyTorchObserver {"type": "NET", "unit": "us", "metric": "latency", "value": "66912"}
PyTorchObserver {"type": "NET", "unit": "us", "metric": "latency", "value": "66801"}
PyTorchObserver {"type": "NET", "unit": "us", "metric": "latency", "value": "67455"}
PyTorchObserver {"type": "NET", "unit": "us", "metric": "latency", "value": "1.23457e+06"}
Main run finished. Microseconds per iter: 371656. Iters per second: 2.69067
"""
PLAIN_RUN = """Starting benchmark.
Running warmup runs.
Main runs.
Main run finished. Microseconds per iter: 171023. Iters per second: 5.84716
"""
ABORT_RUN = """terminate called after throwing an instance of 'c10::Error'
  what():  open file failed, file path: ./missing.pt
Aborted
"""


def test_parse_report_pep_lines_including_exponent_format():
    r = parse_output(PEP_RUN, 0)
    assert r.ok and r.latencies_us == [66912.0, 66801.0, 67455.0, 1234570.0]
    assert r.per_iter_us == 371656.0


def test_parse_without_pep_uses_the_mean_line():
    r = parse_output(PLAIN_RUN, 0)
    assert r.ok and r.latencies_us == [] and r.per_iter_us == 171023.0
    s = summarize([r, parse_output(PLAIN_RUN.replace("171023", "172023"), 0)])
    assert s.median_ms == pytest.approx(171.523) and s.min_ms == pytest.approx(171.023)
    assert s.runs == 2


def test_parse_failures():
    crash = parse_output(ABORT_RUN, 134)
    assert not crash.ok and "SIGABRT" in crash.problem
    assert "SIGSEGV" in parse_output("Main runs.\n", 139).problem
    nothing = parse_output("W/libc: something\n", 0)
    assert not nothing.ok and "no latency" in nothing.problem
    assert summarize([crash, nothing]) is None


def test_summary_over_repeats():
    runs = [ParsedRun(True, [10_000.0, 11_000.0, 12_000.0], None), ParsedRun(True, [12_000.0, 13_000.0, 14_000.0], None)]
    s = summarize(runs + [ParsedRun(False, [], None, "exit code 139")])
    assert s.median_ms == pytest.approx(12.0)
    assert s.p90_ms == pytest.approx(14.0)  # nearest rank (toolchain.stats): rank ceil(0.9 * 6) = 6 of 6
    assert s.min_ms == pytest.approx(10.0)
    assert s.spread_pct == pytest.approx(100 * (13_000 - 11_000) / 12_000)
    assert s.samples == 6 and s.runs == 2


def test_bench_command_is_the_published_protocol():
    cmd = bench_command("/data/local/tmp/torchdroid/p", "m-quant_full-cpu.pt", "cpu",
                        BenchOptions(caching_allocator=True))
    assert cmd.startswith("cd /data/local/tmp/torchdroid/p && { read s _ < /proc/uptime; ./speed_benchmark_torch "
                          "--model=./m-quant_full-cpu.pt --use_bundled_input=0 --warmup=5 --iter=200 --report_pep=true "
                          "--pthreadpool_size=1 --use_caching_allocator=true & p=$!;")
    assert "grep VmHWM /proc/$p/status" in cmd and cmd.endswith('echo "TORCHDROID_RUN $s $e ${h% kB}"; exit $c; }')
    nn = bench_command("/d", "m-nnapi.pt", "nnapi", BenchOptions(caching_allocator=True, threads=None, gatord=True))
    assert "; ./gatord --app ./speed_benchmark_torch --model=./m-nnapi.pt --use_bundled_input=0 " \
           "--warmup=5 --iter=200 --report_pep=true &" in nn


def test_bench_command_without_bundled_input_uses_the_manifest_spec():
    spec = TensorSpec([1, 3, 224, 224], "float32", "channels_last")
    cmd = bench_command("/d", "m-nnapi.pt", "nnapi", BenchOptions(bundled_input=-1, threads=None), spec)
    assert ("; ./speed_benchmark_torch --model=./m-nnapi.pt --input_dims=1,3,224,224 "
            "--input_type=float --input_memory_format=channels_last --warmup=5 --iter=200 --report_pep=true &") in cmd
    assert "--use_bundled_input=2" in bench_command("/d", "m.pt", "cpu", BenchOptions(bundled_input=2), spec)
    with pytest.raises(UsageError) as e:
        bench_command("/d", "m.pt", "nnapi", BenchOptions(bundled_input=-1), TensorSpec([1, 3, 2, 2], "quint8"))
    assert "cannot make a quint8 input itself" in str(e.value) and "deploy.bundled_input = 0" in str(e.value)


def test_several_inputs_without_bundled_input_name_one_item_each_as_the_binary_splits_them(tmp_path):
    """A declared model's two inputs (token ids, a waveform), no bundled input: each flag holds one item per input,
    ';' between them, the memory format too (speed_benchmark_torch refuses counts that differ, and its default is
    one item: docs/facts.md LI1); the stand-in binary, which checks the flags as upstream does, runs the command and
    refuses the command without the memory formats (what the one-input form gave)."""
    import subprocess

    from deploy.bench import bench_args
    from tests.deploy_support.fixtures import build_standin

    specs = [TensorSpec([1, 8], "int64"), TensorSpec([1, 1, 64], "float32")]
    args = bench_args("m.pt", "cpu", BenchOptions(bundled_input=-1, threads=None, warmup=0, iters=2), specs)
    assert args[2:5] == ["--input_dims=1,8;1,1,64", "--input_type=int64;float",
                         "--input_memory_format=contiguous_format;contiguous_format"]
    assert "'--input_dims=1,8;1,1,64'" in bench_command("/d", "m.pt", "cpu", BenchOptions(bundled_input=-1), specs)
    exe = build_standin(tmp_path / "bin")
    (tmp_path / "m.pt").write_bytes(b"x")
    ok = subprocess.run([str(exe), *args[1:]], cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0 and "Main run finished" in ok.stdout, ok.stderr
    one_format = [a for a in args[1:] if not a.startswith("--input_memory_format")]
    bad = subprocess.run([str(exe), *one_format], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode != 0 and "Input dims and format should have the same number of items." in bad.stderr


def test_every_benchmark_command_gives_the_binary_the_four_flags_it_asks_for(tmp_path):
    """speed_benchmark_torch of the 2.7.1 release refuses a command line of fewer than 5 arguments (``argc < 5``:
    "Insufficient command-line flags!", exit 1, before parsing them: docs/facts.md LI1).  Every command deploy runs
    (the benchmark, bundled input or not; the probe's and the numerics check's single run) has more; the stand-in
    refuses as upstream does."""
    import subprocess

    from deploy.bench import bench_args
    from tests.deploy_support.fixtures import build_standin

    spec = TensorSpec([1, 3, 4, 4], "float32")
    forms = [bench_args("m.pt", "cpu", BenchOptions(bundled_input=0, threads=None)),
             bench_args("m.pt", "nnapi", BenchOptions(bundled_input=-1, threads=None), spec),
             bench_args("m.pt", "nnapi", BenchOptions(bundled_input=0, threads=None), warmup=0, iters=1)]
    assert all(len(args) >= 5 for args in forms), forms
    exe = build_standin(tmp_path / "bin")
    (tmp_path / "m.pt").write_bytes(b"x")
    for args in forms:
        ok = subprocess.run([str(exe), *args[1:]], cwd=tmp_path, capture_output=True, text=True)
        assert ok.returncode == 0 and "Main run finished" in ok.stdout, ok.stderr
    short = subprocess.run([str(exe), "--model=m.pt", "--iter=1", "--warmup=0"], cwd=tmp_path, capture_output=True,
                           text=True)
    assert short.returncode == 1 and "Insufficient command-line flags!" in short.stderr, short
    assert "Starting benchmark." not in short.stdout


def test_app_contract():
    assert app_command("org.x", ".MainActivity", "nnapi", BenchOptions(iters=50, warmup=3)) == (
        "am start -S -W -n org.x/.MainActivity --ez benchmark true --ei iters 50 --ei warmup 3 --es backend nnapi")
    line = ('11-23 10:41:24.123  4242  4260 I torchdroid: TORCHDROID_BENCH {"variant": "quant_full", '
            '"backend": "nnapi", "fell_back": false, "median_ms": 12.3}')
    assert parse_app_lines("--------- beginning of main\n" + line + "\nTORCHDROID_BENCH {broken") == [
        {"variant": "quant_full", "backend": "nnapi", "fell_back": False, "median_ms": 12.3}]


def test_getprop_and_facts():
    props = parse_getprop("[ro.build.version.sdk]: [28]\n[ro.product.cpu.abilist]: [arm64-v8a,armeabi-v7a]\n"
                          "[ro.product.model]: [Pixel 3a]\n[ro.board.platform]: [sdm670]\n"
                          "[ro.build.version.release]: [9]\n[weird line\n")
    f = DeviceFacts.from_props("SER", props)
    assert (f.model, f.board, f.sdk, f.abis) == ("Pixel 3a", "sdm670", 28, ("arm64-v8a", "armeabi-v7a"))
    assert not f.nnapi_ok and "SDK 28" in f.nnapi_skip_reason()
    with pytest.raises(DeviceError) as e:
        check_abi(f, "x86_64")
    assert "cannot run a x86_64 binary" in str(e.value) and "--abi arm64-v8a" in str(e.value)


def test_df_layouts():
    toybox = ("Filesystem       1K-blocks    Used Available Use% Mounted on\n"
              "/dev/block/dm-5  115249236 8233148 106885016   8% /data\n")
    assert parse_df_available(toybox) == 106885016 * 1024
    wrapped = ("Filesystem           1K-blocks      Used Available Use% Mounted on\n"
               "/dev/block/bootdevice/by-name/userdata\n"
               "                       26391900  15460076  10931824  59% /data\n")
    assert parse_df_available(wrapped) == 10931824 * 1024
    assert parse_df_available("df: /nope: No such file or directory\n") is None


def test_state_errors_carry_remedies():
    assert "Allow USB debugging" in str(state_error("S", "unauthorized"))
    assert "adb reconnect offline" in str(state_error("S", "offline"))


def test_install_failures_map_to_cause_and_remedy():
    out = "Failure [INSTALL_FAILED_UPDATE_INCOMPATIBLE: Package org.x signatures do not match previously installed]"
    assert parse_failure(out) == ("INSTALL_FAILED_UPDATE_INCOMPATIBLE",
                                  "Package org.x signatures do not match previously installed")
    e = install_error("S1", "org.x", out)
    assert "signed with another key" in str(e) and "adb -s S1 uninstall org.x" in str(e)
    assert "never uninstalls" in str(e)
    e = install_error("S1", "org.x", "Failure [INSTALL_FAILED_NO_MATCHING_ABIS: Failed to extract native libraries, "
                                     "res=-113]")
    assert "app.abi_filters" in str(e)
    e = install_error("S1", "org.x", "Failure [INSTALL_FAILED_USER_RESTRICTED: Install canceled by user]")
    assert "Install via USB" in str(e)
    e = install_error("S1", "org.x", "Error: something odd")
    assert "unknown failure" in str(e) and "logcat" in str(e)


def test_commit_check():
    assert check_commits("abc1234def", {"a.pt": "abc1234def"}, False) == []
    with pytest.raises(CompatibilityError) as e:
        check_commits("abc1234def", {"a.pt": "0123456789", "b.pt": "abc1234def"}, False)
    assert "a.pt (0123456789)" in str(e.value) and "--allow-mismatch" in str(e.value) and "b.pt" not in str(e.value)
    (w,) = check_commits("abc1234def", {"a.pt": None}, True)
    assert "a.pt (unknown)" in w
    (w,) = check_commits("", {"a.pt": "x"}, False)
    assert "not checked" in w


def test_elf_abi(tmp_path):
    def elf(machine: int) -> Path:
        p = tmp_path / f"e{machine}"
        p.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 11 + machine.to_bytes(2, "little") + b"\0" * 40)
        return p

    assert elf_abi(elf(183)) == "arm64-v8a" and elf_abi(elf(62)) == "x86_64" and elf_abi(elf(40)) == "armeabi-v7a"
    (tmp_path / "txt").write_text("#!/bin/sh\n")
    with pytest.raises(UsageError) as e:
        elf_abi(tmp_path / "txt")
    assert "not an ELF executable" in str(e.value)


def test_names_and_dirs_are_validated():
    assert check_name("mobilenetv2-quant_full-cpu.pt")
    for bad in ("../x", "a b", "$(reboot)", ".hidden", ""):
        with pytest.raises(UsageError):
            check_name(bad)
    assert check_dir("/data/local/tmp/torchdroid/p/") == "/data/local/tmp/torchdroid/p"
    for bad in ("relative/dir", "/", "/data/../system", "/data/x;rm"):
        with pytest.raises(UsageError):
            check_dir(bad)


def _row(serial, model, mode, backend, median, status="ok", source="binary"):
    return ResultRow(serial=serial, device_model=model, board="b", release="11", sdk=30, abi="arm64-v8a",
                     stem="mobilenetv2", variant=f"quant_{mode}", mode=mode, backend=backend, source=source,
                     status=status, median_ms=median, p90_ms=None if median is None else median * 1.1,
                     min_ms=None if median is None else median * 0.9, spread_pct=1.0, samples=200,
                     reason="" if status == "ok" else "exit code 139: SIGSEGV (crashed)")


ROWS = [_row("A", "Pixel 3a", "full", "cpu", 66.8), _row("A", "Pixel 3a", "full", "nnapi", 171.0),
        _row("B", "S10", "full", "cpu", 40.0), _row("B", "S10", "full", "nnapi", 30.0),
        _row("B", "S10", "none", "cpu", 50.0), _row("B", "S10", "none", "nnapi", None, status="failed")]


def test_speedups_and_tables():
    sp = {(s["serial"], s["mode"]): s for s in speedups(ROWS)}
    assert sp[("A", "full")]["speedup"] == pytest.approx(66.8 / 171.0) and sp[("A", "full")]["nnapi_slower"]
    assert sp[("B", "full")]["speedup"] == pytest.approx(40 / 30) and not sp[("B", "full")]["nnapi_slower"]
    assert sp[("B", "none")]["speedup"] is None
    (callout,) = slower_callouts(ROWS)
    assert "A (Pixel 3a)" in callout and "NNAPI is 2.56x SLOWER" in callout and "171.00 ms vs 66.80 ms" in callout
    tables = {t[0].split(":")[0]: t for t in device_tables(ROWS)}
    b_rows = tables["B"][2]
    assert ["mobilenetv2", "full", "binary", "40.00", "44.00", "1.0", "30.00", "33.00", "1.0", "1.33x"] == b_rows[0][:10]
    assert b_rows[1][6] == "failed" and b_rows[1][9] == "-" and "nnapi: failed: exit code 139" in b_rows[1][10]


def test_results_store_roundtrip_and_exports(tmp_path):
    store = ResultStore(tmp_path / "r" / "results.sqlite")
    rid1 = store.add_run("2026-01-01T00:00:00+00:00", "p", "abc", {"iters": 200}, [_row("A", "P", "full", "cpu", 1.0)])
    rid2 = store.add_run("2026-01-02T00:00:00+00:00", "p", "abc", {"iters": 200}, ROWS)
    assert (rid1, rid2) == (1, 2)
    latest = store.rows()
    assert len(latest) == len(ROWS) and {r.run_id for r in latest} == {2}
    assert len(store.rows(0)) == len(ROWS) + 1
    assert store.rows(2)[1].median_ms == pytest.approx(171.0)
    with pytest.raises(RecordError) as e:
        store.rows(9)
    assert "pick one of: 1, 2" in str(e.value)
    paths = export(latest, tmp_path / "r", "run-0002")
    lines = paths["csv"].read_text().splitlines()
    assert len(lines) == 1 + len(ROWS) and lines[0].startswith("serial,device_model,")
    data = json.loads(paths["json"].read_text())
    assert data["kind"] == "torchdroid.deploy-results" and len(data["results"]) == len(ROWS)
    assert sum(s["nnapi_slower"] for s in data["speedups"]) == 1
    con = sqlite3.connect(store.path)
    assert con.execute("SELECT COUNT(*) FROM results").fetchone()[0] == len(ROWS) + 1


def test_results_store_refuses_a_foreign_file(tmp_path):
    bad = tmp_path / "results.sqlite"
    bad.write_text("not a database at all, just text" * 10)
    with pytest.raises(RecordError) as e:
        ResultStore(bad).rows()
    assert "is not a torchdroid results database" in str(e.value)


def test_report_png(tmp_path):
    ResultStore(tmp_path / "results.sqlite").add_run("2026-01-02T00:00:00+00:00", "p", "abc", {}, ROWS)
    res = make_report(ReportSettings(results=tmp_path))
    assert res.png == tmp_path / "report-run-0001.png"
    assert res.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and res.png.stat().st_size > 10_000
    with pytest.raises(RecordError) as e:
        make_report(ReportSettings(results=tmp_path, source="app"))
    assert "no app benchmarks to draw" in str(e.value) and "--source binary" in str(e.value)


@pytest.mark.parametrize("through_symlink", [False, True])
def test_a_foreign_sqlite_database_is_refused_and_left_byte_identical(tmp_path, through_symlink):
    """The user's own SQLite database where results.sqlite is expected (or a results.sqlite symlinked to it) is
    refused before anything is written into it: no torchdroid table is added to a database that is not ours."""
    import hashlib

    own = tmp_path / "mine.db"
    con = sqlite3.connect(own)
    con.execute("CREATE TABLE notes (t TEXT)")
    con.execute("INSERT INTO notes VALUES ('keep me')")
    con.commit()
    con.close()
    before = hashlib.sha256(own.read_bytes()).hexdigest()
    path = tmp_path / "results" / "results.sqlite"
    path.parent.mkdir()
    if through_symlink:
        path.symlink_to(own)
    else:
        os.replace(own, path)
        own = path
    with pytest.raises(RecordError) as e:
        ResultStore(path).add_run("2026-01-02T00:00:00+00:00", "p", "abc", {}, ROWS)
    assert "is not a torchdroid results database" in str(e.value)
    assert hashlib.sha256(own.read_bytes()).hexdigest() == before


def test_executorch_programs_use_deploys_statistics():
    """Before: deploy-executorch computed its own p90 (nearest rank: 10 ms here); the one loop's statistics
    (deploy.bench.summarize: every run's warm-up dropped, the p90 of toolchain.stats) give both formats the same numbers."""
    from deploy.executorch import program_stats
    from toolchain.stats import percentile

    def output(times):
        return "\n".join(f"I executorch:executor_runner.cpp:123] Iteration {i} of {len(times)}: {t:f} ms"
                         for i, t in enumerate(times, 1))

    stats = program_stats([output([50.0, 1, 2, 3, 4, 5]), output([60.0, 6, 7, 8, 9, 10])], warmup=1)
    assert (stats.samples, stats.runs, stats.min_ms, stats.median_ms) == (10, 2, 1.0, 5.5)
    assert stats.p90_ms == pytest.approx(percentile(list(range(1, 11)), 90))
