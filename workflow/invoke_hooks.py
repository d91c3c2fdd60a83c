"""What tasks.py does when Invoke imports it: check the config files Invoke is about to read, quiet a closed pipe.

Invoke imports tasks.py, then reads the project's ``invoke.yaml`` next to it, then the runtime file (``-f FILE``
or ``INVOKE_RUNTIME_CONFIG``), and the ``INVOKE_*`` variables when a task starts.  On its own, a YAML syntax
error in one of those files, a file that is not a mapping, a ``-f`` file that does not exist (skipped silently)
and an ``INVOKE_*`` text it cannot cast to the type of the value it overrides end in a traceback.
:func:`start` reads the same files first, through public means (:mod:`toolchain.config_sources`), and turns
each of those into a usage error (exit 2) naming the file and line or the variable, before Invoke meets it.
Values themselves are typed later, by the schema (:mod:`toolchain.resolve`), at the start of every task.

``~/.invoke.yaml`` and ``/etc/invoke.yaml`` are read by Invoke before tasks.py is imported: a broken one is
reported by Invoke itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional, Sequence


def runtime_path(argv: Sequence[str], environ: Mapping[str, str]) -> Optional[Path]:
    """The ``-f``/``--config`` file of this command line (Invoke's own parser, its core flags), else
    ``INVOKE_RUNTIME_CONFIG``, as Invoke decides it."""
    from invoke import Program
    from invoke.exceptions import ParseError
    from invoke.parser import Parser, ParserContext

    program = Program()
    try:
        core = Parser(initial=ParserContext(args=program.core_args() + program.task_args()),
                      ignore_unknown=True).parse_argv(list(argv[1:]))
        given = core[0].args["config"].value
    except ParseError:  # Invoke reports it itself
        given = None
    if given is None:
        given = environ.get("INVOKE_RUNTIME_CONFIG")
    return Path(given) if given else None


def check_files(layers) -> None:
    """The runtime and project files (of the ``layers`` read by :func:`toolchain.config_sources.use`) name only
    known keys and no empty section."""
    from invoke import Config

    from toolchain.resolve import check_known_keys

    invoke_keys = tuple(Config.global_defaults())
    for which, path, data in layers:
        if which in ("runtime", "project"):  # a user's own file may hold other projects' sections
            refuse_empty_sections(data, path)
            check_known_keys(data, str(path), invoke_keys)
        refuse_unmergeable(data, path)  # every file Invoke merges: ~/.invoke.yaml and /etc/invoke.yaml too


def _clashes(defaults: Mapping[str, Any], data: Mapping[str, Any], prefix: str = "") -> List[str]:
    """Keys where ``data`` has a value and the defaults a section, or the other way round (Invoke cannot merge)."""
    found = []
    for k, v in data.items():
        if k not in defaults or v is None:
            continue
        if isinstance(defaults[k], dict) and isinstance(v, dict):
            found += _clashes(defaults[k], v, f"{prefix}{k}.")
        elif isinstance(defaults[k], dict) != isinstance(v, dict):
            found.append(f"`{prefix}{k}` is {'a section' if isinstance(defaults[k], dict) else 'a value'} "
                         f"but the file gives {'a section' if isinstance(v, dict) else repr(v)}")
    return found


def refuse_unmergeable(data: Mapping[str, Any], path: Path) -> None:
    """A value where torchdroid or Invoke has a section (``convert: 5`` in ``~/.invoke.yaml``), or a section where
    they have a value: Invoke's merge would end in a traceback (AmbiguousMergeError); this names the file."""
    from invoke import Config

    from toolchain.errors import UsageError
    from toolchain.settings import config_defaults

    clashes = _clashes({**Config.global_defaults(), **config_defaults()}, data)
    if clashes:
        raise UsageError(f"the config file {path} cannot be merged: {clashes[0]}",
                         cause="; ".join(clashes[1:]) or "Invoke merges every config file into one tree of sections "
                                                         "and values",
                         remedy=f"fix or remove that entry in {path} (a section is written `name:` with indented "
                                "`key: value` lines under it)")


def refuse_empty_sections(data: Mapping[str, Any], path: Path) -> None:
    """``convert:`` with every key commented out is an empty value, which Invoke cannot merge into a section."""
    from invoke import Config

    from toolchain.errors import UsageError
    from toolchain.settings import SECTIONS

    sections = set(SECTIONS) | {k for k, v in Config.global_defaults().items() if isinstance(v, dict)}
    empty = [k for k, v in data.items() if v is None and k in sections]
    if empty:
        raise UsageError(f"the config file {path} has an empty section: {', '.join(f'`{k}:`' for k in empty)}",
                         cause="every key under it is commented out or missing; Invoke cannot merge an empty value "
                               "into a section",
                         remedy=f"write `{empty[0]}: {{}}` (an empty section), or comment out the `{empty[0]}:` "
                                "line too")


def check_env_casts(layers, environ: Mapping[str, str]) -> None:
    """An ``INVOKE_*`` variable over a typed value of a file is cast by Invoke to that value's type; when that
    cannot work, say so before Invoke tries (a traceback): the schema's own message when the text is bad."""
    from toolchain.errors import UsageError
    from toolchain.resolve import BadValue, Source, lookup, parse, usage_error
    from toolchain.settings import KEYS

    found = [(path, data) for _which, path, data in layers]
    for key in KEYS:
        text = environ.get(key.env_var)
        over = next(((path, raw) for path, data in found for ok, raw in [lookup(data, key.name)] if ok), None)
        if text is None or over is None or _invoke_can_cast(over[1], text):
            continue
        try:
            parse(key.kind, text, text=True)
        except BadValue as e:
            raise usage_error(key, Source("env", key.env_var), str(e)) from None
        raise UsageError(f"{key.env_var}={text!r} cannot override `{key.name}` in {over[0]}",
                         cause=f"Invoke casts an environment variable to the type of the value it overrides, and "
                               f"{over[1]!r} is a {type(over[1]).__name__}",
                         remedy=f"set `{key.name}` in {over[0]} to the text you mean (quoted), or remove the line "
                                f"and keep {key.env_var}")


def _invoke_can_cast(old: Any, text: str) -> bool:
    """Whether Invoke's environment loader can turn ``text`` into the type of ``old`` (its documented rule)."""
    if old is None or isinstance(old, (bool, str, dict)):
        return True
    if isinstance(old, (list, tuple)):
        return False
    try:
        type(old)(text)
    except (TypeError, ValueError):
        return False
    return True


def start(project_dir: Path, argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None):
    """Called by tasks.py at import: which config files are in force, checked; a problem is a clean exit 2."""
    from invoke import Exit

    from toolchain import config_sources
    from toolchain.errors import TorchdroidError

    environ = os.environ if environ is None else environ
    files = config_sources.ConfigFiles(runtime=runtime_path(sys.argv if argv is None else argv, environ),
                                       project_dir=Path(project_dir))
    _quiet_closed_pipe()
    try:
        layers = config_sources.use(files)  # every config file read once, here
        check_files(layers)
        check_env_casts(layers, environ)
    except TorchdroidError as e:
        raise Exit(f"torchdroid: {e.label}: {e}", code=e.exit_code) from None
    return files


CLOSED_PIPE_EXIT = 141  # 128 + SIGPIPE: how `yes | head` ends, what a shell's pipefail expects


def _closed_pipe_exit() -> None:
    """stdout's reader is gone (`invoke convert | head`): end now with 141, no traceback, no "Exception ignored"."""
    import os
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # what is still buffered goes nowhere, not into a second error
    except (OSError, ValueError):
        pass
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(CLOSED_PIPE_EXIT)


def _closed_pipe_hook(previous: Callable) -> Callable:
    def hook(kind, value, tb) -> None:
        if issubclass(kind, BrokenPipeError):
            _closed_pipe_exit()
        previous(kind, value, tb)

    hook.closed_pipe_exit = True
    return hook


def _flush_stdout_at_exit() -> None:
    import sys

    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _closed_pipe_exit()
    except (OSError, ValueError):
        pass


def _quiet_closed_pipe() -> None:
    """A closed stdout anywhere in a task (a print, or the flush at exit) ends the process quietly with 141."""
    import atexit
    import sys

    if getattr(sys.excepthook, "closed_pipe_exit", False):
        return
    sys.excepthook = _closed_pipe_hook(sys.excepthook)
    atexit.register(_flush_stdout_at_exit)
