"""Gymnasium ids of the τ²-bench environments (read by :mod:`trace_gym.registration`)."""

from __future__ import annotations

from trace_gym.registration import EnvEntry

__all__ = ["ENV_ENTRIES", "env_id_for"]

_ENTRY_POINT = "trace_gym.tau2.env:Tau2Env"

ENV_ENTRIES: list[EnvEntry] = [
    EnvEntry("trace/tau2-airline-v0", _ENTRY_POINT,
             "τ²-bench airline: bookings, changes and cancellations under a strict policy (offline user by default)",
             {"domain": "airline"}, family="tau2", domain="airline"),
    EnvEntry("trace/tau2-retail-v0", _ENTRY_POINT,
             "τ²-bench retail: orders, returns, exchanges and account changes (offline user by default)",
             {"domain": "retail"}, family="tau2", domain="retail"),
    EnvEntry("trace/tau2-telecom-v0", _ENTRY_POINT,
             "τ²-bench telecom: technical support where the user operates their own phone (offline user by default)",
             {"domain": "telecom"}, family="tau2", domain="telecom"),
    EnvEntry("trace/tau2-mock-v0", _ENTRY_POINT,
             "τ²-bench mock: a tiny task-manager domain for smoke tests (offline user by default)",
             {"domain": "mock"}, family="tau2", domain="mock"),
]


def env_id_for(domain: str) -> str:
    """The registered env id of a τ²-bench domain (``retail`` → its entry's id)."""
    for entry in ENV_ENTRIES:
        if entry.kwargs.get("domain") == domain:
            return entry.id
    known = sorted(e.kwargs["domain"] for e in ENV_ENTRIES)
    raise ValueError(f"τ²-bench has no domain {domain!r}; its domains are {known}")
