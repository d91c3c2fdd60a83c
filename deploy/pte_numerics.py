"""Is the phone's answer right, ExecuTorch lane: each .pte program's output on the phone against the host runtime's.

On the phone: the ``executor_runner`` deploy-executorch already pushes, run once more per reference input as
``executor_runner --model_path=P --inputs=IN.bin --print_output=all --num_executions=1`` (docs/facts.md E17-E20):
``--inputs`` takes one file of raw tensor bytes per program input (a size other than the tensor's is refused),
``--print_output=all`` prints every element of every output as ``Output[i][j]: (float) %f`` on stdout after the
executions.  The inputs are the ones convert recorded beside the programs (``<stem>-executorch-reference.pt``,
float32, written as raw little-endian bytes like the phone's arm64 memory); without a recorded reference, the
runner's own default (every input element 1, E18) and the host gets the same ones.

Here: the same program, the same inputs, on the host's ExecuTorch runtime (``toolchain.records.load_method``),
computed once per program and shared by every phone.  :func:`deploy.numerics.judge` decides with the rules of
the ExecuTorch "backend" (docs/deploy.md "Is the answer right"):

* fp32 program (float output): ``max |phone - host| <= 1e-3 x max|host| + 5e-7`` (the legacy float rule, plus
  half the last digit ``%f`` prints);
* int8 program (XNNPACK, a dequantized float output on the recorded int8 output quantization): both sides are
  snapped onto that grid and may differ by ``<= 2 LSB`` of its scale (the phone's ARM kernels and the host's x86
  ones may round differently; not read, the bound leaves room); where a float operation follows the last
  dequantize (recorded at convert time, e.g. bilinear upsampling) the values are off the grid: measured unsnapped in
  LSB of that dequantize's scale (:func:`lsb_unit`); without a recorded output quantization the float
  rule above applies and the verdict says so.

Verdicts are :class:`toolchain.numerics_records.NumericsVerdict` with ``backend="executorch"`` and the program's
precision as ``mode``, in the device's one verdict list (the run's document, ``run-NNNN.json``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from toolchain.errors import RecordError
from toolchain.fsutil import sha256_file
from toolchain.numerics_records import FileReference, NumericsVerdict, TensorValues
from toolchain.records import PteFile, load_section, program_args, reference_path

from .adb import Device
from .numerics import NoOutput, flat, judge, outputs_on_device
from .push import PushItem

log = logging.getLogger(__name__)

BACKEND = "executorch"
HOST_KEY = "host-executorch"
OUTPUT_LINE = re.compile(r"^Output\[(\d+)\]\[(\d+)\]: \((float|int|char|bool)\) (\S+)")


@dataclass
class ProgramInputs:
    """What one model's programs run on: the recorded reference inputs (tensors) or the runner's all-ones default."""

    stem: str
    tensors: List[object] = field(default_factory=list)  # one per run: a tensor, or a tuple (one per program input)
    files: List[Path] = field(default_factory=list)  # their raw bytes here, pushed beside the programs
    source: str = "reference inputs"  # or "all-ones input (...why)"
    int8_output: Optional[Dict[str, float]] = None  # the int8 programs' first output's rule (scale, zero_point)
    int8_outputs: List[Optional[Dict[str, object]]] = field(default_factory=list)  # every output's, in order
    runs: List[str] = field(default_factory=list)  # per run: its files' names as --inputs takes them (a,b: E17)

    @property
    def recorded(self) -> bool:
        return bool(self.files)

    def rule(self, k: int) -> Optional[Dict[str, object]]:
        """Output ``k``'s int8 rule (converter.executorch.output_rule): each output is judged by its own."""
        rules = self.int8_outputs or [self.int8_output]
        return rules[k] if k < len(rules) else None

    def device_names(self) -> List[str]:
        return list(self.runs) or [p.name for p in self.files]


@dataclass
class Subject:
    """What :func:`deploy.numerics.judge` needs to know of a program."""

    file: str
    backend: str
    mode: str


# --------------------------------------------------------------------------- inputs and host reference


