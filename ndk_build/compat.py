"""Lane consistency: can this Android runtime run these converted models?

Reusable entry point: :func:`check_compat` (tasks.py wires it into `invoke check-compat`,
and deploy/make-app wiring can call it before pushing models).  Same converter commit
as the runtime: ok.  Otherwise it compares what the TorchScript files need with what the
runtime's *source* (the checkout build-info.json points at) defines:

* operators (``torch.jit.export_opnames``) against ``native_functions.yaml`` and the
  schema strings registered in C++ (``"aten::...("``, ``"prim::...("``, ``"quantized::...("``);
* ``_nnapi.Compilation`` methods the models call (``prim::CallMethod`` nodes on that class)
  against the ``.def("...")`` of the NNAPI binding (``aten/src/ATen/nnapi/*.cpp``);
* the archive's file format version against ``kMaxSupportedFileFormatVersion``.
"""

from __future__ import annotations

import logging
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple, Union

from toolchain.errors import CompatibilityError, RecordError, UsageError
from toolchain.records import BuildInfo, ConvertManifest, ModelFile

log = logging.getLogger(__name__)

OK, INCOMPATIBLE, UNKNOWN = "ok", "incompatible", "unknown"
NNAPI_CLASS = "_nnapi.Compilation"

# Where a PyTorch checkout defines what a runtime can run (globs relative to the checkout).
OPERATOR_SOURCES = (
    "aten/src/ATen/native/**/*.cpp",
    "torch/csrc/jit/runtime/**/*.cpp",
    "torch/csrc/jit/mobile/**/*.cpp",
    "torch/csrc/jit/passes/quantization/**/*.cpp",
)
NATIVE_FUNCTIONS = "aten/src/ATen/native/native_functions.yaml"
NNAPI_SOURCES = ("aten/src/ATen/nnapi/*.cpp", "torch/csrc/jit/backends/nnapi/*.cpp")
VERSION_HEADERS = ("caffe2/serialize/versions.h", "caffe2/serialize/inline_container.h")

SCHEMA_RE = re.compile(r'"((?:aten|prim|quantized|_quantized|_nnapi|prepacked)::[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)\(')
# register_prim_ops.cpp defines families of overloads through macros: DEFINE_INT_OP(aten::add, a + b)
MACRO_RE = re.compile(r"DEFINE_[A-Z0-9_]+\(\s*((?:aten|prim)::[A-Za-z0-9_]+)\s*,")
FUNC_RE = re.compile(r"^- func:\s*([A-Za-z0-9_]+)(?:\.([A-Za-z0-9_]+))?\(", re.M)
DEF_RE = re.compile(r'\.def\(\s*"([A-Za-z0-9_]+)"')
INIT_RE = re.compile(r"\.def\(\s*torch::(?:jit::)?init<")
MAX_VERSION_RE = re.compile(r"kMaxSupportedFileFormatVersion\s*=\s*(0x[0-9A-Fa-f]+|\d+)")


@dataclass(frozen=True)
class Finding:
    file: str  # model file name
    kind: str  # "operator" | "nnapi-method" | "file-format"
    name: str
    detail: str

    def line(self) -> str:
        return f"{self.file}: {self.kind} {self.name}: {self.detail}"


@dataclass
class RuntimeSource:
    """What a PyTorch checkout defines."""

    path: Path
    operators: Set[str]
    macro_bases: Set[str]  # ``aten::add``: overloads made by DEFINE_*_OP macros (not spelled out in the source)
    namespaces: Set[str]
    nnapi_methods: Optional[Set[str]]  # None: no NNAPI binding source found
    max_file_format: Optional[int]

    @staticmethod
    def _operators(path: Path) -> Tuple[Set[str], Set[str]]:
        ops: Set[str] = set()
        yaml = path / NATIVE_FUNCTIONS
        if yaml.is_file():
            for name, overload in FUNC_RE.findall(yaml.read_text(encoding="utf-8", errors="replace")):
                ops.add(f"aten::{name}.{overload}" if overload else f"aten::{name}")
        macro_bases: Set[str] = set()
        for pattern in OPERATOR_SOURCES:
            for f in path.glob(pattern):
                text = f.read_text(encoding="utf-8", errors="replace")
                ops.update(SCHEMA_RE.findall(text))
                macro_bases.update(MACRO_RE.findall(text))
        return ops, macro_bases

    @staticmethod
    def _nnapi_methods(path: Path) -> Optional[Set[str]]:
        nnapi: Optional[Set[str]] = None
        for pattern in NNAPI_SOURCES:
            for f in path.glob(pattern):
                text = f.read_text(encoding="utf-8", errors="replace")
                if '"Compilation"' not in text:
                    continue
                nnapi = nnapi or set()
                nnapi.update(DEF_RE.findall(text))
                if INIT_RE.search(text):
                    nnapi.add("__init__")
        return nnapi

    @staticmethod
    def _max_file_format(path: Path) -> Optional[int]:
        for rel in VERSION_HEADERS:
            f = path / rel
            if f.is_file():
                m = MAX_VERSION_RE.search(f.read_text(encoding="utf-8", errors="replace"))
                if m:
                    return int(m.group(1), 0)
        return None

    @classmethod
    def scan(cls, path: Path) -> "RuntimeSource":
        path = Path(path)
        if not path.is_dir():
            raise RecordError(f"the runtime source {path} does not exist",
                              remedy="run `invoke build-android` again (it fetches the checkout), or check against "
                                     "another checkout with `invoke check-compat --source DIR`")
        ops, macro_bases = cls._operators(path)
        namespaces = {op.split("::", 1)[0] for op in ops}
        return cls(path, ops, macro_bases, namespaces, cls._nnapi_methods(path), cls._max_file_format(path))

    def defines(self, op: str) -> bool:
        return op in self.operators or op.split(".", 1)[0] in self.macro_bases


