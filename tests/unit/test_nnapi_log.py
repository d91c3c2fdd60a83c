"""Reading NNAPI's placement log (deploy/nnapi_log.py) from lines in the formats AOSP's runtime writes
(docs/facts.md NH1-NH7), and the device shell that sets and puts back debug.nn.vlog."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from deploy import hardware_report, nnapi_log
from deploy.bench import BenchOptions
from toolchain.records import ModelFile, TensorSpec

PID = 21016


def _model(name: str = "m-quant_full-nnapi.pt") -> ModelFile:
    spec = TensorSpec([1, 3, 224, 224], "float32")
    return ModelFile(name, Path(name), "0" * 64, 1, "m", "m", "full", "nnapi", spec, spec, {})


def _probe(*lines: str, set_to: str = "compilation,manager", pid: int = PID) -> str:
    head = [f"{nnapi_log.MARK} before []", f"{nnapi_log.MARK} set [{set_to}]", f"{nnapi_log.MARK} run {pid} 0 []"]
    return "\n".join(head + list(lines)) + "\n"


def _line(tag: str, msg: str, pid: int = PID) -> str:
    return f"08-15 23:18:17.212 {pid:5d} {pid:5d} I {tag:<8}: {msg}"


def _best(op: str, i: int, name: str) -> str:
    return _line("ExecutionPlan", f"ModelBuilder::findBestDeviceForEachOperation({op}) = {i} ({name})")


def test_android_10_lines_with_chatty_are_expanded_to_every_operation():
    # a run of 4 identical lines as logd's chatty writes it: the first, "identical 2 lines", the last (NH6)
    out = _probe(_line("Manager", "Found interface qti-dsp"), _line("Manager", "Found interface qti-gpu"),
                 _best("CONV_2D", 0, "qti-dsp"), _best("MUL", 0, "qti-dsp"),
                 _line("chatty", "uid=2000(shell) /data/local/tmp/benchmark_model identical 2 lines"),
                 _best("MUL", 0, "qti-dsp"), _best("ADD", 0, "qti-dsp"),
                 _line("ExecutionPlan", "ModelBuilder::partitionTheWork: only one best device: 0 = qti-dsp"))
    p = nnapi_log.placement("s", _model(), nnapi_log.read_probe(out))
    assert p.status == "accelerated" and p.single_device == "qti-dsp", p
    assert [op for op, _ in p.operations] == ["CONV_2D", "MUL", "MUL", "MUL", "MUL", "ADD"]
    assert p.drivers == ["qti-dsp", "qti-gpu"] and p.where() == "qti-dsp (all 6)"
    assert p.restored is True and not p.reason


def test_android_12_lines_with_indices_and_the_cpu_fallback():
    out = _probe(_line("ExecutionPlan", "ModelBuilder::findBestDeviceForEachOperation(CONV_2D:0) = 0 (npu)"),
                 _line("ExecutionPlan", "ModelBuilder::findBestDeviceForEachOperation(RESHAPE:1) = 1 (nnapi-reference)"),
                 _line("ExecutionPlan", "ModelBuilder::findBestDeviceForEachOperation(CONV_2D:2) = 0 (npu)"))
    p = nnapi_log.placement("s", _model(), nnapi_log.read_probe(out))
    assert p.status == "partly-cpu" and p.fallback_operations() == {"RESHAPE": 1}
    assert p.where() == "npu 2 + nnapi-reference 1"
    every = _probe(_best("CONV_2D", 1, "nnapi-reference"), _best("ADD", 1, "nnapi-reference"))
    assert nnapi_log.placement("s", _model(), nnapi_log.read_probe(every)).status == "cpu"


def test_a_compilation_fallback_overrides_the_plan():
    # the partitioner chose qti-gpu for everything, then qti-gpu's prepareModel failed: CompilationBuilder::finish
    # threw the plan away and ran the whole model on nnapi-reference (docs/facts.md PW1)
    plan = (_line("ExecutionPlan", "Device qti-gpu can't do operation AVERAGE_POOL_2D:1"),
            _line("ExecutionPlan", "ModelBuilder::findBestDeviceForEachOperation(CONV_2D:0) = 0 (qti-gpu)"),
            _line("ExecutionPlan", "ModelBuilder::findBestDeviceForEachOperation(AVERAGE_POOL_2D:1) = 1 "
                                   "(nnapi-reference)"))
    fell = _probe(*plan, _line("CompilationBuilder", "CompilationBuilder::finish with CPU fallback"))
    p = nnapi_log.placement("s", _model(), nnapi_log.read_probe(fell))
    assert p.status == "cpu" and p.where() == "nnapi-reference (all 2)", p
    assert p.planned == [["CONV_2D", "qti-gpu"], ["AVERAGE_POOL_2D", "nnapi-reference"]], p
    assert "'CompilationBuilder: CompilationBuilder::finish with CPU fallback'" in p.reason
    assert "prepareModel failed" in p.reason and p.fallback == ["CompilationBuilder: CompilationBuilder::finish with "
                                                                  "CPU fallback"]
    assert p.why_on_cpu() == {"AVERAGE_POOL_2D": ["qti-gpu"]}, p
    page = hardware_report.html_section([p], {}, "")
    assert "<th>planned (thrown away)</th>" in page and "<td class='t'>qti-gpu</td>" in page, page
    assert "AVERAGE_POOL_2D x1 (qti-gpu can&#x27;t do it)" in page, page
    # the control: the same plan without the fallback line is what the plan says
    kept = nnapi_log.placement("s", _model(), nnapi_log.read_probe(_probe(*plan)))
    assert kept.status == "partly-cpu" and not kept.planned and not kept.fallback, kept


def test_execution_fallbacks_partial_and_full():
    plan = (_best("CONV_2D", 0, "npu"), _best("RESHAPE", 1, "nnapi-reference"))
    partial = _probe(*plan, _line("ExecutionBuilder", "cpuFallbackPartial"))
    p = nnapi_log.placement("s", _model(), nnapi_log.read_probe(partial))
    assert p.status == "partly-cpu" and "ran that step again" in p.reason and "cpuFallbackPartial" in p.reason, p
    one = (_best("CONV_2D", 0, "npu"), _best("ADD", 0, "npu"))
    assert nnapi_log.placement("s", _model(), nnapi_log.read_probe(
        _probe(*one, _line("ExecutionBuilder", "cpuFallbackPartial")))).status == "partly-cpu"
    full = nnapi_log.placement("s", _model(), nnapi_log.read_probe(
        _probe(*one, _line("ExecutionBuilder", "cpuFallbackFull"))))
    assert full.status == "cpu" and full.per_device() == {"nnapi-reference": 2} and "whole model" in full.reason
    # the control: no fallback line, the plan stands
    assert nnapi_log.placement("s", _model(), nnapi_log.read_probe(_probe(*one))).status == "accelerated"


def test_other_processes_lines_and_dropped_lines():
    out = _probe(_best("CONV_2D", 0, "gpu"), _best("ADD", 1, "nnapi-reference", ) .replace(f"{PID:5d}", "  777"),
                 _line("chatty", "uid=2000(shell) ./speed_benchmark_torch expire 3 lines"))
    p = nnapi_log.placement("s", _model(), nnapi_log.read_probe(out))
    assert p.operations == [["CONV_2D", "gpu"]] and p.status == "accelerated"
    assert "dropped 3 line(s)" in p.reason


def test_what_cannot_be_read_is_unknown_never_guessed():
    cases = {
        "no lines": (_probe(), "logged no ExecutionPlan line"),
        "a changed format": (_probe(_line("ExecutionPlan", "ModelBuilder::findBestDeviceForEachOperation CONV_2D -> "
                                                           "qti-dsp")), "format torchdroid does not know"),
        "setprop refused": (_probe(_best("CONV_2D", 0, "gpu"), set_to=""), "did not take"),
        "cut short": ("", "cut short"),
    }
    for name, (out, why) in cases.items():
        p = nnapi_log.placement("s", _model(), nnapi_log.read_probe(out))
        assert p.status == "unknown" and why in p.reason, (name, p)
    # the negative control: the same lines in the known format are read
    assert nnapi_log.placement("s", _model(), nnapi_log.read_probe(_probe(_best("CONV_2D", 0, "gpu")))).status \
        == "accelerated"


def _fake_phone(tmp_path: Path) -> dict:
    """getprop/setprop/logcat over a file, and a benchmark binary that hangs: the probe's shell on a host sh."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    prop = tmp_path / "vlog"
    prop.write_text("model")
    scripts = {
        "getprop": f"#!/bin/sh\ncat {prop}\n",
        "setprop": f"#!/bin/sh\nprintf %s \"$2\" > {prop}\n",
        "logcat": "#!/bin/sh\nexit 0\n",
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    phone_dir = tmp_path / "dir"
    phone_dir.mkdir()
    started = tmp_path / "model-runs"  # the benchmark has started: the probe set the property before it
    (phone_dir / "speed_benchmark_torch").write_text(f"#!/bin/sh\ntouch {started}\nsleep 30\n")
    (phone_dir / "speed_benchmark_torch").chmod(0o755)
    return {"env": dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}"), "prop": prop, "dir": phone_dir,
            "saved": tmp_path / "saved-settings", "started": started}


