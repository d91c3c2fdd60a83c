"""Typed values from the command line, config files, ``INVOKE_*`` variables and defaults, with their source.

:class:`Resolver` answers ``get(key)``: the command-line value of the task parameter declared for
``key`` (or of ``param`` in ``get(key, param)``) if given, else the highest config layer that sets ``key`` (``-f FILE``, ``INVOKE_*``,
``invoke.yaml`` next to tasks.py, ``~/.invoke.yaml``, ``/etc/invoke.yaml``), else the schema's
default, parsed and checked against the key's type in :mod:`toolchain.settings` (an output path's default
joined onto the ``build_dir`` in force, :mod:`toolchain.layout`).  A bad value is
a :class:`UsageError` that names the option or key and where it came from.
"""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .config_sources import ConfigLayers, env_layer, in_force, layers_in_force
from .errors import UsageError
from .layout import UnderBuildDir
from .settings import SCHEMA, Key, Kind, config_defaults

_TRUE = ("1", "true", "yes", "on", "y")
_FALSE = ("0", "false", "no", "off", "n", "")


@dataclass(frozen=True)
class Source:
    """Where a value came from: kind is cli | env | file | default."""

    kind: str
    name: str = ""  # --iter, INVOKE_BENCH_ITER, /path/invoke.yaml

    def describe(self, key: str) -> str:
        if self.kind == "cli":
            return f"the command line ({self.name})"
        if self.kind == "env":
            return f"the environment variable {self.name}"
        if self.kind == "file":
            return f"`{key}` in {self.name}"
        if self.kind == "config":
            return f"config key `{key}`"
        return f"the default of `{key}`"

    def fix(self, key: str, kind: Kind, example: Any = None) -> str:
        want = kind.describe()
        if self.kind == "cli":
            return f"give {self.name} {want}" + (f", e.g. `{self.name} {example}`" if example is not None else "")
        if self.kind == "env":
            return f"set {self.name} to {want}, or unset it"
        if self.kind == "file":
            return f"set `{key}` in {self.name} to {want}, or remove the line"
        return f"set `{key}` to {want}"


@dataclass(frozen=True)
class Value:
    value: Any
    source: Source


class BadValue(ValueError):
    pass


# --------------------------------------------------------------------------- parsing one value


def parse(kind: Kind, raw: Any, text: bool) -> Any:
    """``raw`` as ``kind``; ``text`` is True for command-line and environment strings.  Raises BadValue."""
    if kind.base == "list":
        return _parse_list(kind, raw)
    if isinstance(raw, (list, tuple, dict)):
        raise BadValue(f"{_show(raw)} is a {'list' if not isinstance(raw, dict) else 'mapping'}, "
                       f"not {kind.describe()}")
    if kind.base == "bool":
        return _parse_bool(raw)
    if kind.base in ("int", "float"):
        return _check_range(kind, _parse_number(kind, raw))
    if kind.base == "path":
        return _not_through_a_file(_parse_path(raw)) if kind.directory else _parse_path(raw)
    return _parse_text(kind, raw)


def _show(raw: Any) -> str:
    return repr(raw) if not isinstance(raw, str) else repr(raw)


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in _TRUE + _FALSE:
        return raw.strip().lower() in _TRUE
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    raise BadValue(f"{_show(raw)} is not true or false")


def _parse_number(kind: Kind, raw: Any):
    if isinstance(raw, bool):
        raise BadValue(f"{_show(raw)} is not {kind.describe()}")
    if kind.base == "int":
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        if isinstance(raw, str):
            try:
                return int(raw.strip().replace("_", ""), 10)
            except ValueError:
                pass
        raise BadValue(f"{_show(raw)} is not {kind.describe()}")
    try:
        value = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise BadValue(f"{_show(raw)} is not {kind.describe()}") from None
    if not math.isfinite(value):
        raise BadValue(f"{_show(raw)} is not {kind.describe()}")
    return value


def _check_range(kind: Kind, value):
    if kind.min is not None and value < kind.min:
        raise BadValue(f"{value} is too small: it must be at least {_bound(kind.min)} ({kind.describe()})")
    if kind.max is not None and value > kind.max:
        raise BadValue(f"{value} is too large: it must be at most {_bound(kind.max)} ({kind.describe()})")
    return value


