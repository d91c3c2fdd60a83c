"""How tasks declare options: each option's help, what to type and list-ness come from its schema key.

``@task(help=helps(iter="bench.iter"))`` names the key a task parameter reads; from that one reference the task
gets the key's help text with its config key and default, led by what to type (``N: timed iterations``,
``qnnpack|nnapi: ...``, ``MODE[,MODE...]: ...``, ``PATH: ...``), and a repeatable flag for a list key.

Invoke (3.0.3) itself prints ``--iter=STRING`` for every option that takes a text: its ``ParserContext.help_for``
knows only STRING and INT, ``Collection.from_module`` rebuilds the task file's collection as a plain
``Collection`` (a subclass's ``to_contexts`` is never used), and an option of kind ``int`` is cast by Invoke's
parser (``--iter abc``: a traceback instead of torchdroid's usage error).  So the placeholder leads the help text.
"""

from __future__ import annotations

import inspect
from typing import Dict

from invoke import Task
from invoke import task as _invoke_task

from toolchain.settings import SCHEMA, Key

# Short flags follow one convention in every task; -h is always --help, never a run.
SHORT_FLAGS = {"out": "o", "force": "f", "model": "m", "serial": "s", "max_jobs": "j", "dry_run": "n"}


class TorchdroidTask(Task):
    def arg_opts(self, name, default, taken_names):
        opts = super().arg_opts(name, default, taken_names)
        if name in SHORT_FLAGS and SHORT_FLAGS[name] not in taken_names:
            opts["names"].append(SHORT_FLAGS[name])
        return opts


class Helps(dict):
    """Help texts by parameter, with the schema key each one came from (``schema_keys``)."""

    def __init__(self, texts: Dict[str, str], schema_keys: Dict[str, Key]):
        super().__init__(texts)
        self.schema_keys = schema_keys


def task(**kwargs):
    """Invoke's @task with torchdroid's short flags, placeholders and repeatable list options; help for debug/json
    only where the task has them."""

    def wrap(fn):
        params = inspect.signature(fn).parameters
        given = kwargs.get("help", {})
        keys = {k: v for k, v in getattr(given, "schema_keys", {}).items() if k in params}
        kwargs["help"] = {k: v for k, v in given.items() if k in params}
        lists = [p for p, key in keys.items() if key.kind.base == "list"]
        kwargs["iterable"] = sorted(set(kwargs.get("iterable", ())) | set(lists))
        return _invoke_task(klass=TorchdroidTask, auto_shortflags=False, **kwargs)(fn)

    return wrap


def helps(**params) -> Helps:
    """Task help from the schema: ``helps(iter="bench.iter")``; a text that is no key is used as it is."""
    out = {"debug": "show tracebacks", "json": SCHEMA["json"].help}
    keys = {}
    for param, ref in params.items():
        key = SCHEMA.get(ref)
        if key is None:
            out[param] = ref
            continue
        keys[param] = key
        text = key.help if key.cli_only else f"{key.help} (config {key.name}{_default_words(key.default)})"
        out[param] = text if key.kind.base == "bool" else f"{placeholder(key, param)}: {text}"
    return Helps(out, keys)


def _default_words(value) -> str:
    if value in (None, [], ""):
        return ""
    if isinstance(value, bool):
        return ", default " + ("on" if value else "off")
    return ", default " + (",".join(value) if isinstance(value, list) else str(value))


def placeholder(key: Key, param: str) -> str:
    """What to type after ``--param=``: N, a number's unit, the choices, PATH, or the item of a list."""
    kind = key.kind
    if key.metavar:
        return key.metavar
    if kind.base == "int":
        return "N"
    if kind.base == "float":
        return next((unit.upper() for unit in ("seconds", "days") if unit in key.help.split()[:6]), "NUMBER")
    if kind.base == "path":
        return "PATH"
    if kind.base == "list":
        item = (kind.item or param).upper().replace(" ", "_").replace("-", "_")
        return f"{item}[,{item}...]"
    if kind.choices:
        return "|".join(kind.choices)
    return param.upper()
