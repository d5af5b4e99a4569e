"""Capability-targeted training environments, compiled from schema-validated spec files.

A spec (``envs/<id>.yaml``) names a target domain, the tools exposed (with the target's
exact schemas), a seeded synthetic database, scenario cases with slots, a scripted user,
a reference solution and weighted capability checks.  :class:`CapabilityEnv` turns it
into a Gymnasium environment; no code from a spec is ever executed.
"""

from __future__ import annotations

from .env import CapabilityEnv
from .rewards import EpisodeLog, evaluate_rewards
from .scenario import UnsolvableScenarioError
from .spec import CapabilitySpec, SpecError, load_spec, parse_spec, schema

__all__ = [
    "CapabilityEnv", "CapabilitySpec", "EpisodeLog", "SpecError", "UnsolvableScenarioError", "evaluate_rewards", "load_spec",
    "parse_spec", "schema",
]
