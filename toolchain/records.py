"""The machine-readable records stages hand to each other.

* the **convert manifest** (``<models>/manifest.json``), written by ``converter``,
  read by make-app, deploy, verify, check-compat and the host benchmark; the
  ExecuTorch programs (:class:`PteFile`) are its ``executorch`` section, and
  :func:`load_program` opens one in ExecuTorch's host runtime;
* the **build-info** (``<build_dir>/android/<abi>/build-info.json``), written by
  ``ndk_build``, read by deploy and check-compat;
* the **app-info** (``<app>/torchdroid-app.json``, :class:`AppInfo`), written by
  make-app (the APK added by build-app), read by make-app, deploy and ``all``.

Stages never import each other; they read and write these through this
module.  Each record kind is a declaration on the one record base
(:mod:`toolchain.record_base`): its ``kind`` and ``schema``, the command that
remakes it, its path helper and its body.  The base's reader refuses a
missing, foreign, stale or damaged file with a typed error naming that command.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .errors import RecordError, UsageError, command
from .fsutil import sha256_file
from .hardware_records import Placement
from .layout import BUILD_INFO, Layout
from .numerics_records import NumericsVerdict
from .record_base import FlatRecord, Record, item_problems, now_iso, read_record, write_record  # noqa: F401 (stages use them here)
from .variants import MODES

MANIFEST_NAME = "manifest.json"
MANIFEST_KIND = "torchdroid.convert-manifest"
MANIFEST_SCHEMA = 1

BUILD_INFO_KIND = "torchdroid.build-info"
BUILD_INFO_SCHEMA = 1
BENCH_BINARY = "speed_benchmark_torch"  # the benchmark binary build-android records and deploy runs

BACKENDS = ("cpu", "nnapi")


# --------------------------------------------------------------------------- manifest


@dataclass(frozen=True)
class TensorSpec:
    """Shape, dtype, memory format and (if quantized) scale/zero point of an input or output."""

    shape: List[int]
    dtype: str  # "float32" | "quint8" | ...
    memory_format: str = "contiguous"  # "channels_last" (NHWC) | "contiguous"
    scale: Optional[float] = None
    zero_point: Optional[int] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "TensorSpec":
        return cls(
            shape=[int(x) for x in d["shape"]],
            dtype=d["dtype"],
            memory_format=d.get("memory_format", "contiguous"),
            scale=d.get("scale"),
            zero_point=d.get("zero_point"),
        )

    def to_dict(self) -> Dict[str, Any]:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "memory_format": self.memory_format,
            "scale": self.scale,
            "zero_point": self.zero_point,
        }


class VariantNames:
    """The variant names of a converted file (or of one convert did not write), from its ``stem`` and ``mode`` (an
    ExecuTorch program's: its precision and delegate)."""

    stem: str
    mode: str

    @property
    def variant(self) -> str:
        """``quant_full`` etc. (the name make-app and deploy use)."""
        return f"quant_{self.mode}"

    @property
    def qualified_variant(self) -> str:
        """``mobilenetv2-quant_full`` (``mobilenetv2-fp32-xnnpack`` for a program): unique across models in one
        directory."""
        return f"{self.stem}-{self.variant}"


# The one note on TorchScript CPU models made without optimize_for_mobile (ModelFile.extra["mobile_optimized"] False):
# convert says it, and both formats' host benches (the CPU models are every speed-up's baseline); once per run.
UNOPTIMIZED_CPU = (
    "CPU models were converted without optimize_for_mobile (no XNNPACK in that torch): the x86_64 PyPI wheels have "
    "none, so CPU models get BatchNorm folded into their convolutions and dropout removed, but are not frozen or "
    "XNNPACK-prepacked; their latencies are worse than a fully optimised model's (a speed-up over them is larger), "
    "so label comparisons with them accordingly"
)


@dataclass(frozen=True)
class ModelFile(VariantNames):
    """One converted ``.pt`` file, fully described (the manifest's ``files`` entries)."""

    file: str  # file name relative to the manifest directory
    path: Path  # absolute path
    sha256: str
    size: int
    model: str  # torchvision name, or "path.py:factory"
    stem: str  # file-name stem: "mobilenetv2", "resnet18", ...
    mode: str  # none | core | full
    backend: str  # cpu | nnapi
    input: TensorSpec
    output: TensorSpec
    conversion: Dict[str, Any]  # the conversion record shared by all files of this stem
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def torch_git_version(self) -> Optional[str]:
        return (self.conversion.get("torch") or {}).get("git_version")

    @property
    def inputs(self) -> List[TensorSpec]:
        """Every ``forward`` argument, in order: ``extra["inputs"]`` where the model declares its inputs (token ids,
        audio, several tensors), else the one ``input``."""
        return [TensorSpec.from_dict(d) for d in self.extra.get("inputs") or []] or [self.input]

    def to_entry(self) -> Dict[str, Any]:
        """The manifest's ``files`` entry for this file."""
        entry = {"file": self.file, "sha256": self.sha256, "size": self.size, "model": self.model, "stem": self.stem,
                 "mode": self.mode, "variant": self.variant, "backend": self.backend,
                 "input": self.input.to_dict(), "output": self.output.to_dict()}
        entry.update(self.extra)
        return entry

    def check_hash(self) -> None:
        check_listed_file(self.path, self.sha256, "invoke convert")


def check_listed_file(path: Path, sha256: str, convert: str) -> None:
    """A file the manifest lists is there and unchanged since ``convert`` (the command that writes it) wrote it."""
    if not path.is_file():
        raise RecordError(f"{path} is listed in the manifest but missing",
                          remedy=f"run `{convert}` again (it rebuilds what is missing)")
    actual = sha256_file(path)
    if actual != sha256:
        raise RecordError(f"{path} does not match its manifest entry (sha256 {actual[:12]}… != {sha256[:12]}…)",
                          cause="the file was modified or replaced after conversion",
                          remedy=f"run `{convert} --force` to regenerate it")


def manifest_path(models_dir: Path) -> Path:
    """The one place a manifest lives: ``<models_dir>/manifest.json`` (a path ending in .json is taken as is)."""
    models_dir = Path(models_dir)
    if models_dir.suffix == ".json" and not models_dir.is_dir():
        return models_dir
    return models_dir / MANIFEST_NAME


def model_file_names(stem: str, mode: str) -> Tuple[str, str]:
    """``(cpu, nnapi)`` file names of one mode, as the PyTorch NNAPI tutorial names them."""
    return f"{stem}-quant_{mode}-cpu.pt", f"{stem}-quant_{mode}-nnapi.pt"


def manifest_owner(models_dir: Path) -> str:
    """Who wrote ``manifest.json`` there: ``absent``, ``ours`` (kind matches) or ``foreign`` (anything else).

    Decided from the file's ``kind`` alone, so a damaged or tampered torchdroid manifest is still ours
    (it may be rebuilt), and a file someone else named manifest.json is never overwritten.
    """
    path = manifest_path(models_dir)
    if not path.exists():
        return "absent"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return "foreign"
    return "ours" if isinstance(data, dict) and data.get("kind") == MANIFEST_KIND else "foreign"


_ENTRY_KEYS = {"file", "sha256", "size", "model", "stem", "mode", "backend", "input", "output", "variant"}


def _model_file(models_dir: Path, entry: Any, conversions: Dict[str, Any], path: Path) -> ModelFile:
    """One ``files`` entry, checked: a tampered entry is a RecordError, never a KeyError deep in a stage."""
    try:
        if not isinstance(entry, dict):
            raise TypeError(f"entry is a {type(entry).__name__}")
        name = str(entry["file"])
        if Path(name).name != name or name in ("", ".", ".."):
            raise ValueError(f"file name {name!r} is not a plain name in the manifest's directory")
        if entry["mode"] not in MODES or entry["backend"] not in BACKENDS:
            raise ValueError(f"mode {entry['mode']!r} / backend {entry['backend']!r}")
        conv = conversions.get(entry["stem"], {})
        return ModelFile(
            file=name, path=(models_dir / name).resolve(), sha256=str(entry["sha256"]), size=int(entry["size"]),
            model=str(entry["model"]), stem=str(entry["stem"]), mode=entry["mode"], backend=entry["backend"],
            input=TensorSpec.from_dict(entry["input"]), output=TensorSpec.from_dict(entry["output"]),
            conversion=conv if isinstance(conv, dict) else {},
            extra={k: v for k, v in entry.items() if k not in _ENTRY_KEYS},
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise RecordError(
            f"{path} has a malformed file entry",
            cause=f"{type(e).__name__}: {e}",
            remedy="run `invoke convert --force` to rewrite it (the manifest was edited or damaged)",
        ) from e


class RefusedVariant(UsageError):
    """A variant convert was asked for and refused (its reason is in the manifest): named with why, never 'run
    convert' (it would refuse it again)."""


@dataclass(frozen=True)
class NnapiRefusal(VariantNames):
    """An NNAPI model convert did not write: torch's NNAPI converter cannot take (or would get wrong) this model.
    The mode's CPU model is written and listed as usual; the manifest's ``nnapi_refused`` entries say why its NNAPI
    file is absent, so verify, make-app, deploy and ``all`` skip it with the reason instead of failing."""

    file: str  # the NNAPI file name convert would have written (``mobilenet_v3_large-quant_full-nnapi.pt``)
    stem: str
    mode: str  # none | core | full
    reason: str  # one line: what NNAPI cannot do
    problems: Tuple[str, ...] = ()  # where and what, one per problem (from converter/precheck.py or the converter)
    alternative: str = ""  # the other lane that takes the model (``--format executorch``), "" when none is known

    def line(self) -> str:
        alt = f"; {self.alternative}" if self.alternative else ""
        return f"no NNAPI model for {self.qualified_variant}: {self.reason}{alt}"

    def to_entry(self) -> Dict[str, Any]:
        return {"file": self.file, "stem": self.stem, "mode": self.mode, "variant": self.variant,
                "backend": "nnapi", "reason": self.reason, "problems": list(self.problems),
                "alternative": self.alternative}

    @classmethod
    def from_entry(cls, entry: Any, path: Path) -> "NnapiRefusal":
        try:
            if not isinstance(entry, dict):
                raise TypeError(f"entry is a {type(entry).__name__}")
            if entry["mode"] not in MODES:
                raise ValueError(f"mode {entry['mode']!r}")
            return cls(str(entry["file"]), str(entry["stem"]), entry["mode"], str(entry["reason"]),
                       tuple(str(p) for p in entry.get("problems") or ()), str(entry.get("alternative") or ""))
        except (KeyError, TypeError, ValueError) as e:
            raise RecordError(f"{path} has a malformed nnapi_refused entry", cause=f"{type(e).__name__}: {e}",
                              remedy="run `invoke convert --force` to rewrite it (the manifest was edited or "
                                     "damaged)") from e


# --------------------------------------------------------------------------- the manifest's ExecuTorch programs
# `invoke convert --format executorch` writes manifest.json's top-level ``executorch`` section (its own ``files``
# list, so readers of the TorchScript ``files`` list are unaffected):
#     "executorch": {"conversions": {<stem>: {...versions, calibration, skipped delegates, keys}},
#                    "files": [{"file": "mobilenetv2-fp32-xnnpack.pte", "format": "executorch", "delegate": "xnnpack",
#                               "precision": "fp32", "baseline": "quant_none", ...}],
#                    "reference": {<stem>: {"file": ..., "sha256": ...}}}

EXECUTORCH_SECTION = "executorch"
OTHER_SECTIONS = (EXECUTORCH_SECTION,)  # manifest sections the TorchScript writer keeps untouched
# The TorchScript variant each precision is compared with: float vs CPU quant_none, int8 vs quant_full.
BASELINE = {"fp32": "quant_none", "int8": "quant_full"}
EXECUTORCH_REMEDY = "run `invoke convert --format executorch --force`"


def pte_name(stem: str, precision: str, delegate: str) -> str:
    return f"{stem}-{precision}-{delegate}.pte"


@dataclass(frozen=True)
class PteFile(VariantNames):
    """One ``.pte`` program, fully described (the ``executorch`` section's ``files`` entries)."""

    file: str
    path: Path
    sha256: str
    size: int
    model: str
    stem: str
    precision: str  # fp32 | int8
    delegate: str  # xnnpack | portable | vulkan
    input: TensorSpec
    output: TensorSpec
    baseline: str  # TorchScript variant to compare with: quant_none | quant_full
    runs_on_host: bool  # does the host runtime have this delegate registered?
    executorch: Dict[str, Any]
    torch: Dict[str, Any]
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def variant(self) -> str:
        """``fp32-xnnpack``: the name make-app, deploy and report use for this program."""
        return f"{self.precision}-{self.delegate}"

    def check_hash(self) -> None:
        check_listed_file(self.path, self.sha256, "invoke convert --format executorch")

    @classmethod
    def from_entry(cls, base: Path, entry: Dict[str, Any]) -> "PteFile":
        known = {"file", "sha256", "size", "model", "stem", "precision", "delegate", "input", "output", "baseline",
                 "runs_on_host", "executorch", "torch"}
        try:
            return cls(file=entry["file"], path=(base / entry["file"]).resolve(), sha256=entry["sha256"],
                       size=int(entry["size"]), model=entry["model"], stem=entry["stem"],
                       precision=entry["precision"], delegate=entry["delegate"],
                       input=TensorSpec.from_dict(entry["input"]), output=TensorSpec.from_dict(entry["output"]),
                       baseline=entry["baseline"], runs_on_host=bool(entry["runs_on_host"]),
                       executorch=dict(entry["executorch"]), torch=dict(entry["torch"]),
                       extra={k: v for k, v in entry.items() if k not in known})
        except (KeyError, TypeError, ValueError) as e:
            raise RecordError(f"a .pte entry in {base / MANIFEST_NAME} is incomplete ({type(e).__name__}: {e})",
                              cause="the manifest was edited or written by another torchdroid version",
                              remedy=EXECUTORCH_REMEDY) from e


class ConvertManifest(Record):
    """The convert manifest (``<models>/manifest.json``), a :class:`Record` kind.

    ``data`` holds ``conversions`` (per model stem: weights, calibration, torch, host check, mode keys...)
    and ``files`` (one entry per ``.pt`` file, read as typed :class:`ModelFile`).
    """

    KIND, SCHEMA = MANIFEST_KIND, MANIFEST_SCHEMA
    REMEDY = "run `invoke convert` first (or point --models at a directory that `invoke convert` wrote)"

    def __init__(self, path: Path, data: Dict[str, Any]):
        self.path = Path(path)
        self.dir = self.path.parent
        self.data = data
        if not isinstance(data.get("conversions", {}), dict) or not isinstance(data.get("files", []), list) \
                or not isinstance(data.get("nnapi_refused", []), list):
            raise RecordError(f"{self.path} has malformed conversions/files/nnapi_refused",
                              remedy="run `invoke convert --force` to rewrite it")
        self._files = [_model_file(self.dir, e, self.conversions, self.path) for e in data.get("files", [])]
        self._refused = [NnapiRefusal.from_entry(e, self.path) for e in data.get("nnapi_refused", [])]

    @classmethod
    def locate(cls, location: Path) -> Path:
        return manifest_path(location)

    @classmethod
    def from_body(cls, data: Dict[str, Any], path: Path) -> "ConvertManifest":
        return cls(path, data)

    @classmethod
    def empty(cls, models_dir: Path) -> "ConvertManifest":
        return cls(manifest_path(models_dir), {"conversions": {}, "files": []})

    def body(self) -> Dict[str, Any]:
        """Files sorted by stem, mode, backend."""
        files = sorted(self._files, key=lambda f: (f.stem, MODES.index(f.mode), f.backend))
        refused = sorted(self._refused, key=lambda r: (r.stem, MODES.index(r.mode)))
        return {"conversions": self.conversions, "files": [f.to_entry() for f in files],
                **({"nnapi_refused": [r.to_entry() for r in refused]} if refused else {}),
                **self.other_sections()}

    def other_sections(self) -> Dict[str, Any]:
        """Sections the TorchScript writer keeps as they are (``executorch``: :attr:`executorch`)."""
        return {k: self.data[k] for k in OTHER_SECTIONS if k in self.data}

    @property
    def executorch(self) -> Dict[str, Any]:
        """The ExecuTorch section (empty when there is none): its conversions, ``.pte`` entries and references."""
        section = self.data.get(EXECUTORCH_SECTION) or {}
        if not isinstance(section, dict):
            raise RecordError(f"{self.path}: the {EXECUTORCH_SECTION!r} section is not an object",
                              remedy=EXECUTORCH_REMEDY)
        return section

    def programs(self) -> List[PteFile]:
        """Every ``.pte`` entry, typed (a RecordError names an incomplete one)."""
        return [PteFile.from_entry(self.dir, e) for e in self.executorch.get("files") or []]

    def write_executorch(self, section: Dict[str, Any]) -> Path:
        """Replace the ExecuTorch section, keeping the rest of the manifest, and write it (atomically)."""
        self.data[EXECUTORCH_SECTION] = section
        return self.write()

    def replace_modes(self, stem: str, conversion: Dict[str, Any], files: List["ModelFile"],
                      refused: Tuple[NnapiRefusal, ...] = (), cleared: Tuple[str, ...] = ()) -> "ConvertManifest":
        """A copy where ``stem``'s conversion record is ``conversion`` and the modes of ``files`` (and ``cleared``:
        a mode refused as a whole has no file) are replaced (with their NNAPI refusals: ``refused``, none when the
        NNAPI files were written)."""
        modes = {f.mode for f in files} | {r.mode for r in refused} | set(cleared)
        kept = [f for f in self._files if not (f.stem == stem and f.mode in modes)]
        conversions = dict(self.conversions)
        conversions[stem] = conversion
        out = ConvertManifest(self.path, {"conversions": conversions, "files": [], **self.other_sections()})
        out._files = kept + [dataclasses.replace(f, conversion=conversion) for f in files]
        out._refused = [r for r in self._refused if not (r.stem == stem and r.mode in modes)] + list(refused)
        out.data["files"] = [f.to_entry() for f in out._files]
        if out._refused:
            out.data["nnapi_refused"] = [r.to_entry() for r in out._refused]
        return out

    @property
    def refused(self) -> List[NnapiRefusal]:
        """The NNAPI models convert did not write, and why."""
        return list(self._refused)

    def refusal(self, stem: str, mode: str) -> Optional[NnapiRefusal]:
        return next((r for r in self._refused if r.stem == stem and r.mode == mode), None)

    @property
    def conversions(self) -> Dict[str, Dict[str, Any]]:
        return self.data.get("conversions", {})

    @property
    def files(self) -> List[ModelFile]:
        return list(self._files)

    def files_of(self, stem: str, mode: Optional[str] = None) -> List[ModelFile]:
        return [f for f in self._files if f.stem == stem and (mode is None or f.mode == mode)]

    def variants(self) -> Dict[str, Dict[str, ModelFile]]:
        """``{"mobilenetv2-quant_full": {"cpu": ModelFile, "nnapi": ModelFile}, ...}``."""
        out: Dict[str, Dict[str, ModelFile]] = {}
        for f in self._files:
            out.setdefault(f.qualified_variant, {})[f.backend] = f
        return out

    def not_made(self, executorch: bool = False) -> Dict[str, str]:
        """``{"resnet18-quant_core": why}``: the modes convert refused as a whole (neither CPU nor NNAPI model; the
        reason as ``conversions.<stem>.refused`` records it); ``executorch``: the programs it refused
        (``{"resnet18-int8-xnnpack": why}``, from the ExecuTorch section's conversions)."""
        variants = {f.qualified_variant for f in self.programs()} if executorch else self.variants()
        out: Dict[str, str] = {}
        for stem, conv in ((self.executorch.get("conversions") or {}) if executorch else self.conversions).items():
            refused = conv.get("refused") if isinstance(conv, dict) else None
            for name, why in (refused.items() if isinstance(refused, dict) else ()):
                if f"{stem}-{name}" not in variants:
                    out[f"{stem}-{name}"] = str(why)
        return out

    def find(self, name: str) -> Dict[str, ModelFile]:
        """Look a variant up by ``quant_full`` (when unambiguous) or ``resnet18-quant_full``."""
        variants = self.variants()
        if name in variants:
            return variants[name]
        matches = [v for k, v in variants.items() if k.endswith(f"-{name}")]
        if len(matches) == 1:
            return matches[0]
        known = ", ".join(sorted(variants)) or "none"
        refused = [(k, why) for k, why in self.not_made().items() if k == name or k.endswith(f"-{name}")]
        if len(matches) == 0 and len(refused) == 1:
            raise RefusedVariant(f"{refused[0][0]} was not made: convert refused it", cause=refused[0][1],
                                 remedy=f"use a variant convert made ({known}); the cause says how to get this one")
        if len(matches) > 1:
            named = sorted(k for k in variants if k.endswith(f"-{name}"))
            raise UsageError(
                f"variant {name!r} is ambiguous in {self.path}",
                cause=f"several models have it: {', '.join(named)}",
                remedy=f"name it with its model prefix: {' or '.join(named)}",
            )
        raise UsageError(
            f"no converted variant {name!r} in {self.path}",
            cause=f"the manifest has: {known}",
            remedy=f"run `invoke convert` for it, or pick one of: {known}",
        )


def load_section(models_dir: Path) -> Dict[str, Any]:
    """The ExecuTorch section of the manifest in ``models_dir`` (empty when there is none)."""
    return ConvertManifest.load(models_dir).executorch


def pte_files(models_dir: Path) -> List[PteFile]:
    """Every ``.pte`` entry; a UsageError when the manifest has none."""
    man = ConvertManifest.load(models_dir)
    files = man.programs()
    if not files:
        raise UsageError(f"{man.path} lists no ExecuTorch (.pte) programs",
                         remedy="run `invoke convert --format torchscript,executorch` (or `invoke convert --format executorch`)")
    return files


def reference_path(models_dir: Path, stem: str, section: Optional[Dict[str, Any]] = None) -> Path:
    """The checked reference file (inputs and expected outputs) of one model's programs (``section``: the ExecuTorch
    section when it is read already)."""
    section = load_section(models_dir) if section is None else section
    ref = (section.get("reference") or {}).get(stem)
    if not ref:
        raise RecordError(f"no ExecuTorch reference outputs recorded for {stem} in {models_dir}",
                          remedy=EXECUTORCH_REMEDY)
    path = Path(models_dir) / ref["file"]
    if not path.is_file() or sha256_file(path) != ref["sha256"]:
        raise RecordError(f"the reference file {path} is missing or does not match the manifest",
                          remedy=EXECUTORCH_REMEDY)
    return path


def program_args(sample: Any) -> Tuple[Any, ...]:
    """A sample (a calibration sample, a recorded reference input) as the tuple of ``forward``'s arguments: one
    tensor (an image model, and every reference before issue 35) or a tuple of them (a model declaring several)."""
    return tuple(sample) if isinstance(sample, (tuple, list)) else (sample,)


def load_program(path: Path, **options: Any) -> Any:
    """The program at ``path`` in ExecuTorch's host runtime (``options``: ``Runtime.load_program``'s, e.g. the event
    tracer's).  A file the runtime refuses (truncated, damaged, not a program) is a :class:`RecordError` naming it and
    the command that writes it again, not the runtime's bare ``RuntimeError``."""
    from executorch.runtime import Runtime

    try:
        return Runtime.get().load_program(str(path), **options)
    except RuntimeError as e:
        raise RecordError(f"{path} is not a program ExecuTorch can load (truncated or damaged?)",
                          cause=str(e).splitlines()[0][:300] if str(e) else type(e).__name__,
                          remedy=f"{EXECUTORCH_REMEDY} to write it again") from e


def load_method(path: Path) -> Any:
    """The program's ``forward`` in the host runtime (:func:`load_program`)."""
    program = load_program(path)
    try:
        return program.load_method("forward")
    except RuntimeError as e:
        raise RecordError(f"{path}: ExecuTorch cannot load its forward method (damaged?)",
                          cause=str(e).splitlines()[0][:300] if str(e) else type(e).__name__,
                          remedy=f"{EXECUTORCH_REMEDY} to write it again") from e


def load_reference(path: Path) -> Dict[str, Any]:
    """A program's recorded reference (:func:`reference_path`): its inputs and expected outputs, or a RecordError
    naming the command that writes it again."""
    import pickle

    import torch

    try:
        ref = torch.load(path, weights_only=True)
        if not isinstance(ref, dict) or not {"inputs", "expected"} <= set(ref):
            raise ValueError("not a torchdroid reference (inputs and expected outputs)")
        return ref
    except (OSError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as e:
        raise RecordError(f"the reference file {path} cannot be read", cause=f"{type(e).__name__}: {e}",
                          remedy="run `invoke convert --format executorch --force`") from e


def host_outputs(path: Path, inputs: Sequence[Any]) -> List[List[Any]]:
    """The program's host reference: every output of its ``forward`` (:func:`load_method`) on each recorded input
    (:func:`program_args`), input by input.  The host check (converter/executorch_check.py) judges these against the
    recorded reference, deploy compares the phone's outputs with them."""
    method = load_method(path)
    return [list(method.execute(program_args(x))) for x in inputs]


# --------------------------------------------------------------------------- build-info


@dataclass(frozen=True)
class BuildArtefact:
    """One artefact of a build-info: ``speed_benchmark_torch``, a library, the headers or the AAR."""

    name: str
    path: Path  # absolute
    kind: str  # binary | static-library | shared-library | headers | aar
    sha256: str
    load_alignment: Optional[int] = None  # LOAD p_align of an ELF (binary, shared library), when recorded


def build_info_path(build_dir: Path, abi: str) -> Path:
    """Where build-android writes (and deploy, check-compat, all read) the build-info of ``abi``."""
    return Layout(build_dir).build_info(abi)


class BuildInfo(Record):
    """The build-info (``<build_dir>/android/<abi>/build-info.json``), a :class:`Record` kind; its path helper for
    an ABI is :func:`build_info_path`."""

    KIND, SCHEMA = BUILD_INFO_KIND, BUILD_INFO_SCHEMA
    # Each reader names the options of its own task (a fix must name a command or option that exists there).
    REMEDY = "run `invoke build-android` first (or pass the file with --build-info)"

    def __init__(self, path: Path, data: Dict[str, Any]):
        self.path = Path(path)
        self.dir = self.path.parent
        self.data = data

    @classmethod
    def locate(cls, location: Path) -> Path:
        location = Path(location)
        return location / BUILD_INFO if location.is_dir() else location

    @classmethod
    def from_body(cls, data: Dict[str, Any], path: Path) -> "BuildInfo":
        return cls(path, data)

    def body(self) -> Dict[str, Any]:
        return {k: v for k, v in self.data.items() if k not in ("kind", "schema", "written")}

    @classmethod
    def create(cls, path: Path, body: Dict[str, Any]) -> "BuildInfo":
        """Write the record atomically (kind, schema and time added) and return it as read back."""
        cls(path, body).write()
        return cls.load(Path(path))

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def api_level(self) -> Optional[int]:
        return self.data.get("api_level")

    @property
    def page_alignment(self) -> Dict[str, int]:
        """LOAD alignment (bytes) of the binary and each built shared library; {} for records made before."""
        return dict(self.data.get("page_alignment") or {})

    @property
    def source_dir(self) -> Optional[Path]:
        value = self.data.get("source_dir")
        return Path(value) if value else None

    @property
    def warnings(self) -> List[str]:
        return list(self.data.get("warnings") or [])

    @property
    def artefacts(self) -> List[BuildArtefact]:
        aligns = self.page_alignment
        return [BuildArtefact(a["name"], (self.dir / a["path"]).resolve(), a.get("kind", ""), a.get("sha256", ""),
                              aligns.get(a["name"])) for a in self.data.get("artefacts", [])]

    @property
    def abi(self) -> str:
        return self.data["abi"]

    @property
    def commit(self) -> str:
        return self.data["commit"]

    @property
    def lane(self) -> str:
        return self.data.get("lane", "")

    def artefact(self, name: str) -> Path:
        """Absolute path of a recorded artefact (e.g. ``speed_benchmark_torch``)."""
        for art in self.data.get("artefacts", []):
            if art.get("name") == name:
                return (self.dir / art["path"]).resolve()
        raise RecordError(f"{self.path} records no artefact named {name!r}", remedy=self.REMEDY)


# --------------------------------------------------------------------------- app-info

APP_INFO_NAME = "torchdroid-app.json"  # at the root of the generated Gradle project
APP_INFO_KIND = "torchdroid.app-info"
APP_INFO_SCHEMA = 1

# The in-app benchmark contract between the generated app and `invoke deploy`:
#   am start -S -W -n <application_id>/.MainActivity --ez benchmark true --ei iters N --ei warmup N --es backend cpu|nnapi
# after which the app logs exactly one line per run, with the log tag APP_BENCH_TAG:
#   TORCHDROID_BENCH {"variant": "...", "backend": "nnapi", "fell_back": false, "iters": 200, "warmup": 5,
#                     "median_ms": 12.3, "p90_ms": 13.0, "min_ms": 11.9, "mean_ms": 12.4, "error": null}
APP_BENCH_TAG = "torchdroid"
APP_BENCH_PREFIX = "TORCHDROID_BENCH "
# Progress lines of the in-app benchmark (same tag), so deploy can wait on the app instead of a clock:
#   TORCHDROID_PROGRESS {"backend": "cpu", "stage": "loaded" | "warmup" | "iter", "done": 20, "of": 200}
APP_PROGRESS_PREFIX = "TORCHDROID_PROGRESS "
# An app declares that it speaks this contract with a <meta-data> on the activity that takes the intent:
#   <meta-data android:name="org.torchdroid.benchmark" android:value="1" />
# (the value is the contract's version).  deploy runs the in-app benchmark only for such an app: any other APK is
# installed and left alone (it would never log the lines deploy waits for).
APP_BENCH_META = "org.torchdroid.benchmark"
APP_BENCH_CONTRACT = 1


# --------------------------------------------------------------------------- deploy results

DEPLOY_RESULTS_KIND = "torchdroid.deploy-results"
# 3: the ExecuTorch format's facts (``executorch``) are in the document, its rows among the run's (``format``);
# 2: the numerics verdicts and NNAPI placements are in the document (1: files beside it)
DEPLOY_RESULTS_SCHEMA = 3
RESULT_STATUSES = ("ok", "failed", "skipped")
ROW_FORMATS = ("torchscript", "executorch")  # what ran: a TorchScript model (CPU/NNAPI) or an ExecuTorch program


@dataclass
class ResultRow(FlatRecord):
    """One benchmark result (or one failure) of one device: a row of the results store and its exports."""

    serial: str
    device_model: str
    board: str
    release: str
    sdk: int
    abi: str
    stem: str  # mobilenetv2 ("" for a device that failed before any model)
    variant: str  # quant_full
    mode: str  # none | core | full
    backend: str  # cpu | nnapi
    source: str  # binary | app | deploy (a device or server the run could not work on)
    status: str  # ok | failed | skipped
    model_file: str = ""
    median_ms: Optional[float] = None
    p90_ms: Optional[float] = None
    min_ms: Optional[float] = None
    spread_pct: Optional[float] = None
    samples: int = 0
    repeats: int = 0
    iters: int = 0
    warmup: int = 0
    torch_commit: str = ""
    binary_commit: str = ""
    reason: str = ""
    output_tail: str = ""
    server: str = ""  # HOST:PORT of the device's adb server
    run_id: Optional[int] = None
    started: str = ""
    mean_ms: Optional[float] = None
    std_ms: Optional[float] = None
    max_ms: Optional[float] = None
    load_ms: Optional[float] = None  # process start + model load (cold run)
    first_ms: Optional[float] = None  # the first inference after loading
    warmup_ms: Optional[float] = None  # mean of the warm-up iterations
    peak_kb: Optional[int] = None  # VmHWM of the benchmark process
    flags: str = ""  # comma-separated: unstable, throttled, nnapi-deprecated, fell-back, nnapi-partly-cpu, nnapi-cpu-fallback, traced
    # torchscript | executorch.  An ExecuTorch program's row: variant = its precision-delegate (fp32-xnnpack),
    # backend = its delegate (xnnpack | portable), mode = the TorchScript mode it is compared with (none: fp32,
    # full: int8), source = binary (executor_runner) or app
    format: str = "torchscript"

    def problems(self) -> List[str]:
        """What makes this row nonsense (an ``ok`` row without real numbers, an unknown status)."""
        out = []
        if self.status not in RESULT_STATUSES:
            out.append(f"unknown status {self.status!r}")
        if self.format not in ROW_FORMATS:
            out.append(f"unknown format {self.format!r}")
        if self.status == "ok":
            values = (self.median_ms, self.p90_ms, self.min_ms)
            if any(v is None or not (v > 0) or v != v for v in values) or self.samples < 1:
                out.append(f"an ok row needs positive latencies from at least one sample (median {self.median_ms}, "
                           f"{self.samples} samples)")
        elif not self.reason:
            out.append(f"a {self.status} row needs its reason")
        return out

    def has_flag(self, flag: str) -> bool:
        return flag in self.flags.split(",")


def operator_problems(entries: Any) -> List[str]:
    """A per-operator entry of the run's ExecuTorch facts is ok with rows of non-negative times, or unknown with its
    reason."""
    out = []
    for o in entries if isinstance(entries, list) else [entries]:
        if not isinstance(o, dict) or o.get("status") not in ("ok", "unknown") or not o.get("file"):
            out.append(f"per-operator entry {str(o)[:60]} is not ok/unknown with a program")
        elif o["status"] == "unknown" and not o.get("reason"):
            out.append(f"{o.get('serial')} {o['file']}: per-operator times unknown without a reason")
        elif o["status"] == "ok" and not all(isinstance(r.get("median_ms"), (int, float)) and r["median_ms"] >= 0
                                             for r in o.get("rows") or [{}]):
            out.append(f"{o.get('serial')} {o['file']}: per-operator times that are not durations")
    return out


def deploy_results_path(results_dir: Path, stem: str) -> Path:
    """``<results>/<stem>.json``: ``run-0007`` for one run, ``latest`` for the newest."""
    return Path(results_dir) / f"{stem}.json"


@dataclass
class DeployResults(Record):
    """The one JSON document of a deploy run (``run-NNNN.json``, copied to ``latest.json``): rows, CPU/NNAPI
    speed-ups, each device's conditions, the numerics verdicts and the NNAPI placements (None: not checked / not
    read in the run).  Its rows are also the run's rows in the results store."""

    run_id: Optional[int]
    started: str
    rows: List[ResultRow]
    speedups: List[Dict[str, Any]] = field(default_factory=list)
    devices: List[Dict[str, Any]] = field(default_factory=list)  # serial, soc, governor, thermal, battery ...
    numerics: Optional[List[NumericsVerdict]] = None  # is each phone's answer right (deploy/numerics.py)
    hardware: Optional[List[Placement]] = None  # which hardware NNAPI chose (deploy/nnapi_log.py)
    # the ExecuTorch format's facts besides its rows ({}: the run had no ExecuTorch format): models, build_info,
    # warmup, iters, repeat, threads, checked (were the outputs checked), operators (per device and program: the
    # ETDump's table, or unknown and why), problems, notes
    executorch: Dict[str, Any] = field(default_factory=dict)

    KIND, SCHEMA, READS = DEPLOY_RESULTS_KIND, DEPLOY_RESULTS_SCHEMA, (2,)  # schema 2: no ExecuTorch in the run
    REMEDY = "run `invoke deploy` again (it writes <results>/run-NNNN.json and latest.json)"

    def body(self) -> Dict[str, Any]:
        return {"run_id": self.run_id, "started": self.started, "speedups": self.speedups, "devices": self.devices,
                "results": [r.to_dict() for r in self.rows], "numerics": _dicts(self.numerics),
                "hardware": _dicts(self.hardware), "executorch": self.executorch}

    @classmethod
    def from_body(cls, data: Dict[str, Any], path: Path) -> "DeployResults":
        numerics, hardware = data.get("numerics"), data.get("hardware")
        return cls(data.get("run_id"), data.get("started", ""), [ResultRow.from_dict(r) for r in data.get("results", [])],
                   data.get("speedups", []), data.get("devices", []),
                   None if numerics is None else [NumericsVerdict.from_dict(v) for v in numerics],
                   None if hardware is None else [Placement.from_dict(p) for p in hardware],
                   dict(data.get("executorch") or {}))


    def contradictions(self) -> List[str]:
        """Rows that are nonsense or of another run, verdicts and placements that contradict themselves."""
        out = item_problems("results", self.rows) + item_problems("numerics", self.numerics)
        out += item_problems("hardware", self.hardware) + operator_problems(self.executorch.get("operators") or [])
        out += [f"results[{i}]: run {r.run_id}, in the document of run {self.run_id}" for i, r in enumerate(self.rows)
                if self.run_id is not None and r.run_id is not None and r.run_id != self.run_id]
        return out


def _dicts(items: Optional[List[FlatRecord]]) -> Optional[List[Dict[str, Any]]]:
    return None if items is None else [x.to_dict() for x in items]


# --------------------------------------------------------------------------- verify

VERIFY_NAME = "verify.json"  # next to the manifest it verified, unless --out says otherwise
VERIFY_KIND = "torchdroid.host-nnapi-verify"
VERIFY_SCHEMA = 1


def verify_path(models_dir: Path, rounding: str = "qnnpack") -> Path:
    """Where `invoke verify` writes its record for the models in ``models_dir``: ``verify.json`` (qnnpack rounding,
    the default), ``verify-nnapi.json`` under nnapi rounding (another check: it never replaces the first)."""
    return Path(models_dir) / (VERIFY_NAME if rounding == "qnnpack" else f"verify-{rounding}.json")


@dataclass
class VerifyRecord(Record):
    """``verify.json``: what `invoke verify` checked, with what, and the verdict per variant.

    Stable fields (other stages rely on them; keep their names and meaning):
    ``manifest`` (path), ``library`` (path of the host libneuralnetworks.so), ``library_sha256``,
    ``rounding``, ``ok``, and per entry of ``variants``: ``variant``, ``ok`` and ``files`` =
    ``{"cpu": {"file", "sha256"}, "nnapi": {"file", "sha256"}}`` -- the sha256 of each file as verified.
    """

    path: Path
    manifest: str
    library: str
    library_sha256: Optional[str]
    rounding: str
    thresholds: Dict[str, Any]
    variants: List[Dict[str, Any]]
    written: str = ""
    code: Optional[str] = None  # digest of host_nnapi's own code (its Python kernels run inside the library)

    @property
    def ok(self) -> bool:
        return all(v.get("ok") for v in self.variants)

    def current_for(self, files: List["ModelFile"], library_sha256: Optional[str], code: Optional[str],
                    rounding: str, thresholds: Dict[str, Any]) -> Tuple[bool, str]:
        """Would `invoke verify` of ``files`` write this record again?  ``(True, why)`` or ``(False, why not)``.

        Decided from hashes alone (nothing is built, loaded or run): the same model files (sha256), the same
        host NNAPI library (sha256 of the .so and digest of its code) and the same rounding and thresholds,
        and the record says every variant passed.
        """
        if not self.ok:
            return False, f"{self.path.name} records a failed check"
        if not library_sha256 or library_sha256 != self.library_sha256 or code != self.code:
            return False, "the host NNAPI library changed (or is not built) since the last check"
        if rounding != self.rounding or _as_json(thresholds) != _as_json(self.thresholds):
            return False, "the verify settings changed since the last check"
        recorded = self.files()
        for f in files:
            if recorded.get(f.file) != f.sha256:
                return False, f"{f.file} is not the file checked last"
        return True, f"{self.path} is current (same model files, host NNAPI library and settings)"

    def files(self) -> Dict[str, str]:
        """file name -> sha256 of every model file this record verified."""
        out: Dict[str, str] = {}
        for v in self.variants:
            for f in (v.get("files") or {}).values():
                out[f["file"]] = f["sha256"]
        return out

    KIND, SCHEMA = VERIFY_KIND, VERIFY_SCHEMA
    REMEDY = "run `invoke verify` (it writes <models>/verify.json)"

    @classmethod
    def locate(cls, location: Path) -> Path:
        return verify_path(location) if Path(location).is_dir() else Path(location)

    @classmethod
    def from_body(cls, data: Dict[str, Any], path: Path) -> "VerifyRecord":
        return cls(path, data.get("manifest", ""), data.get("library", ""), data.get("library_sha256"),
                   data.get("rounding", ""), data.get("thresholds", {}), list(data.get("variants", [])),
                   data.get("written", ""), data.get("code"))

    def body(self) -> Dict[str, Any]:
        return {"manifest": self.manifest, "library": self.library, "library_sha256": self.library_sha256,
                "rounding": self.rounding, "thresholds": self.thresholds, "ok": self.ok, "variants": self.variants,
                "code": self.code}


def _as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), for comparing with a stored record."""
    return json.loads(json.dumps(value, sort_keys=True))


# --------------------------------------------------------------------------- app-info (typed)


def app_info_path(app_dir: Path) -> Path:
    """Where the app-info of the Gradle project in ``app_dir`` lives."""
    return Path(app_dir) / APP_INFO_NAME


@dataclass(frozen=True)
class AppApk:
    """The APK `invoke build-app` built from the project (``path`` relative to the project)."""

    path: str
    sha256: str
    size: int
    built: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "size": self.size, "built": self.built}


class _Fields:
    """Typed reads of a record's optional keys (a missing key gets the type's empty value)."""

    def __init__(self, data: Dict[str, Any]):
        self.data = data

    def text(self, key: str, default: str = "") -> str:
        value = self.data.get(key)
        return default if value in (None, "") else str(value)

    def number(self, key: str) -> int:
        return int(self.data.get(key) or 0)

    def mapping(self, key: str) -> Dict[str, Any]:
        return dict(self.data.get(key) or {})

    def text_map(self, key: str) -> Dict[str, str]:
        return {str(k): str(v) for k, v in self.mapping(key).items()}


def _apk_from(apk: Optional[Dict[str, Any]]) -> Optional[AppApk]:
    if not apk:
        return None
    return AppApk(str(apk["path"]), str(apk["sha256"]), int(apk.get("size") or 0), str(apk.get("built", "")))



def remake_app_command(project: Path, variant: Optional[str]) -> str:
    """The make-app command that rewrites ``project`` (its model and directory named: a bare
    `invoke make-app --force` rewrites the default model's app in the default directory); MODEL where the
    variant is not known."""
    return command("invoke", "make-app", "--model", variant or "MODEL", "--out", project, "--force")


@dataclass(frozen=True)
class AppInfo(Record):
    """``<app>/torchdroid-app.json``: written by `invoke make-app`, the APK added by `invoke build-app`.

    Read by make-app (is the project up to date?), build-app, deploy (which APK, which package and
    activity) and `invoke all`.  ``request`` is what make-app was asked for (settings and input
    hashes): the project is up to date when a new request equals it and the assets are intact.
    """

    dir: Path  # the Gradle project directory (not stored)
    application_id: str
    activity: str  # ".MainActivity"
    app_name: str
    variant: str  # quant_full
    qualified_variant: str  # mobilenetv2-quant_full
    input_mode: str  # float32 | uint8_lut
    models: Dict[str, str]  # asset file name -> sha256 of the converted model it was made from
    assets: Dict[str, Dict[str, Any]]  # asset file name -> {backend, source, source_sha256, sha256, input, ...}
    abi_filters: Tuple[str, ...]
    min_sdk: int
    target_sdk: int
    pins: Dict[str, Any]
    runtime: Dict[str, Any]
    wrapper_jar: bool
    torchdroid: str
    request: Dict[str, Any] = field(default_factory=dict)
    asset_files: Dict[str, str] = field(default_factory=dict)  # every file in app/src/main/assets -> sha256
    extra: Dict[str, Any] = field(default_factory=dict)  # labels, sample, lut, manifest, converter_torch, bench
    apk: Optional[AppApk] = None

    KIND, SCHEMA = APP_INFO_KIND, APP_INFO_SCHEMA
    REMEDY = "run `invoke make-app` first (or point --out / --app at a project it wrote)"
    _TYPED = ("application_id", "activity", "app_name", "variant", "qualified_variant", "input_mode", "models",
              "assets", "abi_filters", "min_sdk", "target_sdk", "pins", "runtime", "wrapper_jar", "torchdroid",
              "request", "asset_files", "apk")

    @classmethod
    def locate(cls, location: Path) -> Path:
        """The app-info of a project directory (or the file itself)."""
        path = Path(location)
        return path if path.name == APP_INFO_NAME else app_info_path(path)

    @classmethod
    def malformed_remedy(cls, data: Dict[str, Any], path: Path) -> str:
        variant = data.get("variant") if isinstance(data.get("variant"), str) else None
        return f"regenerate the project: `{remake_app_command(path.parent, variant)}`"

    @classmethod
    def from_body(cls, d: Dict[str, Any], path: Path) -> "AppInfo":
        g = _Fields(d)
        return cls(
            dir=path.parent,
            application_id=str(d["application_id"]),
            activity=g.text("activity", ".MainActivity"),
            app_name=g.text("app_name"),
            variant=str(d["variant"]),
            qualified_variant=g.text("qualified_variant", str(d["variant"])),
            input_mode=g.text("input_mode"),
            models=g.text_map("models"),
            assets={str(k): dict(v) for k, v in g.mapping("assets").items()},
            abi_filters=tuple(str(a) for a in d.get("abi_filters") or ()),
            min_sdk=g.number("min_sdk"),
            target_sdk=g.number("target_sdk"),
            pins=g.mapping("pins"),
            runtime=g.mapping("runtime"),
            wrapper_jar=bool(d.get("wrapper_jar")),
            torchdroid=g.text("torchdroid"),
            request=g.mapping("request"),
            asset_files=g.text_map("asset_files"),
            extra={k: v for k, v in d.items() if k not in cls._TYPED and k not in ("kind", "schema", "written")},
            apk=_apk_from(d.get("apk")),
        )

    def body(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {
            "application_id": self.application_id, "activity": self.activity, "app_name": self.app_name,
            "variant": self.variant, "qualified_variant": self.qualified_variant, "input_mode": self.input_mode,
            "models": dict(self.models), "assets": dict(self.assets), "abi_filters": list(self.abi_filters),
            "min_sdk": self.min_sdk, "target_sdk": self.target_sdk, "pins": dict(self.pins),
            "runtime": dict(self.runtime), "wrapper_jar": self.wrapper_jar, "torchdroid": self.torchdroid,
            "request": dict(self.request), "asset_files": dict(self.asset_files),
        }
        body.update(self.extra)
        body["apk"] = self.apk.to_dict() if self.apk else None
        return body

    @property
    def path(self) -> Path:
        return app_info_path(self.dir)

    @property
    def apk_file(self) -> Optional[Path]:
        """The recorded APK's absolute path (None when build-app has not run)."""
        return (self.dir / self.apk.path).resolve() if self.apk else None

    def check_apk(self) -> Path:
        """The recorded APK, which must exist and still match its recorded sha256."""
        if self.apk is None:
            raise RecordError(f"{self.path} records no APK", cause="`invoke build-app` has not run for this project",
                              remedy=f"run `{command('invoke', 'build-app', '--out', self.dir)}` (or pass --apk PATH)")
        apk = self.apk_file
        if not apk.is_file():
            raise RecordError(f"the APK {apk} recorded in {self.path} is missing",
                              remedy=f"run `{command('invoke', 'build-app', '--out', self.dir)}` again")
        if sha256_file(apk) != self.apk.sha256:
            raise RecordError(f"{apk} does not match its app-info record",
                              cause="the APK was rebuilt or replaced outside torchdroid",
                              remedy=f"run `{command('invoke', 'build-app', '--out', self.dir)}` again")
        return apk