@dataclass
class ModelNeeds:
    file: str
    operators: List[str]
    nnapi_methods: List[str]
    file_format: Optional[int]


def file_format_version(path: Path) -> Optional[int]:
    """The ``version`` record of a TorchScript zip archive (``<archive>/version`` or ``.data/version``)."""
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if name.endswith("/version") and name.count("/") <= 2:
                try:
                    return int(z.read(name).decode().strip())
                except ValueError:
                    return None
    return None


def model_needs(path: Path) -> ModelNeeds:
    """Operators, ``_nnapi.Compilation`` methods and file format version a TorchScript file needs."""
    import torch

    module = torch.jit.load(str(path), map_location="cpu")
    operators = sorted(torch.jit.export_opnames(module))
    methods: Set[str] = set()

    def walk(block) -> None:
        for node in block.nodes():
            if node.kind() == "prim::CallMethod" and NNAPI_CLASS in str(node.inputsAt(0).type()):
                methods.add(node.s("name"))
            for sub in node.blocks():
                walk(sub)

    for _, sub in module.named_modules():
        for name in sub._c._method_names():
            walk(sub._c._get_method(name).graph.block())
    return ModelNeeds(Path(path).name, operators, sorted(methods), file_format_version(path))


@dataclass
class CompatReport:
    status: str  # ok | incompatible | unknown
    reason: str
    runtime: str  # what the runtime is (commit, or pytorch_android version)
    converter: Dict[str, Optional[str]]  # model file -> converter torch git_version
    missing: List[Finding] = field(default_factory=list)
    unchecked: List[str] = field(default_factory=list)
    checked_files: List[str] = field(default_factory=list)
    differences: List[str] = field(default_factory=list)  # what differs between converter and runtime, precisely

    @property
    def ok(self) -> bool:
        return self.status == OK

    def lines(self) -> List[str]:
        out = [f"{self.status}: {self.reason}", f"runtime: {self.runtime}"]
        commits = sorted({c or "unknown" for c in self.converter.values()})
        out.append("converter torch: " + ", ".join(c[:12] if len(c) == 40 else c for c in commits))
        out.extend(f"differs: {d}" for d in self.differences)
        out.extend(f"missing: {f.line()}" for f in self.missing)
        out.extend(f"not checked: {u}" for u in self.unchecked)
        return out

    def to_dict(self) -> dict:
        return {"status": self.status, "reason": self.reason, "runtime": self.runtime, "converter": self.converter,
                "missing": [f.__dict__ for f in self.missing], "unchecked": self.unchecked,
                "checked_files": self.checked_files, "differences": self.differences}

    def raise_for_status(self, strict_unknown: bool = False) -> "CompatReport":
        if self.status == INCOMPATIBLE or (strict_unknown and self.status == UNKNOWN):
            shown = self.missing[:12]
            cause = "; ".join(f.line() for f in shown) + (" ..." if len(self.missing) > 12 else "")
            raise CompatibilityError(
                f"the Android runtime ({self.runtime}) cannot run these models: {self.reason}",
                cause="; ".join(filter(None, [cause, *self.differences])) or None,
                remedy="convert with the lane's converter torch, or build the runtime from the converter's commit: "
                       "`invoke build-android --commit <converter git_version>` (and `--aar` for the app)",
            )
        return self


@dataclass(frozen=True)
class Runtime:
    """What runs the models: a build (its commit and checkout) or a published pytorch_android version."""

    label: str
    commit: Optional[str] = None  # a build's PyTorch commit
    release: Optional[str] = None  # a pytorch_android version ("2.1.0")
    lane: Optional[str] = None
    source_dir: Optional[Path] = None


