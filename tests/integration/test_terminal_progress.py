"""A progress bar in a terminal, also while native output goes to the run log (issue 31 item 5).

`invoke bench --host` sends torch's C++ output (fd 2) to the run log while it times; the terminal check used to be
made again inside that block, where fd 2 is a file, so the bar never drew there.  Run under a pseudo-terminal (the
pty module): what the terminal receives shows the bar, not the plain log lines a pipe gets.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INVOKE = str(Path(sys.executable).parent / "invoke")
TINY = f"{ROOT / 'tests' / 'converter_support' / 'user_models.py'}:tiny"


def run_in_terminal(args, cwd: Path, env: dict, timeout: float = 600, columns: int = 120) -> tuple:
    """``(exit code, what the terminal received)`` of ``args`` with stdin, stdout and stderr on a pseudo-terminal of
    ``columns`` columns."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError as e:  # EIO: every holder of the terminal's other end has closed it
                if e.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    return proc.returncode, received.decode("utf-8", errors="replace")


@pytest.mark.slow
def test_bench_host_draws_its_progress_bar_in_a_terminal(tmp_path):
    from converter import ConvertSettings, convert

    models = tmp_path / "build" / "models"
    convert(ConvertSettings(out=models, model=TINY, weights="random", calibration_count=8, build_dir=tmp_path / "b"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_") and k not in ("CI", "COLUMNS")}
    env.update(TERM="xterm-256color", INVOKE_BUILD_DIR=str(tmp_path / "build"))
    code, screen = run_in_terminal([INVOKE, "--search-root", str(ROOT), "bench", "--host", "--models", str(models),
                                    "--out", str(tmp_path / "bench"), "--iter", "400", "--repeat", "3"],
                                   tmp_path, env)
    assert code == 0, screen[-3000:]
    lines = re.split(r"[\r\n]+", re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen))  # what a reader sees, line by line
    bars = [line for line in lines if re.search(r"\d+/12 +[━╸╺]+ .*round \d/3: tiny-quant_", line)]
    assert bars, "\n".join(lines[-60:])  # rich's bar (count, bar, the step it is on) while the rounds run
    assert not [line for line in lines if re.search(r"\[\d+/12 \d:\d\d:\d\d.*\] round", line)]  # not a pipe's lines
    assert any("CPU models on this host" in line for line in lines)  # and the result after it