def program_inputs(models: Path, stems: Sequence[str], programs: Sequence[PteFile], work: Path) -> Dict[str, ProgramInputs]:
    """Per model stem: the recorded reference inputs written as raw float32 files under ``work``, or (no recorded
    reference) the runner's all-ones default on the programs' declared input shape."""
    section = load_section(models)
    out: Dict[str, ProgramInputs] = {}
    for stem in stems:
        try:
            from converter.pte_host import load_reference

            ref = load_reference(reference_path(models, stem, section))
        except RecordError as e:
            out[stem] = _ones(stem, programs, f"no recorded reference inputs: {e.what}")
            continue
        pi = ProgramInputs(stem, int8_output=ref.get("int8_output"), int8_outputs=list(ref.get("int8_outputs") or []))
        work.mkdir(parents=True, exist_ok=True)
        for i, x in enumerate(ref["inputs"]):
            _write_run(pi, work, i, x)
        out[stem] = pi
    return out


def _write_run(pi: ProgramInputs, work: Path, i: int, sample) -> None:
    """One reference input as raw little-endian bytes in each tensor's own dtype (a float32 image, int64 token
    ids), one file per program input (E17): ``<stem>-input-<i>.bin``, or ``-<i>-<k>.bin`` for several."""
    args = [t.detach().contiguous() for t in program_args(sample)]
    names = []
    for k, t in enumerate(args):
        path = work / (f"{pi.stem}-input-{i}.bin" if len(args) == 1 else f"{pi.stem}-input-{i}-{k}.bin")
        data = t.numpy()
        path.write_bytes(data.astype(data.dtype.newbyteorder("<")).tobytes())
        pi.files.append(path)
        names.append(path.name)
    pi.tensors.append(args[0] if len(args) == 1 else tuple(args))
    pi.runs.append(",".join(names))


def _ones(stem: str, programs: Sequence[PteFile], why: str) -> ProgramInputs:
    import torch

    mine = [f for f in programs if f.stem == stem]
    shape = tuple(int(d) for d in (mine[0].input.shape if mine else ()) or ())
    tensors = [torch.ones(shape)] if shape else []
    quant = next(((f.extra.get("quantization") or {}).get("output") for f in mine if f.precision == "int8"), None)
    return ProgramInputs(stem, tensors, [], f"all-ones input (the runner's default; {why})", quant or None)


def push_items(inputs: Dict[str, ProgramInputs]) -> List[PushItem]:
    return [PushItem(p, p.name, 0o644, sha256_file(p)) for pi in inputs.values() for p in pi.files]


def lsb_unit(qparams: Optional[Dict[str, object]]) -> Optional[Dict[str, object]]:
    """The int8 output quantization the phone's output is measured in (LSB of its scale), or None (the float rule):
    a recorded scale, also when a float operation after the dequantize puts the output off its grid (the values are
    then compared unsnapped, deploy.numerics.lsb_difference); none when no dequantize feeds the output."""
    return qparams if qparams and qparams.get("scale") else None


def _values(out, qparams: Optional[Dict[str, float]]) -> TensorValues:
    t = out.detach().reshape(-1).double()
    qparams = lsb_unit(qparams)
    scale = float(qparams["scale"]) if qparams else None
    zp = int(qparams["zero_point"]) if qparams else None
    return TensorValues([int(d) for d in out.shape], [float(v) for v in t.tolist()], scale, zp)


def host_reference(f: PteFile, pi: ProgramInputs) -> FileReference:
    """The program's outputs on the host's ExecuTorch runtime: every output of ``forward`` on every input, run by
    run (``[input 0 output 0, input 0 output 1, ..., input 1 output 0, ...]``), each with its own int8 rule."""
    ref = FileReference(f.file, f.sha256, BACKEND, f.precision)
    key = f"{HOST_KEY} ({pi.source.split(' (')[0]})"
    if not pi.tensors:
        ref.problems[key] = f"the programs' input shape is not recorded ({pi.source})"
        return ref
    if not f.runs_on_host:
        ref.problems[key] = "the host's ExecuTorch runtime cannot run this program's delegate"
        return ref
    try:
        from toolchain.records import load_method

        method = load_method(f.path)
        ref.outputs[key] = [_values(y, pi.rule(k) if f.precision == "int8" else None)
                            for x in pi.tensors for k, y in enumerate(method.execute(program_args(x)))]
    except Exception as e:  # noqa: BLE001 - the host runtime's errors are RuntimeErrors of several kinds
        ref.problems[key] = f"the host's ExecuTorch runtime could not run it: {type(e).__name__}: {e}"
        ref.outputs.pop(key, None)
    return ref


