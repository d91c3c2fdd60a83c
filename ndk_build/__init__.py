"""build-android: PyTorch Mobile from a lane's pinned commit (compat and doctor live in their own packages
and are re-exported here for old callers).

Entry points (plain values in, typed results out; tasks.py only wires them):
:func:`build_android` (``invoke build-android``), :func:`check_compat`
(``invoke check-compat``; also for deploy/make-app wiring) and :func:`run_doctor`
(``invoke doctor``).  torch is imported only inside the compat checks.
"""

from toolchain.compat import CompatReport, check_compat
from toolchain.doctor import Check, DoctorSettings, problems, run_doctor

from .build import BuildResult, BuildSettings, build_android

__all__ = [
    "BuildResult", "BuildSettings", "build_android",
    "CompatReport", "check_compat",
    "Check", "DoctorSettings", "problems", "run_doctor",
]
