"""Baselines that TRACE is compared against (see :mod:`trace_gym.compare`).

* :mod:`~trace_gym.baselines.gepa_adapter` — GEPA prompt optimization of the agent instruction.
"""
