"""Moved to the top-level :mod:`doctor` package (it serves every stage); kept so old imports work."""

from toolchain.doctor.checks import Check, DoctorSettings, problems, run_doctor  # noqa: F401
