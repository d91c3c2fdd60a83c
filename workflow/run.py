"""What every task does around its one call: check the config, log to a file, turn errors into exit codes."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from invoke import Exit

from toolchain.layout import Layout


def refuse_dry(config: Any, name: str) -> None:
    """``invoke --dry TASK``: Invoke's dry run only covers ``c.run`` commands, which torchdroid does not use."""
    run = config.get("run", {}) if hasattr(config, "get") else {}
    if run and run.get("dry"):
        raise Exit(f"torchdroid {name}: bad input: --dry is not supported by `{name}`\n"
                   "  cause: Invoke's --dry only echoes shell commands run through Invoke; torchdroid's tasks call "
                   "their tools directly, so a dry run would silently do the real work\n"
                   "  fix: run without --dry; `invoke clean --dry-run` previews a clean, and each task's --help "
                   "says what it writes", code=2)


@contextlib.contextmanager
def stage(config: Any, name: str, debug: bool = False, allow_dry: bool = False) -> Iterator[Any]:
    """Check every config value, log to <build_dir>/logs, turn a TorchdroidError into a clean message and exit code."""
    from toolchain.errors import TorchdroidError
    from toolchain.logs import setup_logging
    from toolchain.resolve import Resolver, check_config

    if not allow_dry:
        refuse_dry(config, name)
    try:
        check_config(config)  # every key from every source, before any work starts
        resolver = Resolver(config)
        debug = bool(debug) or resolver.get("debug")
        build_dir = resolver.path("build_dir")
    except TorchdroidError as e:
        raise Exit(f"torchdroid {name}: {e.label}: {e}", code=e.exit_code) from None
    log_path = setup_logging(build_dir, name, debug)
    _rotate_logs(build_dir, resolver)
    try:
        yield log_path
    except TorchdroidError as e:
        if debug:
            raise
        raise Exit(f"torchdroid {name}: {e.label}: {e}\n  (run log: {log_path}; --debug shows the traceback)",
                   code=e.exit_code) from e
    except KeyboardInterrupt:
        raise Exit(f"torchdroid {name}: interrupted (nothing half-written was left under a final name)",
                   code=130) from None


def _rotate_logs(build_dir, resolver) -> None:
    from toolchain.logs import rotate_logs

    try:
        rotate_logs(Layout(build_dir).logs, keep=resolver.get("clean.keep_logs"))
    except OSError:  # rotation never fails a run
        pass
