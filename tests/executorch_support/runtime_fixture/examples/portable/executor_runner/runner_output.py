"""The fixture runner's ``--print_output=all`` (test-only): the program's outputs, really computed.

    python runner_output.py PROGRAM [INPUT_FILES]

Loads PROGRAM with the installed ExecuTorch runtime, fills each input from its file of INPUT_FILES (comma-separated,
raw tensor bytes; a size other than the tensor's is refused as upstream's prepare_input_tensors does: "input size
(%zu) and tensor size (%zu) mismatch!") or with ones (no files, upstream's default), runs ``forward`` once and
prints every output element as executor_runner does with ``--print_output=all`` (docs/facts.md E19):
``Output[i][j]: (float) %f`` (``(int) %d``, ``(char) %d``, ``(bool) ...``) on stdout, after the ``N outputs:`` log
line on stderr.

Fault switches (a phone whose runtime is fast and wrong, or says nothing):
* ``ETR_OFF_PERCENT=substr:N``: when the program path contains substr, every float output value is moved by N% of
  the output's largest magnitude (``ETR_OFF_OUTPUT=k``: only output k, the others as computed);
* ``ETR_NO_OUTPUT=substr``: print nothing for such a program (the runner exits 0).

``ETR_OUTPUT_CACHE=DIR`` (default ``$TMPDIR/etr-output-cache``: on a virtual phone, its own /data/local/tmp) keeps the computed outputs under the program's and the input's sha256; on a miss the
outputs of every program on every input file in the program's directory are computed in the same process
(importing torch is what costs here), so several virtual phones running the same files compute them once.  The
faults are applied after the cache.
"""

import fcntl
import hashlib
import json
import os
import sys
from pathlib import Path


def _matches(env, program):
    sub, _, n = os.environ.get(env, "").partition(":")
    return (n or "1") if sub and sub in program else None


def _digest(paths):
    return "-".join(hashlib.sha256(Path(p).read_bytes()).hexdigest()[:24] for p in paths) or "ones"


def main(argv):
    program, files = argv[1], [p for p in (argv[2] if len(argv) > 2 else "").split(",") if p]
    if _matches("ETR_NO_OUTPUT", program):
        return 0
    cache = os.environ.get("ETR_OUTPUT_CACHE") or os.path.join(os.environ.get("TMPDIR") or "/tmp", "etr-output-cache")
    hit = Path(cache) / f"{_digest([program])}-{_digest(files)}.json"
    hit.parent.mkdir(parents=True, exist_ok=True)
    with open(Path(cache) / "lock", "w") as lock:  # phones asking for the same outputs wait for the first one
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not hit.is_file():
            code, outputs = compute(program, files)
            if code:
                return code
            hit.write_text(json.dumps(outputs))
            _fill(Path(cache), Path(program), files)
    return show(program, json.loads(hit.read_text()))


def _fill(cache, program, files):
    """The outputs of the other programs and input files beside these ones, computed now (one torch import)."""
    here = Path(files[0]).parent if files else program.parent
    others = sorted(here.glob("*.bin")) if files else []
    for prog in sorted(program.parent.glob("*.pte")):
        for inp in ([[str(p)] for p in others] or [[]]):
            key = cache / f"{_digest([prog])}-{_digest(inp)}.json"
            if key.is_file():
                continue
            try:
                code, outputs = compute(str(prog), inp)
            except Exception:  # noqa: BLE001 - not a program of this runtime, or not its input
                continue
            if not code:
                key.write_text(json.dumps(outputs))


def compute(program, files):
    """(exit code, [(dtype, values)] per output) of the program on the input files (none: ones)."""
    import torch
    from executorch.runtime import Runtime

    prog = Runtime.get().load_program(program)
    method = prog.load_method("forward")
    meta = method.metadata
    inputs = []
    for i in range(meta.num_inputs()):
        t = meta.input_tensor_meta(i)
        shape = tuple(t.sizes())
        if not files:
            inputs.append(torch.ones(shape))
            continue
        if len(files) != meta.num_inputs():
            print(f"E executorch:inputs.cpp:37] Wrong number of inputs allocated compared to method "
                  f"{len(files)} ? {meta.num_inputs()}", file=sys.stderr)
            return 1, None
        data = open(files[i], "rb").read()
        if len(data) != t.nbytes():
            print(f"E executorch:inputs.cpp:180] input size ({len(data)}) and tensor size ({t.nbytes()}) mismatch!",
                  file=sys.stderr)
            return 1, None
        inputs.append(torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(shape))
    kinds = {torch.float32: "float", torch.int32: "int", torch.int8: "char", torch.bool: "bool"}
    return 0, [[kinds.get(o.dtype, "other"), o.reshape(-1).tolist()] if isinstance(o, torch.Tensor) else ["none", []]
               for o in method.execute(inputs)]


def show(program, outputs):
    """Print as executor_runner --print_output=all does (the log line on stderr, the values on stdout)."""
    print(f"I executorch:executor_runner.cpp:798] {len(outputs)} outputs: ", file=sys.stderr)
    off = float(_matches("ETR_OFF_PERCENT", program) or 0)
    only = os.environ.get("ETR_OFF_OUTPUT")
    lines = []
    for i, (kind, values) in enumerate(outputs):
        if kind == "none":
            lines.append(f"Output[{i}]: Not Tensor")
        elif kind == "float":
            moved = off if only is None or int(only) == i else 0.0
            shift = moved / 100.0 * max((abs(v) for v in values), default=0.0)
            lines.extend("Output[%d][%d]: (float) %f" % (i, j, v + shift) for j, v in enumerate(values))
        elif kind in ("int", "char"):
            lines.extend("Output[%d][%d]: (%s) %d" % (i, j, kind, v) for j, v in enumerate(values))
        elif kind == "bool":
            lines.extend("Output[%d][%d]: (bool) %s (0x%x)" % (i, j, "true " if v else "false", int(v))
                         for j, v in enumerate(values))
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
