"""Is the phone's answer right: each model's output on its bundled inputs, from the phone, against the host's.

On the phone: the benchmark binary deploy already pushes, ``speed_benchmark_torch --use_bundled_input=N
--print_output=true --warmup=0 --iter=1`` (upstream prints the model's output on that input with ATen's
tensor printer before "Starting benchmark."; docs/facts.md NU1-NU3).  Here: :func:`parse_printed_tensor`
reads that text back (``Columns a to b`` blocks, a common ``scale *`` factor, 4 decimals; quantized outputs
are printed dequantized with their ``scale`` / ``zero_point``), and :func:`judge` compares it with the host
reference (toolchain/numerics_records.py): the host CPU run for a CPU model, the host NNAPI in both
roundings for an NNAPI model (the closest rounding counts).

Each verdict has its band: ``exact`` (no difference), ``within tolerance`` (the rule below, named with whose it is),
``differs`` (by how many LSB, and whether the top-1 class changed).

Tolerances (docs/deploy.md "Is the answer right"):
* float output: ``max |phone - ref| <= 1e-3 x max(|ref|)`` (the form of upstream compare_models_torch's check,
  NU3), CPU and NNAPI alike: torchdroid's NNAPI models are not relaxed to float16 (torch's
  ``relax_f32_to_f16=False``, NU5), so a driver must compute float32 (AOSP's CTS allows 1e-5 per operation);
* quantized output: ``max |phone - ref|`` in steps of the output scale: for NNAPI against the closer host
  rounding, within the platform's own whole-model tolerance for the phone's API level (AOSP's
  ``getQuant8AllowedError``, docs/facts.md PW5: 2 LSB on Android 10, 3 LSB from Android 11; before Android 10 the
  platform states only 1 LSB per operation, NU4, and torchdroid allows 2); for a CPU run ``<= 2 LSB`` against the same
  file on the host's QNNPACK (the phone's NEON kernels and the host's SSE2 ones are assumed to round alike
  within one step per operation: not read, so the bound leaves room for it).
* ExecuTorch programs (deploy/executorch.py, backend ``executorch``): the same float rule plus half of the
  last digit executor_runner prints (``%f``), and 2 LSB of the recorded int8 output quantization.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

from toolchain.errors import TorchdroidError
from toolchain.numerics_records import FileReference, NumericsVerdict, TensorValues
from toolchain.records import ModelFile

from .adb import Device

log = logging.getLogger(__name__)

FLOAT_RTOL = {"cpu": 1e-3, "nnapi": 1e-3, "executorch": 1e-3}
QUANT_LSB = {"cpu": 2, "nnapi": 2, "executorch": 2}
# AOSP TestHarness getQuant8AllowedError for whole-model (MobileNet) quant8 tests, by the first API level that
# carries it (docs/facts.md PW5): 2 LSB from Android 10 (API 29), 3 LSB from Android 11 (API 30)
PLATFORM_QUANT8_LSB = ((30, 3, "Android 11+"), (29, 2, "Android 10"))
# what the phone's printer cannot resolve, added to the float rule: executor_runner prints ``%f`` (6 decimals, E19)
PRINT_ATOL = {"cpu": 0.0, "nnapi": 0.0, "executorch": 5e-7}
START_MARK = "Starting benchmark."
_TRAILER = re.compile(r"\[ (\w+)\{([\d,]*)\}(?:, qscheme: (\w+)(?:, scale: ([0-9.eE+-]+), zero_point: (-?\d+))?)?")
_COLUMNS = re.compile(r"^Columns (\d+) to (\d+)(.*)$")
_POW10 = re.compile(r"^(?:1e[+-]\d+|0\.0*1|10*)$")
_SCALED = re.compile(r"^Columns (\d+) to (\d+[0-9.eE+-]*) \*$")
_MATRIX = re.compile(r"^\((?:\d+,)+\.,\.\) =$")


class Unreadable(ValueError):
    """The phone's output text is not a tensor ATen's printer would write."""


# --------------------------------------------------------------------------- reading ATen's printed tensor


def _columns_header(line: str) -> Tuple[int, int, str, Optional[float]]:
    """``Columns a to b`` and what follows it: the first values, or (glued to b, as ATen prints it) the block's
    ``scale *``; returns (a, b, the values part, the scale or None)."""
    scaled = _SCALED.match(line)
    if scaled:  # "Columns 1 to 10" + "0.01 *" = "Columns 1 to 100.01 *": split where the tail is a power of 10
        first, glued = int(scaled.group(1)), scaled.group(2)
        for cut in range(1, len(glued)):
            head, tail = glued[:cut], glued[cut:]
            if head.isdigit() and int(head) >= first and _POW10.match(tail):
                return first, int(head), "", float(tail)
        raise Unreadable(f"cannot split the column header {line!r}")
    m = _COLUMNS.match(line)
    if not m or (m.group(3) and m.group(3)[0] not in " -"):
        raise Unreadable(f"unexpected column header {line!r}")
    return int(m.group(1)), int(m.group(2)), m.group(3), None


def parse_printed_tensor(text: str) -> TensorValues:
    """The tensor ``std::cout << tensor`` printed (ATen's Formatting.cpp), as float values.

    The text before the trailer ``[ CPUFloatType{1,1000} ]`` holds the values; a quantized tensor's trailer
    adds ``qscheme: per_tensor_affine, scale: S, zero_point: Z``.  Raises :class:`Unreadable`.
    """
    m = _TRAILER.search(text)
    if not m:
        raise Unreadable("no '[ <Type>{sizes} ]' trailer: not a tensor printed by ATen")
    shape = [int(x) for x in m.group(2).split(",") if x]
    scale = float(m.group(4)) if m.group(4) else None
    zp = int(m.group(5)) if m.group(5) else None
    if "Quantized" in m.group(1) and m.group(3) != "per_tensor_affine":
        raise Unreadable(f"a {m.group(3)} output (only per-tensor quantized outputs are compared)")
    values = _values(text[:m.start()], shape[-1] if shape else 1)
    n = math.prod(shape) if shape else 1
    if len(values) != n:
        raise Unreadable(f"{len(values)} values printed for a tensor of shape {shape}")
    return TensorValues(shape, values, scale, zp)


@dataclass
class _Block:
    first: int  # 1-based columns, as printed
    last: int
    factor: float = 1.0
    values: List[float] = field(default_factory=list)


def _values(body: str, columns: int) -> List[float]:
    """Every value in row-major order: a matrix is printed block of columns by block of columns."""
    matrices: List[List[_Block]] = [[]]
    factor = 1.0
    for raw in body.splitlines():
        line = raw.strip()
        if not line:
            continue
        if _MATRIX.match(line):  # a new matrix of a >2-d tensor: its own format and scale follow
            matrices.append([])
            factor = 1.0
            continue
        if line.startswith("Columns "):
            first, last, line, glued = _columns_header(line)
            factor = glued if glued is not None else 1.0
            matrices[-1].append(_Block(first, last, factor))
            line = line.strip()
            if not line:
                continue
        sm = re.match(r"^([0-9.eE+-]+) \*$", line)
        if sm and _POW10.match(sm.group(1)):
            factor = float(sm.group(1))
            for b in matrices[-1][-1:]:
                b.factor = factor
            continue
        if not matrices[-1]:
            matrices[-1].append(_Block(1, columns, factor))
        block = matrices[-1][-1]
        for tok in line.split():
            try:
                block.values.append(float(tok) * block.factor)
            except ValueError as e:
                raise Unreadable(f"{tok!r} is not a number") from e
    return [v for m in matrices for v in _row_major(m)]


def _row_major(blocks: List[_Block]) -> List[float]:
    if len(blocks) <= 1:
        return blocks[0].values if blocks else []
    widths = [b.last - b.first + 1 for b in blocks]
    if any(w <= 0 or len(b.values) % w for b, w in zip(blocks, widths)):
        raise Unreadable("a block of columns does not hold whole rows")
    rows = len(blocks[0].values) // widths[0]
    if any(len(b.values) // w != rows for b, w in zip(blocks, widths)):
        raise Unreadable("the blocks of columns hold different numbers of rows")
    return [v for r in range(rows) for b, w in zip(blocks, widths) for v in b.values[r * w:(r + 1) * w]]


_BODY_LINE = re.compile(r"^(?:\s*|Columns \d+ to .*|\((?:\d+,)+\.,\.\) = ?|[\s0-9eE.+\-*nainf]+)$")
# several outputs: an IValue tuple, list or dict of tensors prints as "(", "[" or "{key: ", each tensor as above and
# ", " (", key: ") between them (docs/facts.md EP1): a line that ends one tensor and begins the next, or the first
_JOINED = re.compile(r"^\[ \w+\{[\d,]*\}[^\]]*\], (?:[A-Za-z_]\w*: )?(?P<rest>.*)$")
_OPENING = re.compile(r"^[(\[{](?!\d+,\.,\.\))(?:[A-Za-z_]\w*: )?(?P<rest>.*)$")
_TRAILER_END = re.compile(_TRAILER.pattern + r"[^\]]*\]")
_SEPARATOR = re.compile(r"^\s*(?:[(\[{](?!\d+,\.,\.\))|, )?(?:[A-Za-z_]\w*: )?")


def _in_printed(line: str) -> bool:
    """A line of what ``--print_output`` printed: a tensor's, or one that joins two (or opens the first)."""
    m = _JOINED.match(line)
    return bool(_BODY_LINE.match(line) or (m and _BODY_LINE.match(m.group("rest"))) or _opens(line))


def _opens(line: str) -> bool:
    """The first line of a printed tuple, list or dict: "(", "[" or "{key: " and the first tensor's first values."""
    m = _OPENING.match(line)
    return bool(m) and not _TRAILER.search(line) and bool(_BODY_LINE.match(m.group("rest")))


def printed_output(output: str) -> str:
    """What ``--print_output`` wrote before "Starting benchmark.": the lines ending with ATen's last trailer, read
    back from it while they look like printed tensors (what the runtime wrote before it, e.g. a warning on stderr,
    is left out)."""
    head, found, _ = output.partition(START_MARK)
    if not found:
        return ""
    lines = head.rstrip("\n").split("\n")
    end = next((i for i in range(len(lines) - 1, -1, -1) if _TRAILER.search(lines[i])), None)
    if end is None:
        return head
    start = end
    while start > 0 and _in_printed(lines[start - 1]) and not _opens(lines[start]):
        start -= 1
    return "\n".join(lines[start:end + 1]) + "\n"


def printed_tensors(text: str) -> List[str]:
    """Each tensor of a printed output, in order: one for a tensor, one per element of a tuple, list or dict (its
    values in the dict's order) with the separators taken off."""
    parts, start = [], 0
    for m in _TRAILER_END.finditer(text):
        parts.append(_SEPARATOR.sub("", text[start:m.end()], count=1))
        start = m.end()
    return parts or [text]


# --------------------------------------------------------------------------- comparing


@dataclass
class Difference:
    max_abs: float
    max_lsb: Optional[float]
    top1: Tuple[int, int]
    top5: Tuple[int, int]
    within: bool
    rule: str


def _rows(t: TensorValues) -> List[List[float]]:
    width = t.shape[-1] if t.shape else 1
    return [t.values[i:i + width] for i in range(0, len(t.values), width)] if width else []


def _topk(row: Sequence[float], k: int) -> List[int]:
    return sorted(range(len(row)), key=lambda i: (-row[i], i))[:k]


def _top_agreement(phone: TensorValues, ref: TensorValues) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    t1 = t5 = n5 = 0
    rows = list(zip(_rows(phone), _rows(ref)))
    for p, r in rows:
        best = max(r)
        t1 += r[_topk(p, 1)[0]] == best  # a tie for the top value counts as the same answer
        k = min(5, len(r))
        t5 += len(set(_topk(p, k)) & set(_topk(r, k)))
        n5 += k
    return (t1, len(rows)), (t5, n5)


def quant_bound(backend: str, sdk: Optional[int] = None) -> Tuple[int, str]:
    """The LSB bound for a quantized output and whose it is: for NNAPI on a phone of known API level the
    platform's own whole-model tolerance (never below torchdroid's 2), otherwise torchdroid's."""
    own = QUANT_LSB[backend]
    if backend == "nnapi" and sdk is not None:
        for first, lsb, release in PLATFORM_QUANT8_LSB:
            if sdk >= first and lsb >= own:
                return lsb, f"AOSP's whole-model quant8 tolerance for {release}, API {sdk}"
    return own, "torchdroid's"


def difference(phone: TensorValues, ref: TensorValues, backend: str, sdk: Optional[int] = None) -> Difference:
    """How far the phone's output is from one reference, and whether that is within the mode's tolerance (for
    NNAPI's quantized outputs the platform's own for the phone's API level ``sdk``)."""
    diffs = [abs(a - b) for a, b in zip(phone.values, ref.values)]
    worst = max(diffs) if diffs else 0.0
    if any(math.isnan(a) != math.isnan(b) for a, b in zip(phone.values, ref.values)):
        worst = math.inf
    top1, top5 = _top_agreement(phone, ref)
    if ref.scale:  # quantized: in LSB of the output scale
        lsb = lsb_difference(phone, ref)
        bound, whose = quant_bound(backend, sdk)
        return Difference(worst, lsb, top1, top5, lsb <= bound,
                          f"<= {bound} LSB ({whose}; scale {ref.scale:.6g})")
    rtol, atol = FLOAT_RTOL[backend], PRINT_ATOL[backend]
    magnitude = max((abs(v) for v in ref.values), default=0.0)
    printed = f" + {atol:g} (printed digits)" if atol else ""
    return Difference(worst, None, top1, top5, worst <= rtol * magnitude + atol,
                      f"|d| <= {rtol:g} x max|ref|{printed} ({rtol * magnitude + atol:.3g})")


def lsb_difference(phone: TensorValues, ref: TensorValues) -> float:
    """The largest difference in steps of the output scale.  Both sides are dequantized integers, and ATen prints
    them with a resolution far finer than half a step, so each value is snapped back onto its grid; a phone whose
    output has another scale (or values off the grid) is measured unsnapped."""
    s = ref.scale
    on_grid = phone.scale is not None and math.isclose(phone.scale, s, rel_tol=1e-5) and all(
        abs(v / s - round(v / s)) < 0.25 for v in phone.values if math.isfinite(v))
    if not on_grid:
        return max((abs(a - b) / s for a, b in zip(phone.values, ref.values)), default=0.0)
    return float(max((abs(round(a / s) - round(b / s)) if math.isfinite(a) else math.inf
                      for a, b in zip(phone.values, ref.values)), default=0))


def inputs_word(backend: str) -> str:
    return "reference inputs" if backend == "executorch" else "bundled inputs"


def judge(serial: str, f: ModelFile, phone: Sequence[Optional[TensorValues]], problems: Sequence[str],
          ref: Optional[FileReference], sdk: Optional[int] = None) -> NumericsVerdict:
    """The verdict of one phone x model file from its printed outputs (None where there was none) and the
    host's reference; ``sdk``: the phone's API level (the platform's tolerance depends on it)."""
    v = NumericsVerdict(serial, f.file, f.backend, f.mode, "unknown", reason="?", sdk=sdk)
    if ref is None:
        v.reason = "no host reference for these bytes (the host did not compute one)"
        return v
    keys = sorted(ref.outputs)
    v.reference = ",".join(keys)
    if not keys:
        v.reason = "; ".join(sorted(set(ref.problems.values()))) or "the host has no reference output"
        return v
    got = [p for p in phone if p is not None]
    if not got:
        v.reason = "; ".join(dict.fromkeys(problems)) or "the phone printed no output"
        return v
    if len(got) < len(phone):
        v.reason = f"{len(phone) - len(got)} of {len(phone)} {inputs_word(v.backend)} gave no output: {problems[0]}"
        return v
    return _verdict(v, got, ref, keys)


def _same_shapes(got: List[TensorValues], refs: List[TensorValues]) -> bool:
    return len(refs) == len(got) and all(p.shape == r.shape for p, r in zip(got, refs))


def _closest(got: List[TensorValues], ref: FileReference, keys: List[str], backend: str,
             sdk: Optional[int] = None) -> tuple:
    """``(within, worst difference, key, differences)`` against the reference the phone comes closest to
    (within the tolerance first, then the smallest largest difference); ``(None, key)`` on a shape mismatch."""
    best = None
    for key in keys:
        if not _same_shapes(got, ref.outputs[key]):
            return None, key
        ds = [difference(p, r, backend, sdk) for p, r in zip(got, ref.outputs[key])]
        worst = max(ds, key=lambda d: d.max_abs)
        within = all(d.within for d in ds)
        if best is None or (within, -worst.max_abs) > (best[0], -best[1].max_abs):
            best = (within, worst, key, ds)
    return best


def _outside(worst: Difference, key: str, top1: str) -> str:
    rows = top1.split("/")
    changed = int(rows[1]) - int(rows[0]) if len(rows) == 2 and all(x.isdigit() for x in rows) else 0
    top = (f"top-1 changed on {changed} of {rows[1]} input(s)" if changed else "top-1 unchanged")
    return (f"largest difference {worst.max_abs:.4g}" + (f" ({worst.max_lsb:.3g} LSB)" if worst.max_lsb is not None else "")
            + f" is outside the tolerance {worst.rule}, against {key}; {top}")


def _band(within: bool, worst: Difference) -> str:
    """A quantized output is exact at 0 LSB (its printed digits may differ below a step), a float one at 0."""
    if not within:
        return "differs"
    exact = worst.max_lsb == 0 if worst.max_lsb is not None else worst.max_abs == 0
    return "exact" if exact else "within tolerance"


def _verdict(v: NumericsVerdict, got: List[TensorValues], ref: FileReference, keys: List[str]) -> NumericsVerdict:
    best = _closest(got, ref, keys, v.backend, v.sdk)
    if best[0] is None:
        shapes = ", ".join(str(p.shape) for p in got)
        v.verdict, v.reason = "differs", f"the phone's output shape(s) {shapes} are not the host's ({best[1]})"
        v.band = "differs"
        return v
    within, worst, key, ds = best
    v.inputs = len(got)
    v.reference, v.tolerance = key, worst.rule
    v.max_abs, v.max_lsb = worst.max_abs, worst.max_lsb
    v.top1 = f"{sum(d.top1[0] for d in ds)}/{sum(d.top1[1] for d in ds)}"
    v.top5 = f"{sum(d.top5[0] for d in ds)}/{sum(d.top5[1] for d in ds)}"
    v.verdict, v.band = ("agrees" if within else "differs"), _band(within, worst)
    v.reason = "" if within else _outside(worst, key, v.top1)
    return v


# --------------------------------------------------------------------------- on the phone


class NoOutput(ValueError):
    """What an output run on the phone gave instead of an output (the problem, in words)."""


def _printed_tensors(i: int, res: Any) -> List[TensorValues]:
    """The benchmark binary's ``--print_output=true`` output: every tensor it printed, in order."""
    text = printed_output(res.output)
    if res.code != 0 or not text.strip():
        raise NoOutput(f"the phone printed no output (exit code {res.code})" if res.code
                       else "the phone printed no output before 'Starting benchmark.'")
    try:
        return [parse_printed_tensor(part) for part in printed_tensors(text)]
    except Unreadable as e:
        raise NoOutput(f"the phone's output cannot be read: {e}") from e


def flat(runs: List[Optional[List[TensorValues]]]) -> List[Optional[TensorValues]]:
    """Every run's outputs in the host reference's order (``[input 0 output 0, input 0 output 1, ..., input 1
    output 0, ...]``); with a run that gave none, one entry per run (:func:`judge` then says how many of the inputs
    gave no output).  Both formats' checks read several outputs through here."""
    if all(r is not None for r in runs):
        return [t for r in runs for t in r]
    return [r[0] if r else None for r in runs]


class Subject(NamedTuple):
    """What :func:`judge` needs to know of a file that is not a :class:`ModelFile` (an ExecuTorch program)."""

    file: str
    backend: str
    mode: str


def check_on_device(device: Device, serial: str, f: Any, commands: Sequence[str], ref: Optional[FileReference],
                    timeout: float, sdk: Optional[int] = None,
                    read: Callable[[int, Any], List[TensorValues]] = _printed_tensors) -> NumericsVerdict:
    """Every format's output check: run each command (one per reference input), read back every output it printed
    with ``read(i, shell result)`` (by default the benchmark binary's ``--print_output=true``; an ExecuTorch program's:
    deploy/executorch.py) and judge them against the host's, each by its own rule (its own scale when quantized).
    Nothing to compare with: the phone is not asked."""
    if ref is None or not ref.outputs:
        return judge(serial, f, [], [], ref, sdk)
    phone: List[Optional[List[TensorValues]]] = []
    problems: List[str] = []
    for i, command in enumerate(commands):
        try:
            phone.append(read(i, device.shell(command, timeout=timeout)))
        except TorchdroidError as e:
            phone.append(None)
            problems.append(f"the output run failed: {e.what}")
        except NoOutput as e:
            phone.append(None)
            problems.append(str(e))
    v = judge(serial, f, flat(phone), problems, ref, sdk)
    if v.verdict != "unknown":
        v.inputs = len(phone)  # inputs (judge counted the output tensors)
    return v
