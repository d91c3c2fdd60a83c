"""Shared fixtures.  Test-only substitutes for the physical boundary live under tests/."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("TORCHDROID_TEST", "1")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT
