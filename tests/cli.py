"""The tests' one way to run this project's ``invoke`` command line: :func:`invoke`.

A fresh ``python -m invoke`` pays for torch's import (~4 s) and ExecuTorch's (~12 s) before our first line runs.
:func:`invoke` runs the same program as a child of the adversarial suite's fork server (torch, torchvision and
ExecuTorch imported once, none of our modules: tests/adversarial/forkrun.py) with the caller's working directory
and *exactly* the caller's environment (nothing added, nothing taken out: unlike ``harness.run_invoke``, which
gives a case a user's clean environment).  It starts a real new interpreter instead when ``fresh=True`` (a test
about the process itself: what it imports, how it starts or dies), when ``env`` differs from the server's in a
variable read at start-up (``forkrun.import_time_keys``) or when ``TORCHDROID_TEST_FORK=0``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

INVOKE = str(Path(sys.executable).parent / "invoke")


def invoke(cwd, *args: str, env: Optional[Dict[str, str]] = None, timeout: Optional[float] = 300,
           stdin: Optional[str] = None, fresh: bool = False) -> subprocess.CompletedProcess:
    """``subprocess.run([invoke, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    input=stdin)``: ``env`` None is this process's environment."""
    from tests.adversarial.forkrun import import_time_keys
    from tests.adversarial.harness import fork_server

    args = [str(a) for a in args]
    env = dict(os.environ if env is None else env)
    server = None if fresh else fork_server()
    if server is not None and not import_time_keys(env, server.env):
        code, out, err = server.run(args, cwd, env, timeout=timeout, stdin=stdin)
        return subprocess.CompletedProcess([INVOKE, *args], code, out, err)
    return subprocess.run([INVOKE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          input=stdin)
