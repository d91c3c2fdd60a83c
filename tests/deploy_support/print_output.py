"""The virtual phone's answer (test-only): what ``speed_benchmark_torch --print_output=true`` prints, computed.

``python print_output.py MODEL BUNDLED_INDEX`` loads the pushed TorchScript file with the host's torch, runs it
on its bundled input BUNDLED_INDEX (an NNAPI model through torch's NNAPI runtime over the project's host
libneuralnetworks, in the rounding ``SBT_NNAPI_ROUNDING``, default ``nnapi``: this phone's "driver") and prints
the output with ATen's own printer (TorchScript's print), as upstream's binary does (docs/facts.md NU1, NU2).

Fault switches (a phone's driver that is fast and wrong):
* ``SBT_OFF_LSB=substr:N``: when the model path contains substr, every output value is moved by N steps of the
  output's quantization (a float output by N x 1% of its largest magnitude);
* ``SBT_NO_OUTPUT=substr``: print nothing for such a model (the binary goes on: a phone that says nothing);
* ``SBT_OFF_OUTPUT=k``: with ``SBT_OFF_LSB``, move only output tensor k of a tuple, list or dict (0-based).

``SBT_OUTPUT_CACHE=DIR`` keeps each computed text under the model's sha256, the index and the rounding, so the
same file on several virtual phones is computed once (the faults are applied after the cache).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import sys
from pathlib import Path


def _matches(env: str, model: str):
    spec = os.environ.get(env, "")
    sub, _, n = spec.partition(":")
    return (n or "1") if sub and sub in model else None


def compute(model: Path, index: int, rounding: str, off: int):
    import torch

    if "nnapi" in model.name:
        from host_nnapi import runtime

        runtime.load()
        runtime.set_rounding(rounding)
    if "qnnpack" in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = "qnnpack"
    m = torch.jit.load(str(model), map_location="cpu").eval()
    inputs = m.get_all_bundled_inputs()
    if index >= len(inputs):
        print(f"Model has only {len(inputs)} bundled inputs.", file=sys.stderr)
        raise SystemExit(1)
    with torch.no_grad():
        out = m(*inputs[index])
    only = os.environ.get("SBT_OFF_OUTPUT")
    return show(_moved(out, off, None if only is None else int(only)) if off else out)  # the whole output (EP1)


def _moved(out, off: int, only=None):
    """Every output tensor (``only``: the one of that index) moved by ``off`` steps; a tuple, list or dict of them
    keeps its structure."""
    import torch

    if isinstance(out, (tuple, list)):
        return type(out)(o if only not in (None, k) else _moved(o, off) for k, o in enumerate(out))
    if isinstance(out, dict):
        return {k: v if only not in (None, i) else _moved(v, off) for i, (k, v) in enumerate(out.items())}
    if out.is_quantized:
        q = (out.int_repr().to(torch.int32) + off).clamp(0, 255).to(torch.uint8)
        return torch._make_per_tensor_quantized_tensor(q, out.q_scale(), out.q_zero_point())
    return out + off * 0.01 * float(out.abs().max())


def show(t) -> str:
    """``std::cout << IValue`` as ATen writes it: a tensor, or a tuple, list or dict of them (TorchScript's print
    takes the same operator<<)."""
    from typing import Any

    import torch

    @torch.jit.script
    def _print(x: Any) -> int:
        print(x)
        return 0

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        _print(t)
    return buf.getvalue()


def main(argv) -> int:
    model, index = Path(argv[1]), int(argv[2])
    if _matches("SBT_NO_OUTPUT", str(model)):
        return 0
    rounding = os.environ.get("SBT_NNAPI_ROUNDING", "nnapi")
    off = int(_matches("SBT_OFF_LSB", str(model)) or 0)
    cache = os.environ.get("SBT_OUTPUT_CACHE")
    key = f"{hashlib.sha256(model.read_bytes()).hexdigest()}-{index}-{rounding}-{off}.txt"
    if not cache:
        sys.stdout.write(compute(model, index, rounding, off) + "\n")
        return 0
    hit = Path(cache) / key
    hit.parent.mkdir(parents=True, exist_ok=True)
    with open(hit.with_suffix(".lock"), "w") as lock:  # phones asking for the same output wait for the first one
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not hit.is_file():
            tmp = hit.with_suffix(f".{os.getpid()}.partial")
            tmp.write_text(compute(model, index, rounding, off))
            os.replace(tmp, hit)
    sys.stdout.write(hit.read_text() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
