"""Test-only helpers for the appgen (make-app / build-app) tests."""
