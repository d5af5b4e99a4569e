"""Rollout accounting lives in :mod:`trace_gym.pipeline.budget`; re-exported here for compare's users."""

from ..pipeline.budget import FORMAT, BudgetedEnv, BudgetExceeded, RolloutBudget

__all__ = ["BudgetExceeded", "RolloutBudget", "BudgetedEnv", "FORMAT"]
