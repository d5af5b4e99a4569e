"""Shared fixtures: test-only environments are registered under ``trace-test/``."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from trace_gym.data import tau2_data_dir, toolsandbox_data_dir  # noqa: E402

settings.register_profile("ci", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

import tests.core.counter_env  # noqa: E402,F401  (registers trace-test/counter-v0)


@pytest.fixture(scope="session")
def tau2_data():
    """The τ²-bench data root the engines read (the packaged copy unless a data variable or the cache says
    otherwise); a test that needs the conformance corpora asks :mod:`tests.corpora`."""
    return tau2_data_dir()


@pytest.fixture(scope="session")
def toolsandbox_data():
    """The ToolSandbox data folder the engines read (see :func:`tau2_data`)."""
    return toolsandbox_data_dir()


@pytest.fixture(scope="session")
def one_torch_thread():
    """One intra-op thread: on a small shared CPU, OpenMP threads spinning against each other make
    the tiny model's matmuls ~30x slower (no-op without torch)."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def private_dir():
    """A folder outside pytest's shared base temp dir: concurrent pytest sessions on the same
    machine prune each other's old base temp dirs, which would delete artifacts mid-test."""
    import shutil
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(prefix="trace-gym-test-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)
