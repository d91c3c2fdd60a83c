"""Make Invoke's config loading report bad input as torchdroid usage errors instead of tracebacks.

Invoke (3.x) loads ``invoke.yaml`` next to tasks.py right after importing it, ``-f FILE`` and the
``INVOKE_*`` variables a little later, and on its own:

* a YAML syntax error, or a file whose top level is not a mapping, raises from deep inside Invoke;
* ``INVOKE_BENCH_ITER=abc`` raises ``ValueError`` from ``int("abc")``, a list key raises
  ``UncastableEnvVar``, and ``INVOKE_DEPLOY_INSTALL=false`` becomes ``True`` (any non-empty text).

:func:`install` (called once by tasks.py) turns the first two into a clean exit 2 naming the file
and line, and keeps environment values as the text the user wrote, so that
:mod:`toolchain.resolve` types them with the schema and names the variable when one is wrong.

``/etc/invoke.yaml`` and ``~/.invoke.yaml`` are read before tasks.py is imported;
:mod:`workflow.invoke_startup` (run by the installed ``torchdroid-invoke.pth``) wraps the loaders for them
with :func:`install_config_checks`: the same file errors, but no check of the sections (a user's file may
hold other projects' sections; torchdroid's schema applies once tasks.py is loaded).
"""

from __future__ import annotations

from typing import Any, Callable

_INSTALLED = False
_SCHEMA = False  # True once tasks.py loaded: files read from then on are checked against torchdroid's sections


def _exit(err) -> None:
    from invoke.exceptions import Exit

    raise Exit(f"torchdroid: {err.label}: {err}", code=err.exit_code)


def _yaml_problem(path: str, e: Exception):
    from toolchain.errors import UsageError

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


def _checked_loader(original: Callable, kind: str) -> Callable:
    def load(self, path) -> Any:
        import json

        from invoke import config as invoke_config

        from toolchain.errors import UsageError

        yaml_error = invoke_config.yaml.YAMLError  # Invoke's own (vendored) PyYAML
        try:
            data = original(self, path)
        except OSError as e:
            _unreadable(self, path, e)
            raise  # a project or user file that does not exist: Invoke skips it
        except SyntaxError as e:  # a Python config file (`invoke -f mine.py`)
            line = f", line {e.lineno}" if e.lineno else ""
            _exit(UsageError(f"cannot read the config file {path}{line}: {e.msg}",
                             cause="the file is not valid Python",
                             remedy=f"fix {path} at that line; a .py config file holds one dict per section, "
                                    "e.g. `convert = {\"weights\": \"random\"}`"))
        except (yaml_error, json.JSONDecodeError, UnicodeDecodeError) as e:
            if isinstance(e, yaml_error):
                _exit(_yaml_problem(str(path), e))
            _exit(UsageError(f"cannot read the config file {path}: {e}", remedy=f"fix or remove {path}"))
        except Exception as e:  # noqa: BLE001 - running the user's .py config can raise anything
            if kind != "py":
                raise
            _exit(UsageError(f"cannot read the config file {path}: running it raised {type(e).__name__}: {e}",
                             remedy=f"fix {path} (a .py config file holds one dict per section, e.g. "
                                    "`convert = {\"weights\": \"random\"}`), or use a YAML file"))
        if data is None:
            return {}
        if not isinstance(data, dict):
            _exit(UsageError(f"the config file {path} holds a {type(data).__name__}, not a mapping of sections",
                             remedy="write `section:` headers with indented `key: value` lines, e.g. "
                                    f"`deploy:` then `  iter: 200` (or move {path} away)"))
        _empty_sections_as_mappings(self, data)
        if _SCHEMA:
            _check_sections(self, data, str(path))
        return data

    load.__name__ = f"_load_{kind}"
    return load


