"""Two records of "is the phone's answer right" (issue 23 item 2).

* the **host reference outputs** (``<models>/reference-outputs.json``), written before deploy by
  ``host_nnapi.references`` (the CPU model run by the host's torch; the NNAPI model on the host NNAPI in
  both roundings), read by deploy;
* the **numerics verdicts**: one verdict per phone x model file, ``agrees`` / ``differs`` (largest difference,
  top-1 / top-5 agreement) or ``unknown`` with the reason; deploy puts them into the run's document
  (``DeployResults.numerics`` in ``<results>/run-NNNN.json``, the .pte programs' beside the models'), read by
  report.

Both carry ``kind`` and ``schema``; the readers refuse what they would have to guess about.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from .record_base import FlatRecord, Record

REFERENCES_NAME = "reference-outputs.json"
REFERENCES_KIND = "torchdroid.reference-outputs"
REFERENCES_SCHEMA = 1
VERDICTS = ("agrees", "differs", "unknown")
# an agreeing verdict is exact or within tolerance; "" for unknown (and records written before the bands)
BANDS = ("exact", "within tolerance", "differs", "")
HOST_CPU = "host-cpu"  # the reference of a CPU model: the same file run by the host's torch


def host_nnapi_key(rounding: str) -> str:
    """The reference of an NNAPI model under one rounding of the host NNAPI (``host-nnapi-qnnpack``)."""
    return f"host-nnapi-{rounding}"


def references_path(models_dir: Path) -> Path:
    return Path(models_dir) / REFERENCES_NAME


@dataclass
class TensorValues:
    """One output tensor as floats (a quantized output dequantized), with its quantization if it has one."""

    shape: List[int]
    values: List[float]
    scale: Optional[float] = None
    zero_point: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"shape": list(self.shape), "values": list(self.values), "scale": self.scale,
                "zero_point": self.zero_point}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "TensorValues":
        shape, values = [int(x) for x in d["shape"]], [float(x) for x in d["values"]]
        n = 1
        for x in shape:
            n *= x
        if n != len(values):
            raise ValueError(f"{len(values)} values for shape {shape}")
        return cls(shape, values, d.get("scale"), d.get("zero_point"))


@dataclass
class FileReference:
    """The host's outputs of one model file on its inputs: ``outputs[key]`` holds every output tensor of every
    input, run by run (``[input 0 output 0, input 0 output 1, ..., input 1 output 0, ...]``)."""

    file: str
    sha256: str
    backend: str
    mode: str
    outputs: Dict[str, List[TensorValues]] = field(default_factory=dict)
    problems: Dict[str, str] = field(default_factory=dict)  # key -> why the host could not compute it
    every_output: bool = True  # False: read from a record written when only the first output was kept
    inputs: int = 0  # how many inputs ``outputs`` covers (0: one output per input, as older records)

    def runs(self) -> int:
        """How many inputs (runs on the phone) the outputs cover."""
        return self.inputs or max((len(v) for v in self.outputs.values()), default=1)

    def to_dict(self) -> Dict[str, Any]:
        return {"file": self.file, "sha256": self.sha256, "backend": self.backend, "mode": self.mode,
                "outputs": {k: [t.to_dict() for t in v] for k, v in self.outputs.items()},
                "problems": dict(self.problems), "every_output": self.every_output, "inputs": self.inputs}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "FileReference":
        return cls(d["file"], d["sha256"], d["backend"], d["mode"],
                   {k: [TensorValues.from_dict(t) for t in v] for k, v in (d.get("outputs") or {}).items()},
                   {str(k): str(v) for k, v in (d.get("problems") or {}).items()}, bool(d.get("every_output")),
                   int(d.get("inputs") or 0))


@dataclass
class ReferenceOutputs(Record):
    path: Path
    files: Dict[str, FileReference] = field(default_factory=dict)  # by file name

    KIND, SCHEMA = REFERENCES_KIND, REFERENCES_SCHEMA
    REMEDY = "run `invoke deploy` again (it computes the host references first), or delete the file"

    def body(self) -> Dict[str, Any]:
        return {"files": [f.to_dict() for f in self.files.values()]}

    @classmethod
    def from_body(cls, data: Dict[str, Any], path: Path) -> "ReferenceOutputs":
        files = [FileReference.from_dict(f) for f in data.get("files", [])]
        return cls(path, {f.file: f for f in files})

    @classmethod
    def load_or_empty(cls, path: Path) -> "ReferenceOutputs":
        return cls.load(path) if Path(path).is_file() else cls(Path(path))

    def current(self, file: str, sha256: str) -> Optional[FileReference]:
        """The reference of this file if it was computed from these bytes (with every output: an older record kept
        only the first, and is computed again)."""
        ref = self.files.get(file)
        return ref if ref is not None and ref.sha256 == sha256 and ref.every_output else None


@dataclass
class NumericsVerdict(FlatRecord):
    """Is one phone's answer for one model file right (on the model's bundled inputs)."""

    serial: str
    file: str
    backend: str  # cpu | nnapi | executorch (a .pte program of deploy-executorch, deploy/executorch.py)
    mode: str  # none | core | full; an ExecuTorch program's precision: fp32 | int8
    verdict: str  # agrees | differs | unknown
    reason: str = ""  # why unknown / what differs
    reference: str = ""  # host-cpu | host-nnapi-nnapi,host-nnapi-qnnpack (what it was compared with)
    tolerance: str = ""  # the rule, e.g. "|d| <= 1e-3 x max|ref|" or "<= 2 LSB (scale 0.0921)"
    max_abs: Optional[float] = None  # largest |phone - reference| (to the closest reference)
    max_lsb: Optional[float] = None  # the same in LSB of the output scale (quantized outputs)
    top1: str = ""  # "1/1": rows whose top-1 class agrees
    top5: str = ""  # "5/5": classes shared by the top-5 lists (summed over rows)
    inputs: int = 0  # bundled inputs compared
    band: str = ""  # one of BANDS
    sdk: Optional[int] = None  # the phone's API level the tolerance was chosen for (None: not known)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, not {self.verdict!r}")
        if self.verdict == "unknown" and not self.reason:
            raise ValueError("an unknown verdict needs its reason")
        if self.band not in BANDS:
            raise ValueError(f"band must be one of {BANDS}, not {self.band!r}")

    def shown(self) -> str:
        """``exact``, ``agrees`` (within tolerance), ``DIFFERS (4 LSB, top-1 changed)``, ``unknown``: the verdict
        in a few characters (a phone's overview cell)."""
        if self.verdict != "differs":
            return "exact" if self.band == "exact" else self.verdict
        lsb = f"{self.max_lsb:g} LSB" if self.max_lsb is not None else ""
        n, _, of = self.top1.partition("/")
        top = "top-1 changed" if n.isdigit() and of.isdigit() and n != of else ""
        detail = ", ".join(x for x in (lsb, top) if x)
        return f"DIFFERS ({detail})" if detail else "DIFFERS"

    def problems(self) -> List[str]:
        """Counts above their totals (``top1`` "3/1"), a negative difference, a ``differs`` without what differs."""
        out = [f"{self.serial} {self.file}: {name} {value!r} is not a count out of a total"
               for name, value in (("top-1", self.top1), ("top-5", self.top5)) if value and not _fraction_ok(value)]
        out += [f"{self.serial} {self.file}: {name} {value!r} is not a difference (>= 0)"
                for name, value in (("largest difference", self.max_abs), ("LSB", self.max_lsb))
                if value is not None and not (isinstance(value, (int, float)) and value >= 0)]
        if self.verdict == "differs" and not self.reason:
            out.append(f"{self.serial} {self.file}: 'differs' without what differs")
        return out


def _fraction_ok(text: str) -> bool:
    """``"a/b"`` with 0 <= a <= b."""
    a, _, b = str(text).partition("/")
    return a.isdigit() and b.isdigit() and int(a) <= int(b)
