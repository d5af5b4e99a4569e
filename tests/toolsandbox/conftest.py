"""Shared fixtures of the ToolSandbox tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_gym.data import toolsandbox_data_dir


@pytest.fixture(scope="module")
def root() -> Path:
    """The ToolSandbox data folder the engine reads (the packaged copy unless a data variable or the cache says otherwise)."""
    return toolsandbox_data_dir()
