"""converter.host_bench.set_threads sets torch's intra-op threads only: ExecuTorch's Python API has no public means to
size its threadpool (docs/architecture.md, "Private members of dependencies we still use, and why"), so the
record says what the pool has (EXECUTORCH_THREADS: its default, one thread per processor on a Linux host) instead of
claiming ``threads``. This test reads the pool's size with ExecuTorch's private getter (tests only) to keep the
record's statement true."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.extension.pybindings.portable_lib")

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, torch
from converter import host_bench
from executorch.extension.pybindings import portable_lib
said = host_bench.set_threads(1)
print(json.dumps([torch.get_num_threads(), portable_lib._threadpool_get_thread_count(), said]))
"""


@pytest.mark.skipif(sys.platform != "linux" or (os.cpu_count() or 1) < 2,
                    reason="one thread per processor is the default only checked on a Linux host with 2+ processors")
def test_torch_gets_the_threads_and_executorch_keeps_the_default_the_record_names():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    torch_threads, pool, said = json.loads(res.stdout.strip().splitlines()[-1])
    assert torch_threads == 1
    assert pool == os.cpu_count(), (pool, said)  # what EXECUTORCH_THREADS says: one per processor
    assert said.startswith("ExecuTorch's default") and "one per processor" in said
