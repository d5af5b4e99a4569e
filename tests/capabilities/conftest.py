"""Fixtures for the capability-environment tests (skip cleanly without the τ²-bench data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_gym.datadirs import DataDirError, tau2_data_dir

ENVS_DIR = Path(__file__).resolve().parents[2] / "envs"
SPEC_FILES = sorted(ENVS_DIR.glob("cap-*.yaml"))


@pytest.fixture(scope="session")
def tau2_data():
    try:
        return tau2_data_dir()
    except DataDirError as exc:
        pytest.skip(f"τ²-bench data not available: {exc}")
