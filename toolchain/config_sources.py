"""Where each config value comes from, read through public means only: the files Invoke reads and ``os.environ``.

Invoke merges its sources into one config (``-f FILE`` over ``INVOKE_*`` over the project's ``invoke.yaml``
over ``~/.invoke.yaml`` over ``/etc/invoke.yaml`` over the defaults of ``ns.configure``) and keeps no public record
of which source gave a value.  torchdroid names that source in every message about a bad value, so it reads
the same files itself, with the same YAML library (``invoke.util.yaml``), and the ``INVOKE_*`` variables of its
own keys as the text the user wrote: :func:`layers` lists them in Invoke's order of precedence.

:class:`ConfigFiles` says which files are in force: ``tasks.py``'s directory (the project file) and the runtime
file (``invoke -f FILE`` or ``INVOKE_RUNTIME_CONFIG``), set once per run by :func:`use`.
"""

from __future__ import annotations

import errno
import json
import os
import runpy
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import UsageError

SUFFIXES = ("yaml", "yml", "json", "py")  # Invoke's config file kinds, in the order it tries them
USER_PREFIX = "~/.invoke"
SYSTEM_PREFIX = "/etc/invoke"
PY_EXAMPLE = "`convert = {\"weights\": \"random\"}`"


@dataclass(frozen=True)
class ConfigFiles:
    """The config files of one run: ``runtime`` (``-f``) and the directory of tasks.py (the project file)."""

    runtime: Optional[Path] = None
    project_dir: Optional[Path] = None
    user_prefix: str = USER_PREFIX
    system_prefix: str = SYSTEM_PREFIX

    def project(self) -> Optional[Path]:
        return first_existing(str(self.project_dir / "invoke")) if self.project_dir else None

    def user(self) -> Optional[Path]:
        return first_existing(os.path.expanduser(self.user_prefix))

    def system(self) -> Optional[Path]:
        return first_existing(self.system_prefix)


@dataclass
class ConfigLayers:
    """Sources given directly, highest priority first (tests, and callers that have their values at hand)."""

    layers: List[Tuple[Any, Mapping]] = field(default_factory=list)


Layer = Tuple[str, Path, Dict[str, Any]]  # (which: runtime, project, user, system; the file; its data)
_IN_FORCE: List[Tuple[ConfigFiles, List[Layer]]] = []


def use(files: ConfigFiles) -> List[Layer]:
    """The files of this run, read once (called by tasks.py when Invoke imports it): the startup checks and every
    task's settings use what is read here, so a file (a ``.py`` one runs) is not read again per check or task."""
    layers = file_layers(files)
    _IN_FORCE[:] = [(files, layers)]
    return layers


def in_force() -> ConfigFiles:
    if _IN_FORCE:
        return _IN_FORCE[0][0]
    runtime = os.environ.get("INVOKE_RUNTIME_CONFIG")
    return ConfigFiles(runtime=Path(runtime) if runtime else None)


def layers_in_force() -> List[Layer]:
    """What :func:`use` read, or (no run set up: a library caller) the files in force read now."""
    return _IN_FORCE[0][1] if _IN_FORCE else file_layers(in_force())


def first_existing(prefix: str) -> Optional[Path]:
    """``prefix.yaml``, ``.yml``, ``.json`` or ``.py``: the first that exists, as Invoke picks it."""
    for suffix in SUFFIXES:
        path = Path(f"{prefix}.{suffix}")
        if path.exists():
            return path
    return None


# --------------------------------------------------------------------------- reading one file


def read_file(path: Path, asked: bool = False) -> Dict[str, Any]:
    """The data of one config file, as Invoke reads it; a file that cannot be read is a UsageError naming it.
    ``asked``: the file was named (``-f``), so a missing one is an error, not a file to skip."""
    kind = path.suffix.lstrip(".")
    if kind not in SUFFIXES:
        raise UsageError(f"the config file {path} is not a .yaml, .yml, .json or .py file",
                         remedy="rename it (e.g. mine.yaml) or give `invoke -f` a YAML or JSON file")
    try:
        data = _load(path, kind)
    except OSError as e:
        raise _unreadable(path, e, asked) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"the config file {path} holds a {type(data).__name__}, not a mapping of sections",
                         remedy="write `section:` headers with indented `key: value` lines, e.g. "
                                f"`deploy:` then `  iter: 200` (or move {path} away)")
    return data


