"""TRACE against GRPO-on-target and GEPA at an equal rollout budget (``trace-gym compare``).

A front-end over :mod:`trace_gym.pipeline`, which holds the TRACE loop, the stage store
and the rollout budget:

* :mod:`~trace_gym.compare.config` — :class:`CompareConfig`, the settings stored with every result;
* :mod:`~trace_gym.compare.methods` — models, task splits, budgeted target envs;
* :mod:`~trace_gym.compare.reference` — the reference rows ``joint`` and ``oracle``;
* :mod:`~trace_gym.compare.resume` and :mod:`~trace_gym.compare.pool` — resuming with changed settings, pooling folds;
* :mod:`~trace_gym.compare.pipeline` — the baselines, the comparison driver
  :func:`run_compare` / :func:`run_scaling` (TRACE is :func:`trace_gym.pipeline.run_trace`);
* :mod:`~trace_gym.compare.report` — table, plots and redraw from the stored JSON;
* :mod:`~trace_gym.compare.budget` — :class:`RolloutBudget` (re-exported from the pipeline).
"""

from __future__ import annotations

from ..pipeline.budget import BudgetedEnv, BudgetExceeded, RolloutBudget

__all__ = ["RolloutBudget", "BudgetExceeded", "BudgetedEnv"]
