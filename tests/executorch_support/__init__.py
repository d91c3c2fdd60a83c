"""Test-only helpers for the ExecuTorch lane."""
