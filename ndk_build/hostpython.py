"""Moved to :mod:`toolchain.tools.hostpython` (a tool like the others); kept so old imports work."""

from toolchain.tools.hostpython import BUILD_MODULES, PIP_NAMES, PROBE, HostPython  # noqa: F401
