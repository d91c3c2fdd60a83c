"""deploy's own readers, fed what the real tools write: APK manifests compiled by Debian's aapt and aapt2,
the benchmark wrapper's line, dumpsys/sysfs text, ELF program headers from the host linker."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from deploy.apk import ManifestError, parse_binary_xml, read_apk
from deploy.bench import BenchOptions, ParsedRun, cold_start, parse_output, summarize
from deploy.environment import SECTION, parse_snapshot, throttle_warnings
from deploy.lock import Owner, is_stale
from deploy.orchestrate import wanted_serials
from deploy.preflight import DeviceFacts, check_page_size, load_alignment, parse_page_size
from deploy.results import ResultStore
from deploy.plan import DeploySettings, app_bench_skip, plan_app
from tests.deploy_support.fixtures import APP_ID, FRAMEWORK_RES, make_apk, manifest_xml
from toolchain.errors import CompatibilityError, RecordError, UsageError
from toolchain.records import APP_BENCH_META, ResultRow

needs_aapt = pytest.mark.skipif(shutil.which("aapt") is None or shutil.which("aapt2") is None
                                or not FRAMEWORK_RES.is_file(), reason="needs aapt, aapt2, android-framework-res")


def _compile(tool: str, text: str, tmp: Path) -> Path:
    (tmp / "AndroidManifest.xml").write_text(text)
    out = tmp / f"{tool}.apk"
    if tool == "aapt":
        cmd = ["aapt", "package", "-f", "-M", str(tmp / "AndroidManifest.xml"), "-I", str(FRAMEWORK_RES), "-F", str(out)]
    else:
        cmd = ["aapt2", "link", "-o", str(out), "--manifest", str(tmp / "AndroidManifest.xml"), "-I", str(FRAMEWORK_RES)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


@needs_aapt
@pytest.mark.parametrize("tool", ["aapt", "aapt2"])
@pytest.mark.parametrize("activity", [".Start", "Start", "com.other.ui.Start"])
def test_package_and_launchable_activity_as_aapt_reads_them(tmp_path, tool, activity):
    apk = _compile(tool, manifest_xml("com.other.app", 24, activity), tmp_path)
    facts = read_apk(apk)
    badging = subprocess.run(["aapt", "dump", "badging", str(apk)], capture_output=True, text=True).stdout
    assert f"package: name='{facts.package}'" in badging
    assert f"launchable-activity: name='{facts.activity}'" in badging
    assert f"sdkVersion:'{facts.min_sdk}'" in badging and facts.binary_manifest


@needs_aapt
def test_no_launcher_and_damaged_manifests(tmp_path):
    apk = _compile("aapt", manifest_xml("com.other.app", launcher=False), tmp_path)
    assert read_apk(apk).activity is None
    with zipfile.ZipFile(apk) as z:
        raw = z.read("AndroidManifest.xml")
    with pytest.raises(ManifestError):
        parse_binary_xml(raw[:40])  # cut inside the string pool
    broken = tmp_path / "broken.apk"
    with zipfile.ZipFile(broken, "w") as z:
        z.writestr("AndroidManifest.xml", raw[:100])
    with pytest.raises(UsageError) as e:
        read_apk(broken)
    assert "cannot be read" in str(e.value)
    (tmp_path / "x.apk").write_bytes(b"PK nonsense")
    with pytest.raises(UsageError, match="is not an APK"):
        read_apk(tmp_path / "x.apk")


@needs_aapt
@pytest.mark.parametrize("tool", ["aapt", "aapt2"])
def test_the_benchmark_contract_as_aapt_compiles_it(tmp_path, tool):
    """The <meta-data> the generated app declares (android:value "1" is compiled to an integer) and its absence."""
    apk = _compile(tool, manifest_xml("com.other.app", 24, ".Bench", contract="1"), tmp_path)
    facts = read_apk(apk)
    xmltree = subprocess.run(["aapt", "dump", "xmltree", str(apk), "AndroidManifest.xml"], capture_output=True,
                             text=True).stdout
    assert f'android:name(0x01010003)="{APP_BENCH_META}"' in xmltree
    assert "android:value(0x01010024)=(type 0x10)0x1" in xmltree  # what the reader's attribute id table says
    assert (facts.bench_activity, facts.bench_contract) == ("com.other.app.Bench", "1")
    assert app_bench_skip(facts) is None
    (tmp_path / "two").mkdir()
    newer = read_apk(_compile(tool, manifest_xml("com.other.app", 24, ".Bench", contract="2"), tmp_path / "two"))
    assert "contract version '2'" in app_bench_skip(newer) and "make-app" in app_bench_skip(newer)
    (tmp_path / "none").mkdir()
    foreign = read_apk(_compile(tool, manifest_xml("com.other.app", 24, ".Bench"), tmp_path / "none"))
    assert foreign.bench_activity is None and foreign.activity == "com.other.app.Bench"
    assert "does not declare" in app_bench_skip(foreign)


@needs_aapt
def test_an_app_not_made_by_make_app_is_planned_by_its_package(tmp_path):
    """No launcher, no contract: installed and named by its package, never an error (there is nothing to fix)."""
    apk = make_apk(tmp_path / "THEIR.apk", package="org.example.service", launcher=False, contract=None)
    plan = plan_app(DeploySettings(models=tmp_path, results=tmp_path, apk=apk), have_binary=False)
    assert plan.package == plan.stem == "org.example.service" and plan.activity is None
    assert "org.example.service does not declare" in plan.bench_skip
    ours = plan_app(DeploySettings(models=tmp_path, results=tmp_path, apk=make_apk(tmp_path / "ours.apk")),
                    have_binary=False)
    assert ours.bench_skip is None and ours.activity == f"{APP_ID}.MainActivity" and ours.stem == "mobilenetv2"


def test_wrapper_line_gives_peak_memory_and_wall_time():
    pep = 'PyTorchObserver {"type": "NET", "unit": "us", "metric": "latency", "value": "%s"}\n'
    out = pep % "30000" + pep % "12000" + pep % "11000" + "TORCHDROID_RUN 1000.10 1000.45 \t 51234\n"
    run = parse_output(out, 0)
    assert run.ok and run.peak_kb == 51234 and run.wall_s == pytest.approx(0.35)
    cold = cold_start(run)
    assert cold.first_ms == 30.0 and cold.warmup_ms == pytest.approx(11.5)
    assert cold.load_ms == pytest.approx(350 - 53)
    assert parse_output(pep % "0" + "Main run finished. Microseconds per iter: 0. Iters per second: 0\n", 0).ok is False


def test_statistics_and_the_variance_flag():
    runs = [ParsedRun(True, [10_000.0, 12_000.0, 11_000.0], None), ParsedRun(True, [15_000.0, 15_500.0, 14_500.0], None)]
    st = summarize(runs)
    assert st.mean_ms == pytest.approx(13.0) and st.min_ms == 10.0 and st.max_ms == 15.5
    assert st.std_ms > 1.0 and st.unstable and "repeats disagree" in st.variance_note()
    assert not summarize(runs[:1]).unstable
    with pytest.raises(UsageError, match="iters must be at least 1"):
        BenchOptions(iters=0)


def test_device_conditions_from_real_formats():
    cpus = "cpu0 schedutil 1785600 2016000\ncpu4 powersave 300000 2803200\n"
    zones = "cpu-0-0-usr 41200\nbattery 29\n"
    thermal = ("IsStatusOverride: false\nThermal Status: 2\nCached temperatures:\nHAL Ready: true\n"
               "Current temperatures from HAL:\n\tTemperature{mValue=45.1, mType=3, mName=skin, mStatus=2}\n"
               "\tName: VIRTUAL-SKIN, Type: 3, Status: 0, Value: 39.000000\n")
    battery = "Current Battery Service state:\n  AC powered: false\n  USB powered: true\n  status: 2\n  level: 64\n" \
              "  temperature: 305\n"
    snap = parse_snapshot(SECTION + "\n" + cpus + SECTION + zones + SECTION + thermal + SECTION + battery)
    assert snap.governors == {"schedutil": 1, "powersave": 1} and snap.cur_khz == [1785600, 300000]
    assert snap.temps_c["cpu-0-0-usr"] == 41.2 and snap.temps_c["skin"] == 45.1 and snap.temps_c["VIRTUAL-SKIN"] == 39.0
    assert snap.thermal_status == 2 and snap.battery_level == 64 and snap.charging and snap.battery_status == "charging"
    assert snap.battery_temp_c == 30.5
    docked = battery.replace("USB powered: true", "USB powered: false\n  Wireless powered: false\n"
                             "  Dock powered: true")
    assert parse_snapshot(SECTION * 3 + SECTION + docked).charging
    unplugged = docked.replace("Dock powered: true", "Dock powered: false")
    assert parse_snapshot(SECTION * 3 + SECTION + unplugged).charging is False
    warnings = throttle_warnings(parse_snapshot(""), snap)
    assert any("moderate after" in w for w in warnings) and any("powersave" in w for w in warnings)
    assert throttle_warnings(parse_snapshot(""), parse_snapshot("")) == []


def _link(tmp_path: Path, name: str, *flags: str) -> Path:
    (tmp_path / "m.c").write_text("int main(void){return 0;}\n")
    out = tmp_path / name
    subprocess.run(["gcc", "-o", str(out), str(tmp_path / "m.c"), *flags], check=True)
    return out


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("readelf") is None, reason="needs gcc and readelf")
def test_page_alignment_as_readelf_sees_it(tmp_path):
    small = _link(tmp_path, "small", "-Wl,-z,max-page-size=4096")
    big = _link(tmp_path, "big", "-Wl,-z,max-page-size=16384")
    for exe in (small, big):
        lw = subprocess.run(["readelf", "-lW", str(exe)], capture_output=True, text=True).stdout
        aligns = [int(line.split()[-1], 16) for line in lw.splitlines() if line.strip().startswith("LOAD")]
        assert load_alignment(exe) == min(aligns)
    facts = DeviceFacts("s", "Pixel 9", "b", "15", 35, ("x86_64",), page_size=parse_page_size("16384\n"))
    check_page_size(facts, big, load_alignment(big))
    with pytest.raises(CompatibilityError, match="16 KB memory pages"):
        check_page_size(facts, small, load_alignment(small))
    assert parse_page_size("getconf: no\n") is None


def test_stale_locks():
    import socket

    me = socket.gethostname().split(".")[0]
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert is_stale(Owner(dead.pid, me, 0, "t"), now=100, host=me)
    assert not is_stale(Owner(os.getppid(), me, 90, "t"), now=100, host=me)
    assert not is_stale(Owner(1, "other-host", 90, "t"), now=100, host=me)
    assert is_stale(Owner(1, "other-host", 0, "t"), now=7 * 3600, host=me)
    assert is_stale(None, now=0, host=me)


def test_android_serial_when_no_serial_is_given(monkeypatch):
    monkeypatch.setenv("ANDROID_SERIAL", "emulator-5554")
    assert wanted_serials(()) == ["emulator-5554"]
    assert wanted_serials(("abc", "abc")) == ["abc"]
    monkeypatch.delenv("ANDROID_SERIAL")
    assert wanted_serials(()) == []


def test_the_store_refuses_nonsense(tmp_path):
    row = ResultRow(serial="s", device_model="m", board="b", release="11", sdk=30, abi="a", stem="x",
                    variant="quant_full", mode="full", backend="cpu", source="binary", status="ok",
                    median_ms=0.0, p90_ms=0.0, min_ms=0.0, samples=0)
    store = ResultStore(tmp_path / "results.sqlite")
    with pytest.raises(RecordError, match="positive latencies"):
        store.add_run("t", "p", "", {}, [row])
    row.status = "failed"
    with pytest.raises(RecordError, match="needs its reason"):
        store.add_run("t", "p", "", {}, [row])
    assert not store.runs()


def test_a_run_whose_rows_cannot_be_added_is_not_left_in_the_store(tmp_path, monkeypatch):
    """add_run is all or nothing: begin_run reserves the run, and a failure adding its rows drops it again."""
    row = ResultRow(serial="s", device_model="m", board="b", release="11", sdk=30, abi="a", stem="x",
                    variant="quant_full", mode="full", backend="cpu", source="binary", status="ok",
                    median_ms=1.0, p90_ms=1.0, min_ms=1.0, samples=3)
    store = ResultStore(tmp_path / "results.sqlite")

    def full_disk(*_args, **_kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "add_rows", full_disk)
    with pytest.raises(OSError):
        store.add_run("t", "p", "", {}, [row])
    assert not store.runs()


def test_the_app_template_logs_the_progress_lines_deploy_waits_on():
    from toolchain.records import APP_PROGRESS_PREFIX

    root = Path(__file__).resolve().parents[2] / "templates" / "android_app"
    java = next(root.rglob("MainActivity.java")).read_text()
    assert APP_PROGRESS_PREFIX in java
    for stage in ('"loaded"', '"warmup"', '"iter"'):
        assert f"progress(requested, {stage}" in java
