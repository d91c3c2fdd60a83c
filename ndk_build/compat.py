"""Moved to the top-level :mod:`compat` package (it serves every stage); kept so old imports work."""

from toolchain.compat.check import (FUNC_RE, INCOMPATIBLE, OK, SCHEMA_RE, UNKNOWN, CompatReport, Finding,  # noqa: F401
                          ModelNeeds, RuntimeSource, check_compat, file_format_version, model_needs)
