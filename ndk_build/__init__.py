"""build-android and check-compat: PyTorch Mobile from a lane's pinned commit, and whether a runtime suits the
converted models.

Entry points (plain values in, typed results out; tasks.py only wires them): :func:`build_android`
(``invoke build-android``) and :func:`check_compat` (``invoke check-compat``; also for make-app and deploy
wiring).  torch is imported only inside the compat checks.
"""

from .build import BuildResult, BuildSettings, build_android
from .compat import CompatReport, check_compat

__all__ = ["BuildResult", "BuildSettings", "build_android", "CompatReport", "check_compat"]