def _bound(x) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _not_through_a_file(path: Path) -> Path:
    """A directory's path, refused when it (or a directory on its way) is a file."""
    blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise BadValue(f"{blocker} is a file, not a directory")
    return path


def _parse_path(raw: Any) -> Path:
    if not isinstance(raw, str) or not raw.strip():
        raise BadValue(f"{_show(raw)} is not a path")
    if "\x00" in raw:
        raise BadValue(f"{_show(raw)} holds a NUL byte")
    try:
        return Path(raw).expanduser()
    except RuntimeError:  # `~name/...` with no user `name` on this machine (pathlib cannot expand it)
        user = raw[1:].split("/", 1)[0]
        raise BadValue(f"{_show(raw)} starts with ~{user}, but there is no user {user!r} on this machine (use ~/ "
                       "for your own home directory, or an absolute path)") from None


def _parse_text(kind: Kind, raw: Any) -> str:
    if kind.choices and raw is False and "off" in kind.choices:
        return "off"  # YAML 1.1 reads `off` as false
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise BadValue(f"{_show(raw)} is not {kind.describe()}")
    text = str(raw).strip()
    if kind.choices:
        if text.lower() in kind.choices:
            return text.lower()
        what = f"unknown {kind.item} {text!r}: use" if kind.item else f"{text!r} is not"
        raise BadValue(f"{what} {kind.describe()}" + _did_you_mean(text, kind.choices))
    if not text:
        raise BadValue("the value is empty")
    return text


def _parse_list(kind: Kind, raw: Any) -> List[str]:
    """A YAML list, or one string (comma-separated); never a string split into characters."""
    if isinstance(raw, (list, tuple)):
        items = [part for item in raw for part in _list_item(item)]
    elif _scalar(raw):
        items = _comma_split(raw)
    else:
        raise BadValue(f"{_show(raw)} is not {kind.describe()}")
    if kind.choices and not items:
        raise BadValue(f"no {kind.item or 'item'} given: give at least one of {', '.join(kind.choices)}")
    bad = [i for i in items if kind.choices and i not in kind.choices]
    if bad:
        raise BadValue(f"unknown {kind.item + ' ' if kind.item else ''}{', '.join(repr(b) for b in bad)}: "
                       f"each item must be one of "
                       f"{', '.join(kind.choices)}" + _did_you_mean(bad[0], kind.choices))
    return items


def _scalar(raw: Any) -> bool:
    return isinstance(raw, (str, int, float)) and not isinstance(raw, bool)


def _comma_split(raw: Any) -> List[str]:
    return [p.strip() for p in str(raw).split(",") if p.strip()]


def _list_item(item: Any) -> List[str]:
    if not _scalar(item):
        raise BadValue(f"item {item!r} is not a text")
    return _comma_split(item)


