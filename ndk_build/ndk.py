"""Moved to :mod:`toolchain.tools.ndk` (every stage can ask the NDK); kept so old imports work."""

from toolchain.tools.ndk import (TOOLCHAIN_FILE, Ndk, in_range, parse_revision, read_source_properties,  # noqa: F401
                                 release_name, validate_api_level)