def _load(path: Path, kind: str) -> Any:
    if kind == "py":
        return _load_py(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"cannot read the config file {path}: {e}", remedy=f"fix or remove {path}") from None
    if kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise UsageError(f"cannot read the config file {path}: {e}", remedy=f"fix or remove {path}") from None
    from invoke.util import yaml  # the YAML library Invoke itself reads the file with

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise yaml_problem(str(path), e) from None


def _load_py(path: Path) -> Dict[str, Any]:
    try:
        namespace = runpy.run_path(str(path))
    except SyntaxError as e:
        line = f", line {e.lineno}" if e.lineno else ""
        raise UsageError(f"cannot read the config file {path}{line}: {e.msg}", cause="the file is not valid Python",
                         remedy=f"fix {path} at that line; a .py config file holds one dict per section, e.g. "
                                + PY_EXAMPLE) from None
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001 - running the user's .py config can raise anything
        raise UsageError(f"cannot read the config file {path}: running it raised {type(e).__name__}: {e}",
                         remedy=f"fix {path} (a .py config file holds one dict per section, e.g. {PY_EXAMPLE}), "
                                "or use a YAML file") from None
    modules = sorted(k for k, v in namespace.items() if not k.startswith("__") and isinstance(v, types.ModuleType))
    if modules:  # Invoke refuses them with a traceback (UnpicklableConfigMember)
        raise UsageError(f"the config file {path} binds {', '.join(f'`{m}`' for m in modules)} to a module, which "
                         "Invoke cannot take as a config value",
                         remedy=f"end {path} with `del {', '.join(modules)}`, or import as `__{modules[0]}`")
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def _unreadable(path: Path, e: OSError, asked: bool) -> UsageError:
    why = "it does not exist" if e.errno == errno.ENOENT else (e.strerror or str(e))
    if asked:
        remedy = "give `invoke -f` (or INVOKE_RUNTIME_CONFIG) a readable YAML or JSON file"
    else:  # the project's file: Invoke reads it on every run
        remedy = f"make {path} a readable file, or move it away"
    return UsageError(f"cannot read the config file {path}: {why}", remedy=remedy)


def yaml_problem(path: str, e: Exception) -> UsageError:
    """A YAML syntax error as file, line and column, what is wrong there and how such a file is written."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else path
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    start = getattr(e, "context_mark", None)
    if start is not None and mark is not None and start.line != mark.line and getattr(e, "context", None):
        problem += f" ({e.context} that starts at line {start.line + 1})"
    return UsageError(f"cannot read the config file {where}: {problem}",
                      cause="the file is not valid YAML (indentation, a missing `:` or an unclosed quote)",
                      remedy=f"fix {path} at that line (or move it away); `key: value` lines under "
                             "`section:` headers, indented by two spaces")


def read_quietly(path: Optional[Path]) -> Dict[str, Any]:
    """A user or system file: Invoke has read it already (and reported its own error if it could not)."""
    if path is None:
        return {}
    try:
        return read_file(path)
    except (UsageError, OSError):
        return {}


# --------------------------------------------------------------------------- the layers


def env_layer(environ: Mapping[str, str], names: Sequence[str]) -> Dict[str, Any]:
    """The ``INVOKE_*`` variables of the dotted ``names``, nested like a config file, as the text the user wrote."""
    data: Dict[str, Any] = {}
    for name in names:
        var = "INVOKE_" + name.replace(".", "_").upper()
        if var in environ:
            node = data
            *parents, leaf = name.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = environ[var]
    return data


def file_layers(files: ConfigFiles) -> List[Layer]:
    """(which, path, data) of every config file in force, highest priority first; which: runtime, project, ..."""
    out = []
    if files.runtime is not None:
        out.append(("runtime", files.runtime, read_file(files.runtime, asked=True)))
    project = files.project()
    if project is not None:
        out.append(("project", project, read_file(project)))
    for which, path in (("user", files.user()), ("system", files.system())):
        if path is not None:
            out.append((which, path, read_quietly(path)))
    return out
