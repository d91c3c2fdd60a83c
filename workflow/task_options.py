"""How tasks declare options: once, as a parameter whose default names its schema key.

::

    @task()
    def bench(c, iter=opt("bench.iter"), host=flag("run the models on this machine"), json=JSON, debug=DEBUG):

From that one declaration the task gets its command-line option (``--iter``; a list key makes it repeatable, an
on/off key a flag), its help (the key's help, config key and default, led by what to type: ``N: timed
iterations``, ``qnnpack|nnapi: ...``, ``MODE[,MODE...]: ...``, ``PATH: ...``), and the value the body sees when
the option is not given (``None``, or ``False`` for a flag: the real default lives in the schema, so a config
file or ``INVOKE_*`` variable can still set it).  A task calling another in Python gets the same.

Invoke (3.0.3) itself prints ``--iter=STRING`` for every option that takes a text: its ``ParserContext.help_for``
knows only STRING and INT, ``Collection.from_module`` rebuilds the task file's collection as a plain
``Collection`` (a subclass's ``to_contexts`` is never used), and an option of kind ``int`` is cast by Invoke's
parser (``--iter abc``: a traceback instead of torchdroid's usage error).  So the placeholder leads the help text.
Only Invoke's public API is used: ``@task``, ``Task.arg_opts`` (the short flags) and ``__signature__``.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from dataclasses import replace
from typing import Callable, Dict, Optional, Sequence, Tuple

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

    def get_arguments(self, ignore_unknown_help=None):
        """Invoke's, which pops each help text it hands out: the task keeps its help for a second caller."""
        kept = dict(self.help)
        try:
            return super().get_arguments(ignore_unknown_help=ignore_unknown_help)
        finally:
            self.help = kept


@dataclass(frozen=True)
class Option:
    """One task option: its schema key (type, range, default, help), or its own help text for a plain flag."""

    key: Optional[Key] = None
    text: str = ""  # help instead of the key's (the key still types the value)
    metavar: str = ""  # what to type instead of the key's
    formats: Tuple[str, ...] = ()  # the only formats it means something for (--format); () = every format

    @property
    def is_flag(self) -> bool:
        return self.key is None or self.key.kind.base == "bool"

    @property
    def unset(self):
        """What the body gets when the option is not on the command line."""
        return False if self.is_flag else None

    def help(self, param: str) -> str:
        key = self.key
        scope = f"with --format {','.join(self.formats)}, " if self.formats else ""
        if key is None:
            return scope + self.text
        text = scope + (self.text or (key.help if key.cli_only else
                                      f"{key.help} (config {key.name}{_default_words(key.default)})"))
        return text if self.is_flag else f"{self.metavar or placeholder(key, param)}: {text}"


def opt(name: str, text: str = "", metavar: str = "", formats: Tuple[str, ...] = ()) -> Option:
    """An option that reads the schema key ``name``; ``text`` replaces the key's help, ``metavar`` what to type;
    ``formats``: the only formats it is for (given without them: a usage error, workflow/stage_settings.py)."""
    return Option(SCHEMA[name], text, metavar, tuple(formats))


def flag(text: str, formats: Tuple[str, ...] = ()) -> Option:
    """An on/off flag with no key of its own (``--no-bench``, ``--host``)."""
    return Option(None, text, formats=tuple(formats))


DECLARED: Dict[str, Dict[str, str]] = {}  # task function's name -> {parameter: config key}, filled by @task
FOR_FORMATS: Dict[str, Dict[str, Tuple[str, ...]]] = {}  # task function's name -> {parameter: its only formats}


def declared(*tasks: str) -> Dict[str, str]:
    """``{parameter: config key}`` of the named tasks' :func:`opt` declarations (their Python names: ``make_app``):
    how :class:`toolchain.resolve.Resolver` finds a key's command-line value.  tasks.py must be imported."""
    out: Dict[str, str] = {}
    for name in tasks:
        if name not in DECLARED:
            raise LookupError(f"no task {name!r} is declared: import tasks.py first")
        out.update(DECLARED[name])
    return out


def format_options(task: str) -> Dict[str, Tuple[str, ...]]:
    """``{parameter: formats}`` of the task's options that mean something for some formats only (``formats=``)."""
    declared(task)  # the same error for a task not declared
    return FOR_FORMATS[task]


JSON = opt("json")
DEBUG = flag("show tracebacks")


def task(**kwargs):
    """Invoke's @task for a body whose options are declared with :func:`opt` / :func:`flag`.  A task is one run of
    the notes channel (toolchain/console.one_run): each warning printed once, also when `invoke all` calls the other
    tasks."""

    def wrap(fn):
        from toolchain.console import one_run

        signature = inspect.signature(fn)
        options = {p: o.default for p, o in signature.parameters.items() if isinstance(o.default, Option)}
        shown = signature.replace(parameters=[
            p.replace(default=options[p.name].unset) if p.name in options else p
            for p in signature.parameters.values()])

        @functools.wraps(fn)
        def body(*args, **kw):
            bound = shown.bind(*args, **kw)
            bound.apply_defaults()
            with one_run():
                return fn(*bound.args, **bound.kwargs)

        body.__signature__ = shown
        DECLARED[fn.__name__] = {p: o.key.name for p, o in options.items() if o.key is not None}
        FOR_FORMATS[fn.__name__] = {p: o.formats for p, o in options.items() if o.formats}
        kwargs["help"] = {p: o.help(p) for p, o in options.items()}
        kwargs["iterable"] = [p for p, o in options.items() if o.key is not None and o.key.kind.base == "list"]
        return _invoke_task(klass=TorchdroidTask, auto_shortflags=False, **kwargs)(body)

    return wrap


def shorthand(full: Task, run: Callable, name: str, format: str, options: Sequence[str],
              renamed: Optional[Dict[str, str]] = None, doc: str = "") -> Task:
    """``invoke NAME ...`` as ``invoke FULL --format FORMAT ...``: a task with some of ``full``'s own declarations (the
    same key, help and default; ``renamed``: {its name here: full's name}), whose body is ``run(c, name,
    format=[format], **values)`` under full's names, ``run`` being the function full's body calls with its own name
    (the run's log, lock and remedies then say ``name``).  Nothing of its own: each option is one of ``full``'s, and
    none is for another format only (it would be an error every time)."""
    renamed = dict(renamed or {})
    params = inspect.signature(full.body.__wrapped__).parameters
    context = next(iter(params.values()))
    chosen = [context]
    for own in options:
        p = params[renamed.get(own, own)]
        if p.default.formats and format not in p.default.formats:
            raise ValueError(f"{name} --{own}: for --format {','.join(p.default.formats)} only, not {format}")
        chosen.append(p.replace(name=own, default=replace(p.default, formats=())))  # always its format here
    signature = inspect.Signature(chosen)

    def body(*args, **kw):
        values = signature.bind(*args, **kw).arguments
        c = values.pop(context.name)
        return run(c, name, format=[format], **{renamed.get(p, p): v for p, v in values.items()})

    body.__signature__ = signature
    body.__name__ = body.__qualname__ = name.replace("-", "_")
    body.__doc__, body.__module__ = doc, full.body.__module__
    return task()(body)


def _default_words(value) -> str:
    if value in (None, [], ""):
        return ""
    if isinstance(value, bool):
        return ", default " + ("on" if value else "off")
    return ", default " + (",".join(value) if isinstance(value, list) else str(value))


def placeholder(key: Key, param: str) -> str:
    """What to type after ``--param``: N, a number's unit, the choices, PATH, or the item of a list."""
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
