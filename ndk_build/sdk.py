"""Moved to :mod:`toolchain.tools.sdk` (one AndroidSdk for build-android, build-app and doctor)."""

from toolchain.tools.sdk import MARKERS, AndroidSdk  # noqa: F401
