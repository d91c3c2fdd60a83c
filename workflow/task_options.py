"""How tasks declare options: torchdroid's short-flag convention and help texts taken from the schema."""

from __future__ import annotations

import functools
import inspect

from invoke import Task
from invoke import task as _invoke_task

from toolchain.settings import SCHEMA

# Short flags follow one convention in every task; -h is always --help, never a run.
SHORT_FLAGS = {"out": "o", "force": "f", "model": "m", "serial": "s", "max_jobs": "j", "dry_run": "n"}


class TorchdroidTask(Task):
    def arg_opts(self, name, default, taken_names):
        opts = super().arg_opts(name, default, taken_names)
        if name in SHORT_FLAGS and SHORT_FLAGS[name] not in taken_names:
            opts["names"].append(SHORT_FLAGS[name])
        return opts


def task(**kwargs):
    """Invoke's @task with torchdroid's short flags; help for debug/json only where the task has them.  A task is
    one run of the notes channel (toolchain/console.one_run): each warning printed once, also when `invoke all`
    calls the other tasks."""

    def wrap(fn):
        from toolchain.console import one_run

        params = inspect.signature(fn).parameters
        kwargs["help"] = {k: v for k, v in kwargs.get("help", {}).items() if k in params}

        @functools.wraps(fn)
        def in_one_run(*args, **kw):
            with one_run():
                return fn(*args, **kw)

        return _invoke_task(klass=TorchdroidTask, auto_shortflags=False, **kwargs)(in_one_run)

    return wrap


def helps(**params) -> dict:
    """Task help from the schema: ``helps(iter="bench.iter")``; a text that is no key is used as it is."""
    out = {"debug": "show tracebacks", "json": SCHEMA["json"].help}
    for param, ref in params.items():
        key = SCHEMA.get(ref)
        if key is None:
            out[param] = ref
        elif key.cli_only:
            out[param] = key.help
        else:
            out[param] = f"{key.help} (config {key.name}{_default_words(key.default)})"
    return out


def _default_words(value) -> str:
    if value in (None, [], ""):
        return ""
    if isinstance(value, bool):
        return ", default " + ("on" if value else "off")
    return ", default " + (",".join(value) if isinstance(value, list) else str(value))
