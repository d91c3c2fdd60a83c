"""The virtual phone's NNAPI runtime log (test-only): what AOSP's runtime writes to logcat when it compiles a model.

``python nnapi_runtime_log.py MODEL PID`` is run by the benchmark stand-in (``SBT_NNAPI_LOG_CMD``) when it loads an
NNAPI model.  It decodes the real NNAPI model inside the pushed TorchScript file (the project's decoder of torch's
serialized NNAPI model), places each operation on this phone's drivers as ``findBestDeviceForEachOperation`` does
(the first driver that supports the operation, else ``nnapi-reference``, the CPU fallback), and appends the lines
the runtime would log for process PID to the virtual logcat, only as far as ``debug.nn.vlog`` enables them
(docs/facts.md NH1-NH7):

* ``Manager: Found interface NAME`` per driver (``manager`` tag; from SDK 33 always, with `` (version = 1.3)``);
* ``ExecutionPlan: Device NAME can't do operation OP`` for each driver that does not support an operation, then
  ``ExecutionPlan: ModelBuilder::findBestDeviceForEachOperation(OP) = I (NAME)`` per operation (``compilation``
  tag; from SDK 31 ``OP:INDEX`` in both), then ``partitionTheWork: only one best device: I = NAME`` when one device
  takes every operation (docs/facts.md PW3);
* a driver named in ``SBT_NNAPI_PREPARE_FAILS`` that the plan uses fails ``prepareModel``: the runtime throws the
  plan away, ``CompilationBuilder: CompilationBuilder::finish with CPU fallback`` (``compilation`` tag, PW1);
* a driver named in ``SBT_NNAPI_EXECUTE_FAILS`` that the plan uses fails its execution: ``ExecutionBuilder:
  cpuFallbackPartial`` when the plan has several steps (devices), ``cpuFallbackFull`` when one device has the
  whole model (``execution`` tag, PW2);
* on SDK <= 30 logd's chatty collapses a run of identical lines: the first, ``identical N lines``, the last.

The phone's drivers: ``SBT_NNAPI="qti-dsp=quant,qti-gpu=float"``: NAME=KINDS with KINDS ``float``, ``quant`` or
``all``, and ``-OP`` to leave an operation out (``npu=all-ADD-RESHAPE``).  Unset: the phone logs nothing.
``SBT_NNAPI_FORMAT=changed``: the same facts in words the runtime never used (a format change).
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Dict, List, Set, Tuple

CPU = "nnapi-reference"


def props() -> Dict[str, str]:
    text = (Path(os.environ["VDEV_STATE"]) / "props.txt").read_text()
    return dict(re.findall(r"^\[([^\]]*)\]: \[(.*)\]$", text, re.M))


def vlog_tags(value: str) -> Set[str]:
    """AOSP's initVLogMask: split on space, comma or colon; "1" or "all" turn every tag on."""
    tags = {t for t in re.split(r"[ ,:]", value) if t}
    return {"model", "compilation", "execution", "cpuexe", "manager", "driver"} if tags & {"1", "all"} else tags


def drivers(spec: str) -> List[Tuple[str, Set[str], Set[str]]]:
    out = []
    for entry in filter(None, (x.strip() for x in spec.split(","))):
        name, _, rule = entry.partition("=")
        kinds, *left_out = rule.split("-")
        out.append((name, {"float", "quant"} if kinds == "all" else {kinds}, set(left_out)))
    return out


def operations(model: Path) -> List[Tuple[str, str]]:
    """(operation name, float | quant) of the NNAPI model inside the file, in the model's order."""
    import torch

    from host_nnapi.graph import decode_module

    g = decode_module(torch.jit.load(str(model), map_location="cpu"))
    return [(op.name, "quant" if "QUANT" in g.operands[op.inputs[0]].type_name else "float") for op in g.operations]


