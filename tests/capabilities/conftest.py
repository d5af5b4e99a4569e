"""Fixtures for the capability-environment tests (``tau2_data`` comes from ``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

ENVS_DIR = Path(__file__).resolve().parents[2] / "envs"
SPEC_FILES = sorted(ENVS_DIR.glob("cap-*.yaml"))


@pytest.fixture
def env_data(env_id):
    """The capability env can be made (its domain's data is packaged: a failure here is a failure)."""
    import gymnasium as gym

    gym.make(env_id).close()
