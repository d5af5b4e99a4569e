"""Fixtures for the capability-environment tests (``tau2_data`` comes from ``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

ENVS_DIR = Path(__file__).resolve().parents[2] / "envs"
SPEC_FILES = sorted(ENVS_DIR.glob("cap-*.yaml"))


@pytest.fixture
def env_data(env_id):
    """Skip (naming ``trace-gym data fetch``) when the data this capability env's domain needs is absent."""
    import gymnasium as gym

    from trace_gym.datadirs import DataDirError

    try:
        gym.make(env_id).close()
    except DataDirError as exc:
        pytest.skip(f"{env_id}: data not available: {exc}")
