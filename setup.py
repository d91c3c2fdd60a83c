"""The one thing pyproject.toml cannot declare: ``torchdroid-invoke.pth`` at the top of site-packages.

Invoke reads ``~/.invoke.yaml`` before it imports tasks.py, so a broken file there can only be reported
cleanly by code that is in place before Invoke starts: the ``.pth`` line imports
:mod:`workflow.invoke_startup`, which waits for ``invoke.config`` (docs/architecture.md, "Invoke's config
files").  A regular wheel gets the file from ``build_lib``; an editable install (PEP 660, ``pip install
-e``) is a wheel made from setuptools' install directory, where the file is written instead.
"""

from __future__ import annotations

import os

from setuptools import Command, setup
from setuptools.command.build import build

PTH_NAME = "torchdroid-invoke.pth"
# Lines of a .pth file that start with `import` are run by site.py at every interpreter start. An older
# checkout without the module (editable installs follow the source tree) must not print an error each time.
PTH_LINE = 'import sys; exec("try:\\n import workflow.invoke_startup\\nexcept ImportError:\\n pass")\n'


class build_invoke_pth(Command):
    description = f"write {PTH_NAME} (checks Invoke's user config file before Invoke reads it)"
    user_options: list = []

    def initialize_options(self) -> None:
        self.build_lib = None
        self.editable_mode = False  # set by setuptools' editable_wheel

    def finalize_options(self) -> None:
        self.set_undefined_options("build", ("build_lib", "build_lib"))

    def _target(self) -> str:
        if self.editable_mode:
            return self.get_finalized_command("install").install_lib
        return self.build_lib

    def run(self) -> None:
        os.makedirs(self._target(), exist_ok=True)
        with open(os.path.join(self._target(), PTH_NAME), "w", encoding="utf-8") as f:
            f.write(PTH_LINE)

    def get_outputs(self) -> list:  # editable: the file is in the wheel already, not a build output to link
        return [] if self.editable_mode else [os.path.join(self.build_lib, PTH_NAME)]

    def get_source_files(self) -> list:
        return []


class build_with_invoke_pth(build):
    sub_commands = [*build.sub_commands, ("build_invoke_pth", None)]


setup(cmdclass={"build": build_with_invoke_pth, "build_invoke_pth": build_invoke_pth})