def _unreadable(config, path, e: OSError) -> None:
    """`-f FILE` that does not exist would be skipped silently by Invoke; a directory or no permission traces back."""
    import errno

    from toolchain.errors import UsageError

    asked = getattr(config, "_runtime_path", None)
    if e.errno == errno.ENOENT and (asked is None or str(asked) != str(path)):
        return
    why = "it does not exist" if e.errno == errno.ENOENT else (e.strerror or str(e))
    if asked is not None and str(asked) == str(path):
        remedy = "give `invoke -f` (or INVOKE_RUNTIME_CONFIG) a readable YAML or JSON file"
    else:  # ~/.invoke.yaml, /etc/invoke.yaml or the project's: Invoke reads it on every run
        remedy = f"make {path} a readable file, or move it away"
    _exit(UsageError(f"cannot read the config file {path}: {why}", remedy=remedy))


def _empty_sections_as_mappings(config, data: dict) -> None:
    """`convert:` with every key commented out is an empty section, not a value that cannot be merged."""
    from toolchain.settings import SECTIONS

    invoke_sections = {k for k, v in type(config).global_defaults().items() if isinstance(v, dict)}
    for top in list(data):
        if data[top] is None and (top in SECTIONS or top in invoke_sections):
            data[top] = {}


def _check_sections(config, data: dict, where: str) -> None:
    from toolchain.errors import TorchdroidError
    from toolchain.resolve import check_known_keys

    invoke_keys = tuple(type(config).global_defaults().keys())
    try:
        check_known_keys(data, where, invoke_keys)
    except TorchdroidError as e:
        _exit(e)


def _checked_runtime(original: Callable) -> Callable:
    def load_runtime(self, merge: bool = True) -> None:
        from toolchain.errors import UsageError

        path = getattr(self, "_runtime_path", None)
        kinds = tuple(getattr(self, "_file_suffixes", ("yaml", "yml", "json", "py")))
        if path and str(path).rsplit(".", 1)[-1] not in kinds:
            _exit(UsageError(f"the config file {path} is not a .yaml, .yml, .json or .py file",
                             remedy="rename it (e.g. mine.yaml) or give `invoke -f` a YAML or JSON file"))
        return original(self, merge)

    return load_runtime


def _checked_parse(original: Callable) -> Callable:
    """A command line Invoke cannot parse (unknown task or flag, a missing value) is a usage error, exit 2."""

    def parse_tasks(self) -> None:
        from invoke.exceptions import ParseError

        from toolchain.errors import UsageError

        try:
            return original(self)
        except ParseError as e:
            names = sorted(getattr(self.collection, "task_names", {}) or ()) if self.collection else []
            _exit(UsageError(str(e), remedy=_parse_fix(str(e), names)))

    return parse_tasks


def _parse_fix(message: str, tasks) -> str:
    import difflib
    import re

    word = re.search(r"'([^']+)'", message)
    close = difflib.get_close_matches(word.group(1), list(tasks), n=1) if word else []
    if close:
        return f"did you mean `invoke {close[0]}`? `invoke --list` lists the tasks"
    return "`invoke TASK --help` lists a task's options; `invoke --list` lists the tasks"


def _raw_env_value(self, old: Any, new: Any) -> Any:  # noqa: ARG001 - Invoke's signature
    """Keep the variable's text; toolchain.resolve types it and names the variable when it is wrong."""
    return new


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

    sys.excepthook = _closed_pipe_hook(sys.excepthook)
    atexit.register(_flush_stdout_at_exit)


def install_config_checks() -> None:
    """Wrap Invoke's config file loaders once per process (idempotent): a broken file is a usage error."""
    from invoke.config import Config

    if getattr(Config._load_yaml, "_torchdroid", False):
        return
    for kind in ("yaml", "yml", "json", "py"):
        load = _checked_loader(getattr(Config, f"_load_{kind}"), kind)
        load._torchdroid = True
        setattr(Config, f"_load_{kind}", load)


def install() -> None:
    """Patch Invoke's Config, Program and Environment once per process (idempotent)."""
    global _INSTALLED, _SCHEMA
    if _INSTALLED:
        return
    from invoke.config import Config
    from invoke.env import Environment
    from invoke.program import Program

    install_config_checks()
    _SCHEMA = True
    Config.load_runtime = _checked_runtime(Config.load_runtime)
    Program.parse_tasks = _checked_parse(Program.parse_tasks)
    Environment._cast = _raw_env_value
    _quiet_closed_pipe()
    _INSTALLED = True
