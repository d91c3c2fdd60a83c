"""The machine-readable records stages hand to each other.

* the **convert manifest** (``<models>/manifest.json``), written by ``converter``,
  read by make-app, deploy, verify, check-compat and the host benchmark;
* the **build-info** (``build/android/<abi>/build-info.json``), written by
  ``ndk_build``, read by deploy and check-compat.

Stages never import each other; they read and write these through this
module.  Every record has ``kind`` and ``schema`` so a stale or foreign file is
refused with a clear message instead of being half-understood.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from .errors import RecordError, UsageError
from .fsutil import atomic_write_json, sha256_file

MANIFEST_NAME = "manifest.json"
MANIFEST_KIND = "torchdroid.convert-manifest"
MANIFEST_SCHEMA = 1

BUILD_INFO_NAME = "build-info.json"
BUILD_INFO_KIND = "torchdroid.build-info"
BUILD_INFO_SCHEMA = 1

MODES = ("none", "core", "full")
BACKENDS = ("cpu", "nnapi")


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def read_record(path: Path, kind: str, schema: int, remedy: str) -> Dict[str, Any]:
    """Read a JSON record and check its kind and schema."""
    path = Path(path)
    if not path.is_file():
        raise RecordError(f"no {kind} record at {path}", remedy=remedy)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(
            f"the record {path} cannot be read",
            cause=f"{type(e).__name__}: {e}",
            remedy=remedy,
        ) from e
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise RecordError(
            f"{path} is not a {kind} record (kind={data.get('kind') if isinstance(data, dict) else None!r})",
            remedy=remedy,
        )
    if data.get("schema") != schema:
        raise RecordError(
            f"{path} has schema {data.get('schema')!r}; this torchdroid reads schema {schema}",
            cause="it was written by another torchdroid version",
            remedy=remedy,
        )
    return data


def write_record(path: Path, kind: str, schema: int, body: Dict[str, Any]) -> Path:
    data = {"kind": kind, "schema": schema, "written": now_iso()}
    data.update(body)
    return atomic_write_json(path, data)


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
            shape=list(d["shape"]),
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


@dataclass(frozen=True)
class ModelFile:
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
    def variant(self) -> str:
        """``quant_full`` etc. (the name make-app and deploy use)."""
        return f"quant_{self.mode}"

    @property
    def qualified_variant(self) -> str:
        """``mobilenetv2-quant_full``: unique across models in one directory."""
        return f"{self.stem}-quant_{self.mode}"

    @property
    def torch_git_version(self) -> Optional[str]:
        return (self.conversion.get("torch") or {}).get("git_version")

    def check_hash(self) -> None:
        if not self.path.is_file():
            raise RecordError(
                f"{self.path} is listed in the manifest but missing",
                remedy="run `invoke convert` again (it rebuilds what is missing)",
            )
        actual = sha256_file(self.path)
        if actual != self.sha256:
            raise RecordError(
                f"{self.path} does not match its manifest entry (sha256 {actual[:12]}… != {self.sha256[:12]}…)",
                cause="the file was modified or replaced after conversion",
                remedy="run `invoke convert --force` to regenerate it",
            )


class ConvertManifest:
    """Reader for ``manifest.json`` written by ``invoke convert``."""

    def __init__(self, path: Path, data: Dict[str, Any]):
        self.path = Path(path)
        self.dir = self.path.parent
        self.data = data

    REMEDY = "run `invoke convert` first (or point --models at a directory that `invoke convert` wrote)"

    @classmethod
    def load(cls, location: Path) -> "ConvertManifest":
        location = Path(location)
        path = location / MANIFEST_NAME if location.is_dir() or not location.suffix else location
        return cls(path, read_record(path, MANIFEST_KIND, MANIFEST_SCHEMA, cls.REMEDY))

    @classmethod
    def exists(cls, location: Path) -> bool:
        return (Path(location) / MANIFEST_NAME).is_file()

    @property
    def conversions(self) -> Dict[str, Dict[str, Any]]:
        return self.data.get("conversions", {})

    @property
    def files(self) -> List[ModelFile]:
        out = []
        for entry in self.data.get("files", []):
            conv = self.conversions.get(entry["stem"], {})
            known = {"file", "sha256", "size", "model", "stem", "mode", "backend", "input", "output", "variant"}
            out.append(
                ModelFile(
                    file=entry["file"],
                    path=(self.dir / entry["file"]).resolve(),
                    sha256=entry["sha256"],
                    size=entry["size"],
                    model=entry["model"],
                    stem=entry["stem"],
                    mode=entry["mode"],
                    backend=entry["backend"],
                    input=TensorSpec.from_dict(entry["input"]),
                    output=TensorSpec.from_dict(entry["output"]),
                    conversion=conv,
                    extra={k: v for k, v in entry.items() if k not in known},
                )
            )
        return out

    def variants(self) -> Dict[str, Dict[str, ModelFile]]:
        """``{"mobilenetv2-quant_full": {"cpu": ModelFile, "nnapi": ModelFile}, ...}``."""
        out: Dict[str, Dict[str, ModelFile]] = {}
        for f in self.files:
            out.setdefault(f.qualified_variant, {})[f.backend] = f
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
        if len(matches) > 1:
            raise UsageError(
                f"variant {name!r} is ambiguous in {self.path}",
                cause=f"several models have it: {known}",
                remedy="name it with its model prefix, e.g. mobilenetv2-" + name,
            )
        raise UsageError(
            f"no converted variant {name!r} in {self.path}",
            cause=f"the manifest has: {known}",
            remedy=f"run `invoke convert` for it, or pick one of: {known}",
        )


# --------------------------------------------------------------------------- build-info


def build_info_path(build_dir: Path, abi: str) -> Path:
    """Where build-android writes (and deploy, check-compat, all read) the build-info of ``abi``."""
    return Path(build_dir) / "android" / abi / BUILD_INFO_NAME


class BuildInfo:
    """The build-info (``build/android/<abi>/build-info.json``): one reader (:meth:`load`), one writer
    (:meth:`write`), one path helper (:func:`build_info_path`)."""

    REMEDY = "run `invoke build-android` first (or pass the file with --build-info / the binary with --binary)"

    def __init__(self, path: Path, data: Dict[str, Any]):
        self.path = Path(path)
        self.dir = self.path.parent
        self.data = data

    @classmethod
    def load(cls, location: Path) -> "BuildInfo":
        location = Path(location)
        path = location / BUILD_INFO_NAME if location.is_dir() else location
        return cls(path, read_record(path, BUILD_INFO_KIND, BUILD_INFO_SCHEMA, cls.REMEDY))

    @classmethod
    def write(cls, path: Path, body: Dict[str, Any]) -> "BuildInfo":
        """Write the record atomically (kind, schema and time added) and return it as read back."""
        write_record(Path(path), BUILD_INFO_KIND, BUILD_INFO_SCHEMA, body)
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

    def min_page_alignment(self, name: Optional[str] = None) -> Optional[int]:
        """The smallest recorded LOAD alignment (of ``name`` only, if given); None when not recorded."""
        aligns = self.page_alignment
        values = [aligns[name]] if name in aligns else ([] if name else list(aligns.values()))
        return min(values) if values else None

    @property
    def ndk_revision(self) -> Optional[str]:
        return (self.data.get("ndk") or {}).get("revision")

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
# Written by `invoke make-app`: application_id, activity (".MainActivity"), variant, models
# (asset name -> manifest sha256), pins; `invoke build-app` adds "apk": {"path", "sha256"}.
# Read by `invoke deploy` to install the APK and launch the in-app benchmark.

# The in-app benchmark contract between the generated app and `invoke deploy`:
#   am start -W -n <application_id>/.MainActivity --ez benchmark true --ei iters N --ei warmup N --es backend cpu|nnapi
# after which the app logs exactly one line per run, with the log tag APP_BENCH_TAG:
#   TORCHDROID_BENCH {"variant": "...", "backend": "nnapi", "fell_back": false, "iters": 200, "warmup": 5,
#                     "median_ms": 12.3, "p90_ms": 13.0, "min_ms": 11.9, "mean_ms": 12.4, "error": null}
APP_BENCH_TAG = "torchdroid"
APP_BENCH_PREFIX = "TORCHDROID_BENCH "
