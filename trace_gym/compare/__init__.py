"""TRACE against GRPO-on-target and GEPA at an equal rollout budget (``trace-gym compare``).

* :mod:`~trace_gym.compare.budget` — :class:`RolloutBudget`, the per-stage rollout ledger;
* :mod:`~trace_gym.compare.methods` — models, task splits, budgeted envs, adapter training;
* :mod:`~trace_gym.compare.pipeline` — the resumable stages and :func:`run_compare` / :func:`run_scaling`;
* :mod:`~trace_gym.compare.report` — table, plots and redraw from the stored JSON.
"""

from __future__ import annotations

from .budget import BudgetedEnv, BudgetExceeded, RolloutBudget

__all__ = ["RolloutBudget", "BudgetExceeded", "BudgetedEnv"]