def test_the_device_shell_puts_the_property_back_when_it_is_hung_up(tmp_path):
    phone = _fake_phone(tmp_path)
    cmd = nnapi_log.probe_command(str(phone["dir"]), _model(), BenchOptions(), str(phone["saved"]))
    assert _hang_up(phone, cmd.replace("trap ", ": "), signal.SIGHUP) == nnapi_log.VLOG_VALUE  # without the traps
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        assert _hang_up(phone, cmd, sig) == "model", sig


def _hang_up(phone: dict, cmd: str, sig: int) -> str:
    """The property's value after the probe's shell got ``sig`` while the model ran."""
    phone["prop"].write_text("model")
    proc = subprocess.Popen(["/bin/sh", "-c", cmd], env=phone["env"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_signals_as_adbd_leaves_them)
    deadline = time.monotonic() + 10
    while phone["prop"].read_text() != nnapi_log.VLOG_VALUE and time.monotonic() < deadline:
        time.sleep(0.02)
    assert phone["prop"].read_text() == nnapi_log.VLOG_VALUE
    proc.send_signal(sig)  # adbd hangs the shell up when the host goes away
    proc.wait(timeout=10)
    if _alive(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)
    return phone["prop"].read_text()


def _signals_as_adbd_leaves_them() -> None:
    """A device shell starts with the default signal handling; pytest under `nohup` (or a CI runner) may have
    left SIGHUP ignored, which a non-interactive shell cannot trap or undo (POSIX, `trap`)."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


def test_a_fallback_without_a_logged_plan_is_the_whole_model_on_the_cpu():
    # a runtime that logged no per-operation line but threw its (unlogged) plan away: cpu, not unknown
    out = _probe(_line("CompilationBuilder", "CompilationBuilder::finish with CPU fallback"))
    p = nnapi_log.placement("s", _model(), nnapi_log.read_probe(out))
    assert p.status == "cpu" and not p.operations and p.where() == "nnapi-reference (whole model)", p
    assert hardware_report.summary([p], {})[1] == [["s", "CPU (NNAPI fallback)", "unknown"]]

def _probe_until_set(phone: dict, cmd: str) -> subprocess.Popen:
    """The probe's shell, once it has set the property and the model runs (the property alone is not enough: a run
    cut off before left it set, and this run's setprop may not have come yet)."""
    phone["started"].unlink(missing_ok=True)
    proc = subprocess.Popen(["/bin/sh", "-c", cmd], env=phone["env"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_signals_as_adbd_leaves_them)
    deadline = time.monotonic() + 10
    while not phone["started"].exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert phone["prop"].read_text() == nnapi_log.VLOG_VALUE
    return proc


def test_a_probe_cut_off_without_its_trap_leaves_the_users_value_for_the_next_run(tmp_path):
    """Issue 34 item 4: the link drops and the shell dies before any trap runs (SIGKILL): the phone keeps the
    probe's value, but the user's is in a file on the phone; a second probe does not take the probe's value for
    the user's, and the next run's first step puts the user's back."""
    from deploy.environment import restore_all_command, restored

    phone = _fake_phone(tmp_path)
    cmd = nnapi_log.probe_command(str(phone["dir"]), _model(), BenchOptions(), str(phone["saved"]))
    for _ in range(2):  # cut off twice in a row: the second run reads the first one's value as the phone's
        proc = _probe_until_set(phone, cmd)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert phone["prop"].read_text() == nnapi_log.VLOG_VALUE
        assert (phone["saved"] / nnapi_log.VLOG_PROP).read_text().strip() == "model"
    out = subprocess.run(["/bin/sh", "-c", restore_all_command(str(phone["saved"]))], env=phone["env"],
                         capture_output=True, text=True, timeout=10)
    assert phone["prop"].read_text() == "model", out
    assert restored(out.stdout) == [f"{nnapi_log.VLOG_PROP} put back to 'model' (an earlier torchdroid run changed "
                                    "it and was cut off before it could)"], out
    assert list(phone["saved"].iterdir()) == []


def test_ctrl_c_stops_the_probes_model_run_at_once(tmp_path):
    """Issue 34 item 4: the probe's model run is in the benchmark's pid file, so the host's Ctrl-C (bench's
    stop_command) ends it, and the probe's shell puts the property back, without waiting for the run."""
    from deploy.bench import stop_command

    phone = _fake_phone(tmp_path)
    cmd = nnapi_log.probe_command(str(phone["dir"]), _model(), BenchOptions(), str(phone["saved"]))
    proc = _probe_until_set(phone, cmd)
    try:
        deadline = time.monotonic() + 10
        while not (phone["dir"] / ".torchdroid-bench.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # the model is started right after the property is set
        start = time.monotonic()
        out = subprocess.run(["/bin/sh", "-c", stop_command(str(phone["dir"]))], env=phone["env"],
                             capture_output=True, text=True, timeout=10)
        assert out.stdout.startswith("stopped "), out
        proc.wait(timeout=5)  # the model would run 30 s
        assert time.monotonic() - start < 5
    finally:
        if _alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    assert phone["prop"].read_text() == "model"
