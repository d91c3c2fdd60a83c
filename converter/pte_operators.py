"""The per-operator comparison of ``.pte`` programs, in a child process.

ExecuTorch's ETDump asserts (a C++ abort, which would kill the whole stage) when the debug buffer is too
small for a program's intermediate outputs; running the comparisons in a child turns that into a note.  One
child compares every program of a check in turn, each result written as soon as it is known, so the parent
sees which program the child died on.  The child is forked (:func:`compare_forked`): it starts with the torch and
ExecuTorch the stage has already imported, where a new interpreter spent ~12 s of CPU importing them again.  It
computes on one thread: OpenMP's thread team does not survive a fork (a parallel region in the child waits for the
parent's threads forever); PyTorch's and ExecuTorch's own thread pools reset themselves in a forked child.  By hand:

    python -m converter.pte_operators JOBS_JSON DEBUG_BUFFER_MB

JOBS_JSON: a list of ``{"program", "etrecord", "reference", "out"}`` (absolute paths; ``out`` is the JSON written).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import tempfile
import traceback
import warnings
from pathlib import Path
from typing import Tuple

from toolchain.records import load_program, program_args


def numeric_gap(program: Path, etrecord: Path, example, debug_buffer_mb: int) -> list:
    """Inspector.calculate_numeric_gap (MSE) of the program's run on ``example``, one row per compared block."""
    from executorch.devtools import Inspector
    loaded = load_program(program, enable_etdump=True, debug_buffer_size=debug_buffer_mb << 20)
    loaded.load_method("forward").execute(program_args(example))
    with tempfile.TemporaryDirectory(prefix="torchdroid-etdump-") as tmp:
        etdump, debug = Path(tmp) / "run.etdp", Path(tmp) / "run.debug"
        loaded.write_etdump_result_to_file(str(etdump), str(debug))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inspector = Inspector(etdump_path=str(etdump), etrecord=str(etrecord), debug_buffer_path=str(debug))
            gap = inspector.calculate_numeric_gap("MSE")
    return [{"aot_ops": list(r["aot_ops"]), "runtime_ops": list(r["runtime_ops"]), "mse": float(r["gap"][0])}
            for r in gap.to_dict("records")]


def main(argv=None) -> int:
    import json

    import torch

    from toolchain.fsutil import atomic_write_json

    jobs, mb = (argv or sys.argv[1:])[:2]
    for job in json.loads(Path(jobs).read_text()):
        ref = torch.load(job["reference"], weights_only=True)
        example = ref.get("example", ref["inputs"][0])  # the ETRecord's representative input (lowering's example)
        rows = numeric_gap(Path(job["program"]), Path(job["etrecord"]), example, int(mb))
        atomic_write_json(Path(job["out"]), {"rows": rows})
    return 0


def compare_forked(jobs: Path, debug_buffer_mb: int) -> Tuple[int, str]:
    """``(exit code, output)`` of :func:`main` on ``jobs`` in a forked child (negative: killed by that signal, e.g.
    -6 for ETDump's abort); the child's stdout and stderr, Python's and native code's, go to a file beside
    ``jobs``.  Interrupted (Ctrl-C), the parent kills the child before it raises: no comparison outlives the stage."""
    output = jobs.with_suffix(".out")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the parent's code, never runs its atexit handlers
        code = 1
        try:
            fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            if faulthandler.is_enabled():  # (PYTHONFAULTHANDLER, pytest) a crash's traceback goes to that file too
                faulthandler.enable(file=2)
            import torch

            torch.set_num_threads(1)  # OpenMP's team is not usable after a fork
            code = main([str(jobs), str(debug_buffer_mb)])
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status), output.read_text(errors="replace") if output.is_file() else ""


if __name__ == "__main__":
    sys.exit(main())
