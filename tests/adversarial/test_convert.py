"""Adversarial cases for `invoke convert`: bad values, foreign files, concurrent runs, a full disk, kills,
tampered records, stale partials.  A tiny user model (tests/converter_support/user_models.py) keeps the
CPU cost low; `--no-verify` leaves the host NNAPI out where the case is not about it."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.adversarial.harness import INVOKE, ROOT, adversarial, assert_clean, clean_env, partial_files, run_invoke, snapshot
from toolchain.fsutil import OWNER_MARKER, lock_path_for
from toolchain.records import MANIFEST_NAME, ConvertManifest

SUPPORT = ROOT / "tests" / "converter_support" / "user_models.py"
TINY = f"{SUPPORT}:tiny"
PAUSING = f"{SUPPORT}:pausing_tiny"
FAST = {"INVOKE_CONVERT_CALIBRATION_COUNT": "8"}


def convert(cwd: Path, *args: str, env=None, model: str = TINY):
    return run_invoke(["convert", "--model", model, "--weights", "random", "--no-verify", *args], cwd,
                      {**FAST, **(env or {})})


def start_convert(cwd: Path, *args: str, env=None, model: str = TINY) -> subprocess.Popen:
    argv = [INVOKE, "--search-root", str(ROOT), "convert", "--model", model, "--weights", "random", "--no-verify", *args]
    return subprocess.Popen(argv, cwd=cwd, env=clean_env({**FAST, **(env or {})}), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(predicate, timeout: float = 120.0, proc: subprocess.Popen = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended before the point to kill it: {proc.communicate()}")
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def modes_recorded(out: Path) -> set:
    if not (out / MANIFEST_NAME).is_file():
        return set()
    return {f.mode for f in ConvertManifest.load(out).files}


def check_recorded_files(out: Path) -> None:
    """Every file the manifest lists exists with its recorded hash; nothing partial is left."""
    for f in ConvertManifest.load(out).files:
        f.check_hash()
    assert not partial_files(out)


def write_image(path: Path, size, colour=(120, 60, 200)) -> None:
    from PIL import Image

    Image.new("RGB", size, colour).save(path)


# --------------------------------------------------------------------------- bad values


@adversarial("convert", "bad value (command line)")
@pytest.mark.parametrize("args, mentions", [
    (["--quant", "half"], ["half", "none, core, full"]),
    (["--quant", ","], ["no quantization mode"]),
    (["--model", "vgg16"], ["vgg16", "mobilenet_v2"]),
    (["--model", "missing.py:factory"], ["missing.py", "does not exist"]),
    (["--model", f"{SUPPORT}:not-a-name"], ["not-a-name", "function name"]),
    (["--weights", "imagenet"], ["imagenet", "--weights random"]),
    (["--calibration", "/nonexistent/images"], ["does not exist"]),
])
def test_bad_command_line_values(tmp_path, args, mentions):
    res = run_invoke(["convert", "--no-verify", "--out", "m", *args], tmp_path)
    assert_clean(res, "usage", mentions=mentions, root=tmp_path)
    assert not (tmp_path / "m" / MANIFEST_NAME).exists()


@adversarial("convert", "bad value (an option of a lane that does not run)")
@pytest.mark.parametrize("args, named", [(["--quantized-weights", "calibrate"], "--quantized-weights")])
def test_a_torchscript_option_with_only_the_executorch_lane_is_refused(tmp_path, args, named):
    """--quantized-weights with --format executorch was silently ignored (--quant chooses both lanes' programs)."""
    res = run_invoke(["convert", "--format", "executorch", "--out", "m", *args], tmp_path)
    assert_clean(res, "usage", mentions=[named, "TorchScript lane", "--format torchscript,executorch"], root=tmp_path)
    assert not (tmp_path / "m").exists()


@adversarial("convert", "bad value (INVOKE_* variable)")
@pytest.mark.parametrize("value", ["0", "-3", "many", "1.5"])
def test_bad_calibration_count_from_the_environment(tmp_path, value):
    res = convert(tmp_path, "--out", "m", env={"INVOKE_CONVERT_CALIBRATION_COUNT": value})
    assert_clean(res, "usage", mentions=["calibration_count", "INVOKE_CONVERT_CALIBRATION_COUNT"], root=tmp_path)


@adversarial("convert", "bad value (invoke.yaml)")
@pytest.mark.parametrize("setting, mentions", [
    ("calibration_count: lots", ["calibration_count", "invoke.yaml"]),
    ("quantized_weights: weights/missing.pth", ["weights/missing.pth", "calibrate"]),
])
def test_bad_convert_values_from_invoke_yaml(tmp_path, setting, mentions):
    (tmp_path / "invoke.yaml").write_text(f"convert:\n  {setting}\n")
    res = run_invoke(["-f", "invoke.yaml", "convert", "--model", TINY, "--weights", "random", "--no-verify",
                      "--out", "m"], tmp_path)
    assert_clean(res, "usage", mentions=mentions, root=tmp_path)


@adversarial("convert", "bad calibration set")
def test_one_tiny_calibration_image_is_refused_with_the_reason(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    write_image(images / "dot.png", (1, 1))
    kept = snapshot([images])
    res = convert(tmp_path, "--calibration", "images", "--out", "m")
    assert_clean(res, "usage", mentions=["1x1", "flat colour"], kept=kept, root=tmp_path)


@adversarial("convert", "bad calibration set")
def test_undecodable_calibration_image_is_named(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (images / "photo.jpg").write_text("not a jpeg at all")
    res = convert(tmp_path, "--calibration", "images", "--out", "m")
    assert_clean(res, "usage", mentions=["photo.jpg", "cannot be decoded"], root=tmp_path)


@adversarial("convert", "bad calibration set")
def test_few_calibration_images_are_warned_and_recorded(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    for i in range(2):
        write_image(images / f"i{i}.png", (64, 64), (30 * i, 90, 160))
    res = convert(tmp_path, "--calibration", "images", "--quant", "none", "--out", "m")
    assert_clean(res, "ok", mentions=["only 2 input(s)"], root=tmp_path)
    assert "only 2" in ConvertManifest.load(tmp_path / "m").conversions["tiny"]["calibration"]["warning"]


@adversarial("convert", "bad model")
def test_shape_mismatch_is_named_as_such_not_as_control_flow(tmp_path):
    res = convert(tmp_path, "--quant", "none", "--out", "m", model=f"{SUPPORT}:one_channel")
    assert_clean(res, "conversion", mentions=["does not accept", "1x3x224x224"], root=tmp_path)
    assert "control flow" not in res.text


@adversarial("convert", "bad model")
def test_a_calibration_failure_keeps_quant_none_recorded(tmp_path):
    """Calibration runs beside quant_none's export (a thread): its error refuses the quantized modes (each mode on
    its own: exit 10, the reason printed and recorded), quant_none is recorded."""
    res = convert(tmp_path, "--quant", "none,full,core", "--out", "m", model=f"{SUPPORT}:fails_calibrating")
    assert_clean(res, "partly converted", mentions=["2 refused (quant_core, quant_full)", "does not accept",
                                                    "refuses batches"], root=tmp_path)
    assert modes_recorded(tmp_path / "m") == {"none"}
    check_recorded_files(tmp_path / "m")
    assert not list((tmp_path / "m").glob("*quant_full*")) and not list((tmp_path / "m").glob("*quant_core*"))


@adversarial("convert", "bad model")
def test_a_quant_none_failure_while_calibrating_is_the_error_reported(tmp_path):
    """quant_none fails its host check (constant output) while calibration runs in a thread: that error, exit 6,
    a clean exit (the thread is waited for, never left running while the process ends), nothing recorded."""
    res = convert(tmp_path, "--quant", "none,full", "--out", "m", model=f"{SUPPORT}:constant_when_scripted")
    assert_clean(res, "conversion", mentions=["quant_none-cpu.pt gives a constant output"], root=tmp_path)
    assert modes_recorded(tmp_path / "m") == set()
    assert not list((tmp_path / "m").glob("*quant_full*"))  # the quantized modes never got to export


@adversarial("convert", "bad model")
def test_factory_file_that_raises_on_import(tmp_path):
    (tmp_path / "net.py").write_text("raise RuntimeError('half-finished file')\n")
    res = convert(tmp_path, "--out", "m", model="net.py:make")
    assert_clean(res, "usage", mentions=["could not import", "half-finished file"], root=tmp_path)


EXITING_FILES = [
    ("import sys\nsys.exit(0)\n", "called sys.exit(0) while loading"),
    ("import sys\ndef make():\n    sys.exit(3)\n", "called sys.exit(3) while building the model"),
    ("def make():\n    raise KeyboardInterrupt\n", "raised KeyboardInterrupt while building the model"),
]


@adversarial("convert", "bad model")
@pytest.mark.parametrize("text,said", EXITING_FILES, ids=["exit-0-at-import", "exit-3-in-factory", "keyboard-interrupt"])
def test_a_factory_file_that_exits_is_a_usage_error_naming_the_file(tmp_path, text, said):
    """sys.exit() or KeyboardInterrupt in the user's file must not end convert with exit 0 having made nothing."""
    (tmp_path / "net.py").write_text(text)
    res = convert(tmp_path, "--out", "m", model="net.py:make")
    assert_clean(res, "usage", mentions=["net.py", said], root=tmp_path)
    assert modes_recorded(tmp_path / "m") == set()


@adversarial("convert", "bad model")
def test_a_factory_that_hangs_is_reported_after_the_time_limit(tmp_path):
    (tmp_path / "net.py").write_text("import time\ndef make():\n    time.sleep(600)\n")
    t0 = time.monotonic()
    res = convert(tmp_path, "--out", "m", model="net.py:make", env={"INVOKE_CONVERT_FACTORY_TIMEOUT": "2"})
    assert time.monotonic() - t0 < 120
    assert_clean(res, "usage", mentions=["net.py", "2 seconds", "convert.factory_timeout"], root=tmp_path)


@adversarial("convert", "bad model")
@pytest.mark.parametrize("where", ["at-import", "in-factory"])
def test_a_factory_that_changes_directory_does_not_move_the_outputs(tmp_path, where):
    """A factory file that calls os.chdir() must not make convert write elsewhere while it names build/models."""
    (tmp_path / "elsewhere").mkdir()
    body = "import os\nimport torch\n"
    chdir = "os.chdir('elsewhere')\n"
    make = "def make():\n    {}return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())\n"
    text = body + (chdir + make.format("") if where == "at-import" else make.format("os.chdir('elsewhere'); "))
    (tmp_path / "net.py").write_text(text)
    res = convert(tmp_path, "--quant", "none", "--out", "m", model="net.py:make")
    assert_clean(res, "ok", needs_fix=False, root=tmp_path)
    assert modes_recorded(tmp_path / "m") == {"none"}
    assert not list((tmp_path / "elsewhere").iterdir())


PRINTING_FILE = """import torch
print('loading my model')
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
    def forward(self, x):
        print('forward')
        return torch.relu(self.conv(x))
def make():
    print('building my model')
    return Net()
"""


@adversarial("convert", "bad model")
def test_json_output_is_one_document_when_the_model_prints(tmp_path):
    """convert --json: stdout is one JSON document, whatever the user's file prints (Python or TorchScript's C++)."""
    (tmp_path / "net.py").write_text(PRINTING_FILE)
    res = convert(tmp_path, "--quant", "none", "--out", "m", "--json", model="net.py:make")
    assert_clean(res, "ok", needs_fix=False, root=tmp_path)
    assert json.loads(res.out)["manifest_path"].endswith("manifest.json")
    assert "building my model" in res.err


# --------------------------------------------------------------------------- other people's files


@adversarial("convert", "foreign file")
@pytest.mark.parametrize("force", [False, True])
def test_foreign_manifest_is_never_overwritten(tmp_path, force):
    out = tmp_path / "m"
    out.mkdir()
    (out / MANIFEST_NAME).write_text(json.dumps({"name": "my-web-app", "version": "1.0.0"}))
    kept = snapshot([out])
    res = convert(tmp_path, "--out", "m", *(["--force"] if force else []))
    assert_clean(res, "usage", mentions=["not written by torchdroid", "--out"], kept=kept, root=tmp_path)


@adversarial("convert", "foreign file")
def test_the_executorch_format_refuses_a_foreign_manifest_before_writing_anything(tmp_path):
    """The ExecuTorch format reads the manifest as the TorchScript format does: someone else's manifest.json is
    refused up front, even with --force, and no program is written beside it."""
    out = tmp_path / "m"
    out.mkdir()
    (out / MANIFEST_NAME).write_text(json.dumps({"name": "my-web-app", "version": "1.0.0"}))
    kept = snapshot([out])
    res = convert(tmp_path, "--out", "m", "--format", "executorch", "--delegates", "portable", "--quant", "none",
                  "--force")
    assert_clean(res, "usage", mentions=["not written by torchdroid", "--out"], kept=kept, root=tmp_path)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME]


@adversarial("convert", "foreign file")
def test_manifest_that_is_not_json_is_someone_elses(tmp_path):
    out = tmp_path / "m"
    out.mkdir()
    (out / MANIFEST_NAME).write_text("my notes, not json\n")
    (out / OWNER_MARKER).write_text("{}")  # even in a directory torchdroid owns
    kept = snapshot([out / MANIFEST_NAME])
    res = convert(tmp_path, "--out", "m")
    assert_clean(res, "usage", mentions=["not written by torchdroid"], kept=kept, root=tmp_path)


@adversarial("convert", "foreign file")
def test_directory_with_user_files_needs_force_and_keeps_them(tmp_path):
    out = tmp_path / "m"
    out.mkdir()
    (out / "thesis.tex").write_text("\\section{years of work}")
    kept = snapshot([out])
    res = convert(tmp_path, "--quant", "none", "--out", "m")
    assert_clean(res, "usage", mentions=["thesis.tex", "--force"], kept=kept, root=tmp_path)
    res = convert(tmp_path, "--quant", "none", "--out", "m", "--force")
    assert_clean(res, "ok", kept=kept, root=tmp_path)
    assert modes_recorded(out) == {"none"}


@adversarial("convert", "foreign file")
@pytest.mark.parametrize("option, name, extra", [
    ("--weights", "tiny-quant_none-cpu.pt", ["--quant", "none"]),
    ("--quantized-weights", "tiny-quant_full-cpu.pt", ["--weights", "random"]),
])
def test_an_input_named_like_an_output_is_not_overwritten(tmp_path, option, name, extra):
    import torch

    out = tmp_path / "m"
    out.mkdir()
    weights = out / name
    torch.save({"w": torch.zeros(1)}, weights)
    kept = snapshot([weights])
    res = run_invoke(["convert", "--model", TINY, *extra, option, str(weights), "--no-verify", "--out", "m"],
                     tmp_path, FAST)
    assert_clean(res, "usage", mentions=["overwrite its own input"], kept=kept, root=tmp_path)


@adversarial("convert", "bad value (pre-quantized weights)")
@pytest.mark.parametrize("content, kind, mentions", [
    (b"PK\x03\x04 not really a zip", "usage", ["not a loadable state_dict"]),
    (b"", "usage", ["not a loadable state_dict"]),
    ("list", "usage", ["holds a list, not a state_dict"]),
    ("float", "usage", ["holds float weights, not quantized ones", "--weights PATH"]),
], ids=["not-a-zip", "empty", "a-list", "float-weights"])
def test_bad_pre_quantized_weights_file_writes_nothing(tmp_path, content, kind, mentions):
    import torch

    bad = tmp_path / "q.pth"
    if content == "list":
        torch.save([1, 2, 3], bad)
    elif content == "float":
        torch.save({"conv.weight": torch.zeros(8, 3, 3, 3)}, bad)
    else:
        bad.write_bytes(content)
    kept = snapshot([bad])
    res = convert(tmp_path, "--quantized-weights", str(bad), "--out", "m")
    assert_clean(res, kind, mentions=mentions, kept=kept, root=tmp_path)
    assert not [p for p in (tmp_path / "m").glob("*") if p.name != OWNER_MARKER]


# --------------------------------------------------------------------------- concurrent runs


@adversarial("convert", "concurrent run")
def test_second_writer_is_refused_busy_and_no_mode_is_lost(tmp_path):
    pause = tmp_path / "pause"
    pause.mkdir()
    first = start_convert(tmp_path, "--quant", "full", "--out", "m", model=PAUSING,
                          env={"TD_TEST_PAUSE_DIR": str(pause), "TD_TEST_PAUSE_SECONDS": "4"})
    try:
        wait_for(lambda: (pause / "calibrating").exists(), proc=first)
        second = convert(tmp_path, "--quant", "none", "--out", "m", model=PAUSING)
        assert_clean(second, "usage", mentions=["busy", f"pid {first.pid}"])
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, out + err
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    again = convert(tmp_path, "--quant", "none", "--out", "m", model=PAUSING)
    assert_clean(again, "ok", root=tmp_path)
    assert modes_recorded(tmp_path / "m") == {"none", "full"}
    check_recorded_files(tmp_path / "m")


@adversarial("convert", "concurrent run")
def test_two_converts_started_together_keep_every_mode_that_succeeded(tmp_path):
    runs = {mode: start_convert(tmp_path, "--quant", mode, "--out", "m") for mode in ("none", "core")}
    outcomes = {mode: (p.wait(timeout=300), p.communicate()) for mode, p in runs.items()}
    succeeded = {mode for mode, (code, _) in outcomes.items() if code == 0}
    for mode, (code, (out, err)) in outcomes.items():
        assert code in (0, 2), out + err
        assert "Traceback" not in out + err
        if code == 2:
            assert "busy" in err
    assert succeeded and succeeded <= modes_recorded(tmp_path / "m")
    check_recorded_files(tmp_path / "m")


# --------------------------------------------------------------------------- a full disk


@pytest.fixture
def small_disk(tmp_path):
    """A real small filesystem (tmpfs); skipped where mounting is not allowed."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@adversarial("convert", "full disk")
def test_full_disk_is_a_clean_error_and_leaves_nothing_partial(tmp_path, small_disk):
    res = convert(tmp_path, "--quant", "none", "--out", str(small_disk / "m"))
    assert_clean(res, "usage", mentions=["not enough disk space", "free"], root=small_disk)
    assert not (small_disk / "m" / MANIFEST_NAME).exists()


@adversarial("convert", "full disk")
def test_disk_full_after_one_mode_keeps_it_and_resumes_with_the_rest(tmp_path, small_disk):
    subprocess.run(["mount", "-o", "remount,size=3m", str(small_disk)], check=True)  # room for quant_none (2 x 0.6 MB) only
    out = small_disk / "m"
    res = convert(tmp_path, "--quant", "none,core", "--out", str(out))
    assert_clean(res, "usage", mentions=["not enough disk space"], root=small_disk)
    assert modes_recorded(out) == {"none"}
    check_recorded_files(out)
    before = (out / "tiny-quant_none-cpu.pt").stat().st_mtime_ns
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)
    res = convert(tmp_path, "--quant", "none,core", "--out", str(out))
    assert_clean(res, "ok", root=small_disk)
    assert modes_recorded(out) == {"none", "core"}
    assert (out / "tiny-quant_none-cpu.pt").stat().st_mtime_ns == before  # resumed, not redone


@adversarial("convert", "full disk")
def test_disk_full_in_the_second_quantized_mode_keeps_the_first(tmp_path, small_disk):
    """quant_core is scripted and saved in a thread while quant_full is checked: its error still arrives, after
    quant_full is recorded, and leaves nothing partial."""
    subprocess.run(["mount", "-o", "remount,size=1700k", str(small_disk)], check=True)  # 1 MiB reserve + quant_full (0.35 MB)
    out = small_disk / "m"
    res = convert(tmp_path, "--quant", "full,core", "--out", str(out))
    assert_clean(res, "usage", mentions=["not enough disk space"], root=small_disk)
    assert modes_recorded(out) == {"full"}
    check_recorded_files(out)


# --------------------------------------------------------------------------- kills


def _kill_when(tmp_path: Path, args, ready, env=None, model: str = PAUSING) -> None:
    proc = start_convert(tmp_path, *args, env=env, model=model)
    try:
        wait_for(ready, proc=proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@adversarial("convert", "kill")
def test_kill_during_calibration_then_a_clean_rerun(tmp_path):
    pause = tmp_path / "pause"
    pause.mkdir()
    _kill_when(tmp_path, ["--quant", "core", "--out", "m"], lambda: (pause / "calibrating").exists(),
               env={"TD_TEST_PAUSE_DIR": str(pause)})
    res = convert(tmp_path, "--quant", "core", "--out", "m", model=PAUSING)
    assert_clean(res, "ok", root=tmp_path)
    check_recorded_files(tmp_path / "m")


@adversarial("convert", "kill")
def test_kill_after_the_first_mode_keeps_it_and_redoes_only_the_rest(tmp_path):
    pause = tmp_path / "pause"
    pause.mkdir()
    out = tmp_path / "m"
    # calibration for quant_full runs beside quant_none's export: kill once it is calibrating and none is recorded
    _kill_when(tmp_path, ["--quant", "none,full", "--out", "m"],
               lambda: (pause / "calibrating").exists() and modes_recorded(out) == {"none"},
               env={"TD_TEST_PAUSE_DIR": str(pause)})
    assert modes_recorded(out) == {"none"}
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*quant_none*.pt")}
    res = convert(tmp_path, "--quant", "none,full", "--out", "m", model=PAUSING)
    assert_clean(res, "ok", root=tmp_path)
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*quant_none*.pt")} == before
    assert modes_recorded(out) == {"none", "full"}
    check_recorded_files(out)


@pytest.mark.slow
@adversarial("convert", "kill")
def test_kills_at_several_points_never_leave_a_broken_directory(tmp_path):
    """SIGKILL a few moments into the run, whatever it is doing then (import, conversion, a save, the record)."""
    out = tmp_path / "m"
    for delay in (1.0, 2.5, 4.0, 5.5):
        proc = start_convert(tmp_path, "--out", "m")
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if (out / MANIFEST_NAME).exists():
            ConvertManifest.load(out)  # always a whole, readable record
    res = convert(tmp_path, "--out", "m")
    assert_clean(res, "ok", root=tmp_path)
    assert modes_recorded(out) == {"none", "core", "full"}
    check_recorded_files(out)


# --------------------------------------------------------------------------- tampered records, stale partials


@pytest.fixture
def converted(tmp_path):
    res = convert(tmp_path, "--quant", "none,full", "--out", "m")
    assert res.code == 0, res.text
    return tmp_path / "m"


@adversarial("convert", "tampered record")
def test_tampered_hash_in_the_manifest_rebuilds_that_mode(tmp_path, converted):
    data = json.loads((converted / MANIFEST_NAME).read_text())
    data["files"][0]["sha256"] = "0" * 64
    (converted / MANIFEST_NAME).write_text(json.dumps(data))
    res = convert(tmp_path, "--quant", "none,full", "--out", "m")
    assert_clean(res, "ok", root=tmp_path)
    check_recorded_files(converted)


@adversarial("convert", "tampered record")
@pytest.mark.parametrize("files", ["not a list", [{"file": "../../outside.pt", "mode": "none"}], [42]])
def test_malformed_manifest_of_ours_is_rebuilt_and_refused_by_readers(tmp_path, converted, files):
    data = json.loads((converted / MANIFEST_NAME).read_text())
    data["files"] = files
    (converted / MANIFEST_NAME).write_text(json.dumps(data))
    res = run_invoke(["bench", "--models", "m"], tmp_path)
    assert_clean(res, "record", mentions=["manifest"], root=tmp_path)
    res = convert(tmp_path, "--quant", "none,full", "--out", "m")
    assert_clean(res, "ok", root=tmp_path)
    assert modes_recorded(converted) == {"none", "full"}
    check_recorded_files(converted)
    assert not (tmp_path / "outside.pt").exists()


@adversarial("convert", "stale partial")
def test_stale_partials_of_a_dead_run_are_removed_by_the_next_run(tmp_path, converted):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = converted / f".tiny-quant_full-cpu.pt.td{dead.pid}.x1y2z3.partial"
    stale.write_bytes(b"half a model")
    res = convert(tmp_path, "--quant", "none,full", "--out", "m")  # nothing to rebuild: still cleaned
    assert_clean(res, "ok", root=tmp_path)
    assert not stale.exists()


@adversarial("convert", "stale lock")
def test_lock_file_of_a_killed_run_does_not_block(tmp_path, converted):
    lock = lock_path_for(converted)
    lock.write_text(json.dumps({"pid": 999999, "command": "invoke convert", "since": "yesterday"}))
    with open(lock) as f:  # nobody holds it: the kernel dropped the dead run's flock
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(f, fcntl.LOCK_UN)
    res = convert(tmp_path, "--quant", "core", "--out", "m")
    assert_clean(res, "ok", root=tmp_path)
    assert modes_recorded(converted) == {"none", "core", "full"}


@adversarial("convert", "bad value (invoke.yaml)")
def test_a_yaml_scalar_for_the_modes_list_is_one_mode_not_characters(tmp_path):
    (tmp_path / "invoke.yaml").write_text("convert:\n  quant: fulll\n")
    res = run_invoke(["-f", "invoke.yaml", "convert", "--model", TINY, "--weights", "random", "--no-verify",
                      "--out", "m"], tmp_path)
    assert_clean(res, "usage", mentions=["'fulll'", "none, core, full", "invoke.yaml"], root=tmp_path)
    (tmp_path / "invoke.yaml").write_text("convert:\n  quant: none\n")
    res = run_invoke(["-f", "invoke.yaml", "convert", "--model", TINY, "--weights", "random", "--no-verify",
                      "--out", "m"], tmp_path, FAST)
    assert_clean(res, "ok", root=tmp_path)
    assert modes_recorded(tmp_path / "m") == {"none"}


@adversarial("convert", "misleading outcome: NaN/Inf weights shipped with exit 0 (verify then blamed NNAPI)")
@pytest.mark.parametrize("bad", ["nan", "inf"])
@pytest.mark.parametrize("source", ["factory", "file"])
def test_non_finite_weights_are_refused_before_anything_is_written(tmp_path, bad, source):
    import torch

    value = float(bad)
    if source == "factory":
        (tmp_path / "net.py").write_text(
            f"import torch\nimport sys\nsys.path.insert(0, {str(SUPPORT.parent)!r})\nfrom user_models import tiny\n"
            f"def make():\n    m = tiny()\n    p = next(m.parameters())\n    with torch.no_grad():\n"
            f"        p.view(-1)[0] = float({bad!r})\n    return m\n")
        res = convert(tmp_path, "--out", "m", model="net.py:make")
    else:
        from tests.converter_support.user_models import tiny

        m = tiny()
        name = next(iter(dict(m.named_parameters())))
        state = m.state_dict()
        state[name].view(-1)[0] = value
        torch.save(state, tmp_path / "w.pth")
        res = run_invoke(["convert", "--model", TINY, "--weights", "w.pth", "--no-verify", "--out", "m"], tmp_path,
                         FAST)
    assert_clean(res, "conversion", mentions=[bad, "weights"], root=tmp_path)
    assert modes_recorded(tmp_path / "m") == set()
