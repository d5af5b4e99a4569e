"""Capability-targeted training environments, compiled from schema-validated spec files.

A spec (``envs/<id>.yaml``) names a target domain, the tools exposed (with the target's
exact schemas), a seeded synthetic database, scenario cases with slots, a scripted user,
a reference solution and weighted capability checks.  :class:`CapabilityEnv` turns it
into a Gymnasium environment; no code from a spec is ever executed.

Names are imported on first use, so ``import trace_gym`` (which reads only the entries
list) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "CapabilityEnv", "CapabilitySpec", "EpisodeLog", "SpecError", "UnsolvableScenarioError", "evaluate_rewards", "load_spec",
    "parse_spec", "schema",
]

_HOMES = {
    "CapabilityEnv": ".env", "EpisodeLog": ".rewards", "evaluate_rewards": ".rewards", "UnsolvableScenarioError": ".scenario",
    "CapabilitySpec": ".spec", "SpecError": ".spec", "load_spec": ".spec", "parse_spec": ".spec", "schema": ".spec",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
