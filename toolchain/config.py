"""Moved: every option and config key is declared once in :mod:`toolchain.settings`.

Values are read, typed and checked by :mod:`toolchain.resolve` (``Resolver``), one function per stage in
``workflow/stage_settings.py``.  ``DEFAULTS`` stays for code that wants the nested dict of defaults.
"""

from __future__ import annotations

from .settings import config_defaults

DEFAULTS: dict = config_defaults()
