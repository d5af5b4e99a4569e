"""Shared fixtures: test-only environments are registered under ``trace-test/``."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from trace_gym.datadirs import DataDirError, tau2_data_dir, toolsandbox_data_dir  # noqa: E402

settings.register_profile("ci", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

import tests.core.counter_env  # noqa: E402,F401  (registers trace-test/counter-v0)


@pytest.fixture(scope="session")
def tau2_data():
    """The τ²-bench data folder; tests that take it skip cleanly when the data is absent
    (the reason names ``trace-gym data fetch tau2``).  A module whose every test reads the
    data says ``pytestmark = pytest.mark.usefixtures("tau2_data")``."""
    try:
        return tau2_data_dir()
    except DataDirError as exc:
        pytest.skip(f"τ²-bench data not available: {exc}")


@pytest.fixture(scope="session")
def toolsandbox_data():
    """The ToolSandbox data folder; tests that take it skip cleanly when the data is absent
    (the reason names ``trace-gym data fetch toolsandbox``)."""
    try:
        return toolsandbox_data_dir()
    except DataDirError as exc:
        pytest.skip(f"ToolSandbox data not available: {exc}")


def _data_missing() -> bool:
    """True when some benchmark's data is absent on this machine."""
    for find in (tau2_data_dir, toolsandbox_data_dir):
        try:
            find()
        except DataDirError:
            return True
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that stops on ``DataDirError`` while that data really is absent is skipped, not failed
    (its reason names ``trace-gym data fetch``); with the data present the same error still fails."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed and call.excinfo.errisinstance(DataDirError) and _data_missing():
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: benchmark data not available: {call.excinfo.value}")


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
