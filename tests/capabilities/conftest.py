"""Fixtures for the capability-environment tests (``tau2_data`` comes from ``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

ENVS_DIR = Path(__file__).resolve().parents[2] / "envs"
SPEC_FILES = sorted(ENVS_DIR.glob("cap-*.yaml"))