def lines(model: Path, sdk: int, tags: Set[str], spec: str, changed: bool,
          fails: Tuple[str, str] = ("", "")) -> List[Tuple[str, str]]:
    """The runtime's lines for one run of MODEL; ``fails``: the drivers whose prepareModel / execution fail."""
    devices = drivers(spec)
    names = [d[0] for d in devices] + [CPU]
    out: List[Tuple[str, str]] = []
    if "manager" in tags or sdk >= 33:
        out += [("Manager", f"Found interface {n}" + (" (version = 1.3)" if sdk >= 33 else "")) for n, _, _ in devices]
    chosen, plan = place(model, devices, sdk, changed)
    if "compilation" in tags:
        out += plan
        if chosen and len(set(chosen)) == 1 and not changed:
            out.append(("ExecutionPlan", f"ModelBuilder::partitionTheWork: only one best device: {chosen[0]} = "
                                         f"{names[chosen[0]]}"))
    return finish(out + fallback({names[i] for i in chosen}, tags, fails), sdk)


def fallback(used: Set[str], tags: Set[str], fails: Tuple[str, str]) -> List[Tuple[str, str]]:
    """The runtime's CPU fallback line when a driver of the plan fails to prepare or to execute (PW1, PW2)."""
    prepare_fails, execute_fails = ({n for n in f.split(",") if n} & used for f in fails)
    if prepare_fails:
        return [("CompilationBuilder", "CompilationBuilder::finish with CPU fallback")] if "compilation" in tags else []
    if execute_fails and "execution" in tags:
        return [("ExecutionBuilder", "cpuFallbackPartial" if len(used) > 1 else "cpuFallbackFull")]
    return []


def place(model: Path, devices, sdk: int, changed: bool) -> Tuple[List[int], List[Tuple[str, str]]]:
    """Each operation's device index (the first driver that supports it, else the CPU fallback), and the
    ExecutionPlan lines that say so."""
    names = [d[0] for d in devices] + [CPU]
    chosen, out = [], []
    for k, (op, kind) in enumerate(operations(model)):
        where = f"{op}:{k}" if sdk >= 31 else op
        i = next((i for i, (_, kinds, left) in enumerate(devices) if kind in kinds and op not in left), len(devices))
        if not changed:
            out += [("ExecutionPlan", f"Device {name} can't do operation {where}")
                    for name, kinds, left in devices if kind not in kinds or op in left]
        chosen.append(i)
        msg = (f"placed operation {op} on device #{i} {names[i]}" if changed
               else f"ModelBuilder::findBestDeviceForEachOperation({where}) = {i} ({names[i]})")
        out.append(("ExecutionPlan", msg))
    return chosen, out


def finish(out: List[Tuple[str, str]], sdk: int) -> List[Tuple[str, str]]:
    return collapse(out) if sdk <= 30 else out


def collapse(out: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """logd's chatty: a run of k >= 3 identical lines becomes the first, "identical k-2 lines", the last."""
    result: List[Tuple[str, str]] = []
    i = 0
    while i < len(out):
        j = i
        while j + 1 < len(out) and out[j + 1] == out[i]:
            j += 1
        k = j - i + 1
        if k >= 3:
            result += [out[i], ("chatty", f"uid=2000(shell) ./speed_benchmark_torch identical {k - 2} lines"), out[j]]
        else:
            result += out[i:j + 1]
        i = j + 1
    return result


def main(argv) -> int:
    model, pid = Path(argv[1]), int(argv[2])
    spec = os.environ.get("SBT_NNAPI", "")
    if not spec:
        return 0  # a phone whose runtime logs nothing
    p = props()
    sdk = int(p.get("ro.build.version.sdk", "29") or 29)
    fails = (os.environ.get("SBT_NNAPI_PREPARE_FAILS", ""), os.environ.get("SBT_NNAPI_EXECUTE_FAILS", ""))
    found = lines(model, sdk, vlog_tags(p.get("debug.nn.vlog", "")), spec, os.environ.get("SBT_NNAPI_FORMAT") == "changed",
                  fails)
    now = time.time()
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
    with open(Path(os.environ["VDEV_STATE"]) / "logcat.txt", "a") as f:
        for tag, msg in found:
            f.write(f"{stamp} {pid:5d} {pid:5d} I {tag:<8}: {msg}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
