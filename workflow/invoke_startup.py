"""Check Invoke's user and system config files before Invoke reads them (run by ``torchdroid-invoke.pth``).

Invoke builds its ``Config`` (which reads ``/etc/invoke.yaml`` and ``~/.invoke.yaml``) before it imports
tasks.py, so :func:`workflow.invoke_hooks.install` there comes too late for those two files: a YAML syntax
error or a list at the top ends in a traceback.  Invoke offers no earlier hook (no setting, variable or
entry point is read before that ``Config``), so the package installs ``torchdroid-invoke.pth`` (setup.py),
which imports this module at interpreter start.  It only puts a finder on ``sys.meta_path`` that answers
nothing but ``invoke.config``; when that module has been executed it wraps Invoke's file loaders
(:func:`workflow.invoke_hooks.install_config_checks`) and leaves ``sys.meta_path``.  A Python process that
never imports Invoke imports nothing else.
"""

from __future__ import annotations

import sys

WATCHED = "invoke.config"


class _AfterLoad:
    """Runs the real loader of ``invoke.config``, then wraps Invoke's config file loaders."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def __getattr__(self, name):  # get_source, get_filename, ...: the real loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        from workflow import invoke_hooks

        invoke_hooks.install_config_checks()


class WhenInvokeConfigLoads:
    """A ``sys.meta_path`` finder that only ever answers for ``invoke.config``, once."""

    def find_spec(self, name, path=None, target=None):
        if name != WATCHED:
            return None
        remove()
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _AfterLoad(spec.loader)
        return spec


def remove() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, WhenInvokeConfigLoads)]


def install() -> None:
    if WATCHED in sys.modules:  # imported already (never at interpreter start): wrap now
        from workflow import invoke_hooks

        invoke_hooks.install_config_checks()
    elif not any(isinstance(f, WhenInvokeConfigLoads) for f in sys.meta_path):
        sys.meta_path.insert(0, WhenInvokeConfigLoads())


install()
