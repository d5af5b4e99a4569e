"""Shared fixtures: test-only environments are registered under ``trace-test/``."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

import tests.core.counter_env  # noqa: E402,F401  (registers trace-test/counter-v0)
