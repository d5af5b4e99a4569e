"""Gymnasium ids of the τ²-bench environments (read by :mod:`trace_gym.registration`)."""

from __future__ import annotations

from trace_gym.registration import EnvEntry

__all__ = ["ENV_ENTRIES"]

_ENTRY_POINT = "trace_gym.tau2.env:Tau2Env"

ENV_ENTRIES: list[EnvEntry] = [
    EnvEntry("trace/tau2-airline-v0", _ENTRY_POINT,
             "τ²-bench airline: bookings, changes and cancellations under a strict policy (offline user by default)",
             {"domain": "airline"}),
    EnvEntry("trace/tau2-retail-v0", _ENTRY_POINT,
             "τ²-bench retail: orders, returns, exchanges and account changes (offline user by default)",
             {"domain": "retail"}),
    EnvEntry("trace/tau2-telecom-v0", _ENTRY_POINT,
             "τ²-bench telecom: technical support where the user operates their own phone (offline user by default)",
             {"domain": "telecom"}),
    EnvEntry("trace/tau2-mock-v0", _ENTRY_POINT,
             "τ²-bench mock: a tiny task-manager domain for smoke tests (offline user by default)",
             {"domain": "mock"}),
]