def installed_torch() -> Optional[str]:
    """The torch installed in this environment (from its distribution metadata: no import)."""
    import importlib.metadata as md

    try:
        return md.version("torch")
    except md.PackageNotFoundError:
        return None


def _manifest(manifest: Union[Path, str, ConvertManifest]) -> ConvertManifest:
    return manifest if isinstance(manifest, ConvertManifest) else ConvertManifest.load(Path(manifest))


def check_values(pytorch_android: Optional[str], source_dir: Optional[Path]) -> None:
    """check-compat's own values, checked before any record is read (a usage error, exit 2)."""
    from toolchain import pins

    if pytorch_android is not None:
        pins.maven_version(pytorch_android, "--pytorch-android", pins.PYTORCH_ANDROID_DEFAULT)
    if source_dir is not None and not Path(source_dir).is_dir():
        raise UsageError(f"--source {source_dir} is not a directory",
                         remedy="pass the PyTorch checkout the runtime was built from (build-info.json: source_dir)")


def describe_runtime(build_info: Union[Path, str, BuildInfo, None], pytorch_android: Optional[str],
                     source_dir: Optional[Path]) -> Runtime:
    check_values(pytorch_android, source_dir)
    if build_info is not None:
        bi = build_info if isinstance(build_info, BuildInfo) else BuildInfo.load(
            Path(build_info), remedy="run `invoke build-android` first (or pass the file with --build-info, or "
                                     "check against a release with `invoke check-compat --pytorch-android VERSION`)")
        src = source_dir or (Path(bi.get("source_dir")) if bi.get("source_dir") else None)
        return Runtime(f"PyTorch {bi.commit[:12]} (lane {bi.lane}, {bi.path})", commit=bi.commit, lane=bi.lane,
                       source_dir=src)
    if pytorch_android:
        return Runtime(f"pytorch_android {pytorch_android}", release=pytorch_android, source_dir=source_dir)
    raise UsageError("check-compat needs a runtime: a build-info.json or a pytorch_android version",
                     remedy="pass --build-info <build_dir>/android/arm64-v8a/build-info.json, or check against a "
                            "release: `invoke check-compat --pytorch-android 2.1.0`")


def _converter(files: List[ModelFile]) -> Tuple[List[str], List[str]]:
    versions = sorted({(f.conversion.get("torch") or {}).get("version") or "unknown" for f in files})
    commits = sorted({(f.torch_git_version or "unknown")[:12] for f in files})
    return versions, commits


def _runtime_difference(runtime: Runtime, files: List[ModelFile]) -> Optional[str]:
    versions, commits = _converter(files)
    if runtime.commit and any(f.torch_git_version != runtime.commit for f in files):
        return (f"the models were converted by torch {', '.join(versions)} (git {', '.join(commits)}); "
                f"the runtime is PyTorch {runtime.commit[:12]}")
    release = (runtime.release or "").split("-")[0]
    if release and any(v.split("+")[0] != release for v in versions):
        return (f"the models were converted by torch {', '.join(versions)}; the runtime is pytorch_android "
                f"{runtime.release} (it runs models of torch {release})")
    return None


def _installed_difference(runtime: Runtime, files: List[ModelFile]) -> Optional[str]:
    from toolchain import pins

    here = installed_torch()
    if not here:
        return None
    lane = pins.LANES.get(runtime.lane or "")
    if lane is not None:
        if f"=={here.split('+')[0]}" not in lane.converter_torch:
            return f"lane {lane.name!r} pins the converter as {lane.converter_torch}; the torch installed here is {here}"
        return None
    versions, _ = _converter(files)
    if all(v != "unknown" and v.split("+")[0] != here.split("+")[0] for v in versions):
        return f"the torch installed here is {here}, not the models' converter ({', '.join(versions)})"
    return None


def differences(runtime: Runtime, files: List[ModelFile]) -> List[str]:
    """Precisely what differs: the models' converter torch, the runtime, the lane's pin, the torch installed here."""
    return [d for d in (_runtime_difference(runtime, files), _installed_difference(runtime, files)) if d]


def same_release(runtime: Runtime, files: List[ModelFile]) -> Optional[str]:
    """Why no operator comparison is needed (converter and runtime are one release), or None."""
    if runtime.commit and all(f.torch_git_version == runtime.commit for f in files):
        return "the models were converted by torch built from the runtime's commit"
    if runtime.release:
        base = runtime.release.split("-")[0]
        if all(((f.conversion.get("torch") or {}).get("version") or "").split("+")[0] == base for f in files):
            return f"the models were converted by torch {base}, the runtime's release"
    return None


