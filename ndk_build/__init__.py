"""build-android: PyTorch Mobile from a lane's pinned commit, lane compatibility and the doctor.

Entry points (plain values in, typed results out; tasks.py only wires them):
:func:`build_android` (``invoke build-android``), :func:`check_compat`
(``invoke check-compat``; also for deploy/make-app wiring) and :func:`run_doctor`
(``invoke doctor``).  torch is imported only inside the compat checks.
"""

from .build import BuildResult, BuildSettings, build_android
from .compat import CompatReport, check_compat
from .doctor import Check, DoctorSettings, problems, run_doctor

__all__ = [
    "BuildResult", "BuildSettings", "build_android",
    "CompatReport", "check_compat",
    "Check", "DoctorSettings", "problems", "run_doctor",
]
