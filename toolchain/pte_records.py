"""The ExecuTorch section of the convert manifest: one typed entry per ``.pte`` file.

``invoke convert --format executorch`` writes ``manifest.json``'s top-level ``executorch`` section
(its own ``files`` list, so readers of the legacy ``files`` list are unaffected):

    "executorch": {"conversions": {<stem>: {...versions, calibration, skipped delegates, keys}},
                   "files": [{"file": "mobilenetv2-fp32-xnnpack.pte", "format": "executorch",
                              "delegate": "xnnpack", "precision": "fp32", "baseline": "quant_none", ...}],
                   "reference": {<stem>: {"file": ..., "sha256": ...}}}

Read here by the host check and benchmark, make-app and deploy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from .errors import RecordError, UsageError
from .fsutil import sha256_file
from .records import MANIFEST_NAME, ConvertManifest, TensorSpec, check_listed_file

SECTION = "executorch"
# The legacy variant each precision is compared with (the pairs: float vs TorchScript CPU quant_none,
# int8 vs quant_full).
BASELINE = {"fp32": "quant_none", "int8": "quant_full"}


@dataclass(frozen=True)
class PteVariant:
    precision: str  # fp32 | int8
    delegate: str  # xnnpack | portable | vulkan

    @property
    def name(self) -> str:
        return f"{self.precision}-{self.delegate}"


def pte_name(stem: str, precision: str, delegate: str) -> str:
    return f"{stem}-{precision}-{delegate}.pte"


@dataclass(frozen=True)
class PteFile:
    """One ``.pte`` program, fully described."""

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
    baseline: str  # legacy variant to compare with: quant_none | quant_full
    runs_on_host: bool  # does the host runtime have this delegate registered?
    executorch: Dict[str, Any]
    torch: Dict[str, Any]
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def variant(self) -> str:
        """``fp32-xnnpack``: the name make-app, deploy and report use for this program."""
        return f"{self.precision}-{self.delegate}"

    @property
    def qualified_variant(self) -> str:
        return f"{self.stem}-{self.variant}"

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
                              remedy="run `invoke convert --format executorch --force`") from e


def load_section(models_dir: Path) -> Dict[str, Any]:
    """The manifest's executorch section (empty when there is none)."""
    man = ConvertManifest.load(models_dir)
    section = man.data.get(SECTION) or {}
    if not isinstance(section, dict):
        raise RecordError(f"{man.path}: the {SECTION!r} section is not an object",
                          remedy="run `invoke convert --format executorch --force`")
    return section


def pte_files(models_dir: Path) -> List[PteFile]:
    """Every ``.pte`` entry; a UsageError when the manifest has none."""
    man = ConvertManifest.load(models_dir)
    section = load_section(models_dir)
    files = [PteFile.from_entry(man.dir, e) for e in section.get("files", [])]
    if not files:
        raise UsageError(f"{man.path} lists no ExecuTorch (.pte) programs",
                         remedy="run `invoke convert --format torchscript,executorch` (or --format executorch)")
    return files


def write_section(models_dir: Path, section: Dict[str, Any]) -> Path:
    """Replace the executorch section, keeping the rest of the manifest (or start a manifest)."""
    man = ConvertManifest.load(models_dir) if ConvertManifest.exists(models_dir) else ConvertManifest.empty(models_dir)
    man.data[SECTION] = section
    return man.write()


def reference_path(models_dir: Path, stem: str, section: Optional[Dict[str, Any]] = None) -> Path:
    """The checked reference file (inputs and expected outputs) of one model's programs."""
    section = load_section(models_dir) if section is None else section
    ref = (section.get("reference") or {}).get(stem)
    if not ref:
        raise RecordError(f"no ExecuTorch reference outputs recorded for {stem} in {models_dir}",
                          remedy="run `invoke convert --format executorch --force`")
    path = Path(models_dir) / ref["file"]
    if not path.is_file() or sha256_file(path) != ref["sha256"]:
        raise RecordError(f"the reference file {path} is missing or does not match the manifest",
                          remedy="run `invoke convert --format executorch --force`")
    return path


def program_args(sample: Any) -> List[Any]:
    """A recorded reference input as the program's argument list: one tensor (a one-input model, as every
    reference before issue 35 recorded it) or a tuple of them (a model declaring several inputs)."""
    return list(sample) if isinstance(sample, (tuple, list)) else [sample]


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
                          remedy="run `invoke convert --format executorch --force` to write it again") from e


def load_method(path: Path) -> Any:
    """The program's ``forward`` in the host runtime (:func:`load_program`)."""
    program = load_program(path)
    try:
        return program.load_method("forward")
    except RuntimeError as e:
        raise RecordError(f"{path}: ExecuTorch cannot load its forward method (damaged?)",
                          cause=str(e).splitlines()[0][:300] if str(e) else type(e).__name__,
                          remedy="run `invoke convert --format executorch --force` to write it again") from e