def _note(unchecked: List[str], note: str) -> None:
    if note not in unchecked:
        unchecked.append(note)


def _check_operators(f: ModelFile, needs: ModelNeeds, src: RuntimeSource, missing: List[Finding],
                     unchecked: List[str]) -> None:
    for op in needs.operators:
        ns = op.split("::", 1)[0]
        if src.defines(op):
            continue
        if ns not in src.namespaces:
            _note(unchecked, f"{ns}:: operators (the runtime source defines none that torchdroid can find)")
        elif ns == "prim":  # many prim:: ops are interpreter instructions with no schema string in the source
            _note(unchecked, f"{op} (prim:: ops can be interpreter built-ins without a schema in the source)")
        else:
            missing.append(Finding(f.file, "operator", op, "not defined in the runtime's source"))


def _check_nnapi(f: ModelFile, needs: ModelNeeds, src: RuntimeSource, missing: List[Finding]) -> None:
    if not needs.nnapi_methods:
        return
    if src.nnapi_methods is None:
        missing.append(Finding(f.file, "nnapi-method", NNAPI_CLASS,
                               "the runtime source has no NNAPI binding (aten/src/ATen/nnapi)"))
        return
    for meth in needs.nnapi_methods:
        if meth not in src.nnapi_methods:
            missing.append(Finding(f.file, "nnapi-method", f"{NNAPI_CLASS}.{meth}",
                                   f"the runtime's Compilation has only {', '.join(sorted(src.nnapi_methods))}"))


def _check_file_format(f: ModelFile, needs: ModelNeeds, src: RuntimeSource, missing: List[Finding],
                       unchecked: List[str]) -> None:
    if needs.file_format is None:
        return
    if src.max_file_format is None:
        _note(unchecked, "file format version (kMaxSupportedFileFormatVersion not found in the runtime source)")
    elif needs.file_format > src.max_file_format:
        missing.append(Finding(f.file, "file-format", str(needs.file_format),
                               f"the runtime reads file format versions up to {src.max_file_format}"))


def compare_with_source(files: List[ModelFile], src: RuntimeSource) -> Tuple[List[Finding], List[str]]:
    """What each model needs (operators, NNAPI methods, file format) against what the runtime source defines."""
    missing: List[Finding] = []
    unchecked: List[str] = []
    for f in files:
        f.check_hash()
        needs = model_needs(f.path)
        _check_operators(f, needs, src, missing, unchecked)
        _check_nnapi(f, needs, src, missing)
        _check_file_format(f, needs, src, missing, unchecked)
    return missing, unchecked


def _with_source_command(pytorch_android: Optional[str]) -> str:
    """The check-compat command that compares operators too (make-app prints these lines, and has no --source)."""
    from toolchain.errors import command

    return command("invoke", "check-compat", *(("--pytorch-android", pytorch_android) if pytorch_android else ()),
                   "--source", "DIR")


def check_compat(
    manifest: Union[Path, str, ConvertManifest],
    build_info: Union[Path, str, BuildInfo, None] = None,
    pytorch_android: Optional[str] = None,
    source_dir: Optional[Path] = None,
    backends: Iterable[str] = ("cpu", "nnapi"),
) -> CompatReport:
    """Can the runtime (a build-info, or a pytorch_android version + its source) run the manifest's models?"""
    check_values(pytorch_android, source_dir)  # the values first: before any record is read
    m = _manifest(manifest)
    files = [f for f in m.files if f.backend in tuple(backends)]
    if not files:
        raise UsageError(f"{m.path} lists no models", remedy="run `invoke convert` first")
    runtime = describe_runtime(build_info, pytorch_android, source_dir)
    converter = {f.file: f.torch_git_version for f in files}
    names = [f.file for f in files]
    diff = differences(runtime, files)
    why_same = same_release(runtime, files)
    if why_same:
        return CompatReport(OK, why_same, runtime.label, converter, checked_files=names, differences=diff)
    if runtime.source_dir is None or not Path(runtime.source_dir).is_dir():
        return CompatReport(
            UNKNOWN, "different converter and runtime versions, and no runtime source to compare operators with",
            runtime.label, converter,
            unchecked=[f"operators / NNAPI methods / file format: run `{_with_source_command(pytorch_android)}` "
                       f"(DIR: a PyTorch checkout of {runtime.label})"],
            checked_files=names, differences=diff)
    missing, unchecked = compare_with_source(files, RuntimeSource.scan(Path(runtime.source_dir)))
    status = INCOMPATIBLE if missing else OK
    reason = (f"{len(missing)} thing(s) the models need are missing from the runtime" if missing
              else "different versions, but every operator, NNAPI method and file format the models need is there")
    return CompatReport(status, reason, runtime.label, converter, missing, unchecked, names, diff)