def _did_you_mean(text: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(text).lower(), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------- config layers


def layers(config: Any) -> List[Tuple[Source, Mapping]]:
    """The config's sources, highest priority first: a plain mapping (tests), :class:`ConfigLayers`, or an Invoke
    config, whose sources are read as Invoke reads them (:mod:`toolchain.config_sources`): ``-f FILE``, the
    ``INVOKE_*`` variables, the project's file, the user's, the system's; then what Invoke's merged config holds
    beyond the declared defaults (a value set in code)."""
    if isinstance(config, ConfigLayers):
        return list(config.layers)
    if isinstance(config, Mapping):
        return [(Source("config"), config)]
    names = [k.name for k in SCHEMA.values() if not k.cli_only]
    found = [(Source("file", str(path)), data) for _which, path, data in layers_in_force()]
    env = [(Source("env"), env_layer(os.environ, names))]
    out = found[:1] + env + found[1:] if in_force().runtime is not None else env + found
    return [(source, data) for source, data in out if data] + [(Source("config"), _set_in_code(config, names))]


def _set_in_code(config: Any, names: Sequence[str]) -> Dict[str, Any]:
    """The values of Invoke's merged config that differ from the declared defaults and no file or variable gave."""
    defaults = config_defaults()
    data: Dict[str, Any] = {}
    for name in names:
        found, value = _merged(config, name)
        if found and value != lookup(defaults, name)[1]:
            node = data
            *parents, leaf = name.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
    return data


def _merged(config: Any, dotted: str) -> Tuple[bool, Any]:
    node = config
    for part in dotted.split("."):
        try:
            node = node[part]
        except (KeyError, TypeError):
            return False, None
    return True, node


def lookup(data: Mapping, dotted: str) -> Tuple[bool, Any]:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def usage_error(key: Key, source: Source, problem: str) -> UsageError:
    label = source.name if source.kind == "cli" else f"`{key.name}`"
    return UsageError(f"{label}: {problem}", cause=f"the value comes from {source.describe(key.name)}",
                      remedy=source.fix(key.name, key.kind, _example(key)))


def _example(key: Key) -> Any:
    """A value to show in a fix: the default, else the smallest allowed number, else the first choice."""
    if key.default not in (None, [], "") and not isinstance(key.default, (bool, list, UnderBuildDir)):
        return key.default
    if key.kind.base in ("int", "float") and key.kind.min is not None:
        return _bound(key.kind.min)
    return key.kind.choices[0] if key.kind.choices else None


class Resolver:
    """Typed values for one task run; ``origins`` keeps where each came from."""

    def __init__(self, config: Any, cli: Optional[Mapping[str, Any]] = None,
                 params: Optional[Mapping[str, str]] = None):
        """``cli``: the task's parameters as given (``None``: not given); ``params``: which config key each parameter
        sets (the task's declaration, workflow/task_options.py), so ``get(key)`` finds its command-line value."""
        self.config = config
        self.cli = dict(cli or {})
        self.param_of = {name: param for param, name in (params or {}).items()}
        self.origins: Dict[str, Source] = {}
        self._layers = list(layers(config))

    # ---- the one read
    def value(self, name: str, param: Optional[str] = None) -> Value:
        key = SCHEMA[name]
        if param is None and key.kind.base != "bool":  # an on/off key's command line is get_flag's (unset: False)
            param = self.param_of.get(name)
        given = self._given(param)
        if given is not None:
            return self._parsed(key, given, Source("cli", "--" + param.replace("_", "-")), text=True)
        if not key.cli_only:
            for source, data in self._layers:
                found, raw = lookup(data, name)
                if found and raw is not None and not (source.kind == "env" and raw == "" and key.default is None):
                    return self._parsed(key, raw, Source(source.kind, self._env_name(key, source)),
                                        text=source.kind == "env" and isinstance(raw, str))
        if isinstance(key.default, UnderBuildDir):  # <build_dir>/name, under the build directory in force
            return Value(key.default.under(self.get("build_dir")), Source("default"))
        return Value(None if key.default is None else parse(key.kind, key.default, text=False), Source("default"))

    def get(self, name: str, param: Optional[str] = None) -> Any:
        v = self.value(name, param)
        self.origins[name] = v.source
        return v.value

    def get_flag(self, name: str, on: Optional[str] = None, off: Optional[str] = None) -> bool:
        """An on/off option: ``--x`` (param ``on``, by default the one declared for ``name``) or ``--no-x`` (param
        ``off``, by default ``no_`` and ``on``) beat the config."""
        key = SCHEMA[name]
        on = on or self.param_of.get(name)
        off = off or (f"no_{on}" if on else None)
        said_on = bool(on and self.cli.get(on))
        said_off = bool(off and self.cli.get(off))
        if said_on and said_off:
            raise UsageError(f"--{on.replace('_', '-')} and --{off.replace('_', '-')} both given",
                             remedy="give one of them")
        if said_on or said_off:
            flag = "--" + (on if said_on else off).replace("_", "-")
            self.origins[name] = Source("cli", flag)
            return said_on
        return bool(self.get(name) if not key.cli_only else key.default)

    def given(self, name: str) -> bool:
        """Whether the command line gave ``name`` (through the parameter declared for it)."""
        return self._given(self.param_of.get(name)) is not None

    def configured(self, name: str) -> Any:
        """``name``'s value from the config (files, ``INVOKE_*`` variables, default), whatever the command line says."""
        return Resolver(self.config).get(name)

    def path(self, name: str, param: Optional[str] = None) -> Optional[Path]:
        value = self.get(name, param)
        return Path(value) if value is not None else None

    def origin(self, name: str) -> str:
        source = self.origins.get(name, Source("default"))
        return source.describe(name)

    # ---- helpers
    def _given(self, param: Optional[str]) -> Any:
        """The command-line value of ``param``, or None when it was not given (an empty list is not given)."""
        given = self.cli.get(param) if param else None
        return None if given is None or given == [] or given == () else given

    @staticmethod
    def _env_name(key: Key, source: Source) -> str:
        return key.env_var if source.kind == "env" else source.name

    def _parsed(self, key: Key, raw: Any, source: Source, text: bool) -> Value:
        try:
            return Value(parse(key.kind, raw, text), source)
        except BadValue as e:
            raise usage_error(key, source, str(e)) from None


# --------------------------------------------------------------------------- the whole config, up front


def check_config(config: Any) -> None:
    """Every config key from every source parses, and no file names a key the schema lacks."""
    resolver = Resolver(config)
    for name, key in SCHEMA.items():
        if not key.cli_only:
            resolver.get(name)
    for source, data in resolver._layers:
        if source.kind == "file":
            check_known_keys(data, source.name)
    if not isinstance(config, (Mapping, ConfigLayers)):  # a real Invoke config: the variables of this process
        check_known_variables(os.environ, _invoke_variables(type(config).global_defaults()))


INVOKE_OWN = ("INVOKE_RUNTIME_CONFIG", "INVOKE_DEBUG")  # read by Invoke itself, not config keys


def _invoke_variables(tree: Mapping, prefix: str = "INVOKE") -> set:
    names = set()
    for k, v in tree.items():
        name = f"{prefix}_{str(k).upper()}"
        names |= _invoke_variables(v, name) if isinstance(v, Mapping) else {name}
    return names


def check_known_variables(environ: Mapping[str, str], invoke_names: set = frozenset()) -> None:
    """An ``INVOKE_*`` variable that names no key (a typo) would be ignored silently: refuse it."""
    ours = {k.env_var for k in SCHEMA.values() if not k.cli_only}
    for name in sorted(environ):
        if name.startswith("INVOKE_") and name not in ours and name not in invoke_names and name not in INVOKE_OWN:
            hint = difflib.get_close_matches(name, sorted(ours), n=1)
            raise UsageError(f"the environment variable {name} names no config key",
                             cause=(f"did you mean {hint[0]}?" if hint else "a typo, or a key of an older torchdroid"),
                             remedy=f"unset {name}" + (f" or rename it to {hint[0]}" if hint else "")
                                    + "; `invoke TASK --help` names each option's config key")


def check_known_keys(data: Mapping, where: str, invoke_keys: Sequence[str] = ()) -> None:
    """Refuse keys in torchdroid's sections that the schema does not declare (typos, old names)."""
    known = {k.name for k in SCHEMA.values() if not k.cli_only}
    sections = {n.split(".")[0] for n in known if "." in n}
    for top, value in data.items():
        if top in sections:
            _check_section(top, value, where, known)
        elif top in known and isinstance(value, Mapping):
            kind = SCHEMA[top].kind
            raise UsageError(f"`{top}` in {where} is a mapping ({value!r}), not {kind.describe()}",
                             remedy=f"set `{top}` in {where} to {kind.describe()}")
        elif top not in known and invoke_keys and top not in invoke_keys:
            hint = difflib.get_close_matches(top, sorted(sections), n=1)
            raise UsageError(f"unknown config section `{top}` in {where}",
                             cause=(f"did you mean `{hint[0]}`?" if hint else None),
                             remedy="torchdroid's sections: " + ", ".join(sorted(sections | {"build_dir", "debug"})))


def _check_section(top: str, value: Any, where: str, known: set) -> None:
    if not isinstance(value, Mapping):
        raise UsageError(f"`{top}` in {where} is {value!r}, not a mapping of keys",
                         remedy=f"write it as `{top}:` followed by indented `key: value` lines")
    for sub, leaf in value.items():
        name = f"{top}.{sub}"
        if name not in known and any(k.startswith(name + ".") for k in known):  # a group: deploy.stf.url, ...
            _check_section(name, leaf, where, known)
            continue
        if name in known and isinstance(leaf, Mapping):
            kind = SCHEMA[name].kind
            raise UsageError(f"`{name}` in {where} is a mapping ({leaf!r}), not {kind.describe()}",
                             remedy=f"set `{name}` in {where} to {kind.describe()}")
        if name not in known:
            choices = sorted(n for n in known if n.startswith(top + "."))
            hint = difflib.get_close_matches(name, choices, n=1)
            raise UsageError(f"unknown config key `{name}` in {where}",
                             cause=(f"did you mean `{hint[0]}`?" if hint else None),
                             remedy="keys of this section: " + ", ".join(c[len(top) + 1:] for c in choices))
