"""The per-operator comparison of ``.pte`` programs, in a child process.

ExecuTorch's ETDump asserts (a C++ abort, which would kill the whole stage) when the debug buffer is too
small for a program's intermediate outputs; running the comparisons in a child turns that into a note.  One
child compares every program of a check in turn (one start-up of torch and ExecuTorch's devtools, not one per
program), each result written as soon as it is known, so the parent sees which program the child died on.

    python -m converter.pte_operators JOBS_JSON DEBUG_BUFFER_MB

JOBS_JSON: a list of ``{"program", "etrecord", "reference", "out"}`` (absolute paths; ``out`` is the JSON written).
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path


def numeric_gap(program: Path, etrecord: Path, example, debug_buffer_mb: int) -> list:
    """Inspector.calculate_numeric_gap (MSE) of the program's run on ``example``, one row per compared block."""
    from executorch.devtools import Inspector
    from executorch.extension.pybindings import portable_lib

    module = portable_lib._load_for_executorch(str(program), enable_etdump=True,
                                               debug_buffer_size=debug_buffer_mb << 20)
    module.forward([example])
    with tempfile.TemporaryDirectory(prefix="torchdroid-etdump-") as tmp:
        etdump, debug = Path(tmp) / "run.etdp", Path(tmp) / "run.debug"
        module.write_etdump_result_to_file(str(etdump), str(debug))
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


if __name__ == "__main__":
    sys.exit(main())