# --------------------------------------------------------------------------- the phone


class Unprintable(ValueError):
    """The runner's output holds no output values in the form ``--print_output=all`` prints."""


def parse_outputs(text: str) -> Dict[int, List[float]]:
    """``Output[i][j]: (float) v`` lines -> {i: [v_0, v_1, ...]} (every index present, in order)."""
    found: Dict[int, Dict[int, float]] = {}
    for line in text.splitlines():
        m = OUTPUT_LINE.match(line.strip())
        if not m:
            continue
        kind, raw = m.group(3), m.group(4)
        value = (1.0 if raw == "true" else 0.0) if kind == "bool" else float(raw)
        found.setdefault(int(m.group(1)), {})[int(m.group(2))] = value
    if not found:
        raise Unprintable("no 'Output[i][j]: (float) v' line")
    out = {}
    for i, vals in sorted(found.items()):
        if sorted(vals) != list(range(len(vals))):
            raise Unprintable(f"output {i}'s elements are not all printed (indices {min(vals)}..{max(vals)}, "
                              f"{len(vals)} lines)")
        out[i] = [vals[j] for j in range(len(vals))]
    return out


def _unknown_flag(output: str) -> bool:
    return "print_output" in output and ("unknown command line flag" in output or "Unknown --print_output" in output)


def check_program(device: Device, f: PteFile, pi: ProgramInputs, ref: FileReference,
                  command: Callable[[Optional[str]], str], timeout: float) -> NumericsVerdict:
    """Run ``f`` once per input (``command(input file or None)``: the runner's command line printing every output,
    executorch_bench.runner_command) and judge every printed output against ``ref``'s, each by its own rule."""
    subject = Subject(f.file, BACKEND, f.precision)
    if not ref.outputs:  # nothing to compare with: the phone is not asked
        return judge(device.serial, subject, [], [], ref)
    host = next(iter(ref.outputs.values()))
    runs = len(pi.tensors) or 1
    count = max(1, len(host) // runs)  # outputs per run
    names = (list(pi.device_names()) or [None])[:runs]

    def read(i: int, res) -> List[TensorValues]:
        if res.code != 0:
            raise NoOutput("the runner does not know --print_output=all (a runner older than ExecuTorch 1.3, E21): "
                           "run `invoke build-android --lane executorch`" if _unknown_flag(res.output)
                           else f"the output run exited {res.code}: " + " | ".join(res.tail(2)))
        try:
            printed = parse_outputs(res.output)
        except Unprintable as e:
            raise NoOutput(f"the runner printed no output values ({e})") from e
        if len(printed) != count:
            raise NoOutput(f"the runner printed {len(printed)} output(s), the program returns {count}")
        return [_as_host(values, host[i * count + k]) for k, values in enumerate(printed.values())]

    runs_out, problems = outputs_on_device(device, [command(n) for n in names], read, timeout)
    v = judge(device.serial, subject, flat(runs_out), problems, ref)
    if v.verdict != "unknown":
        v.inputs = len(runs_out)
    if f.precision == "int8" and v.tolerance:
        v.tolerance += rules_note(pi, count)
    return v


def _as_host(values: List[float], host: TensorValues) -> TensorValues:
    """A printed output with the host's shape (when it holds as many values) and int8 rule."""
    shape = host.shape if len(values) == len(host.values) else [len(values)]
    return TensorValues(shape, values, host.scale, host.zero_point)


def rules_note(pi: ProgramInputs, count: int) -> str:
    """What an int8 program's tolerance is derived from (:func:`_rule_note`), output by output where there are
    several (each is judged by its own recorded rule)."""
    if count == 1:
        return _rule_note(pi.rule(0))
    notes = [_rule_note(pi.rule(k)).strip()[1:-1] or "its int8 grid" for k in range(count)]
    return " (each output by its own rule: " + "; ".join(f"output {k}: {n}" for k, n in enumerate(notes)) + ")"


def _rule_note(qparams: Optional[Dict[str, object]]) -> str:
    """What an int8 program's tolerance is derived from, when it is not its output's int8 grid."""
    if not lsb_unit(qparams):
        return " (no recorded output quantization: the float rule)"
    if qparams.get("on_grid", True) is False:
        return f" (output computed in float by {qparams.get('after')} after the dequantize: unsnapped)"
    return ""
