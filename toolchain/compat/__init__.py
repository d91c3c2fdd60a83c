"""check-compat: can this Android runtime (a build, or a published pytorch_android) run these models?

Serves build-android, make-app and deploy; torch is imported only inside the operator comparison.
"""

from .check import CompatReport, Finding, check_compat

__all__ = ["CompatReport", "Finding", "check_compat"]
