"""`invoke doctor`: what this machine has for every stage, as typed facts with stable ids."""

from .checks import Check, DoctorSettings, problems, run_doctor

__all__ = ["Check", "DoctorSettings", "problems", "run_doctor"]
