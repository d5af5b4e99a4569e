"""The target environment of a TRACE run, as the pipeline sees it.

:class:`Target` is a full env id plus its constructor kwargs.  Everything else the
pipeline needs from it — which reset options play a task, the tool domain capability
envs are synthesized for, the reward that counts as success, the task ids of a split —
it asks the env (its :class:`~trace_gym.core.tasks.TaskSource` and its declared success
threshold); it never takes an env id apart.  ``success`` overrides the env's threshold for
one run: a target whose reward is a graded similarity (ToolSandbox's milestone
similarity, whose own threshold is a perfect 1.0) can count a partly right episode as a
success for the analysis's contrast and the router's "no adapter" examples, while
reports still give the perfect count beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import gymnasium as gym

from ..core.outcome import success_threshold
from ..core.tasks import TaskSource, task_source
from .budget import BudgetedEnv, RolloutBudget

__all__ = ["Target"]


@dataclass
class Target:
    """A target env id with its kwargs; the questions the pipeline asks about it are answered by the env."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    success: float | None = None  # the reward that counts as success in this run (None: the env's own)

    def make(self, budget: RolloutBudget | None = None, stage: str = "", overrides: dict[str, Any] | None = None) -> gym.Env:
        """A fresh instance (``overrides`` on top of the kwargs), charging ``budget`` for ``stage`` when given."""
        env: gym.Env = gym.make(self.env_id, disable_env_checker=True, **{**self.env_kwargs, **(overrides or {})})
        if budget is not None:
            env = BudgetedEnv(env, budget, stage)
        return env

    @cached_property
    def _probe(self) -> tuple[TaskSource, float]:
        env = gym.make(self.env_id, disable_env_checker=True, **self.env_kwargs)
        try:
            return task_source(env), success_threshold(env)
        finally:
            env.close()

    @property
    def source(self) -> TaskSource:
        """The env's task source (:class:`~trace_gym.core.tasks.NoTaskSourceError` when it offers none)."""
        return self._probe[0]

    @property
    def threshold(self) -> float:
        """The reward at which an episode of this target succeeds (``success``, else the env's own, else 1.0)."""
        return float(self.success) if self.success is not None else self._probe[1]

    @property
    def domain(self) -> str | None:
        """The tool domain capability envs are synthesized for (``None``: the target has none)."""
        return self.source.domain

    def reset_options(self, task: Any) -> dict[str, Any]:
        """The reset options that play ``task``."""
        return self.source.reset_options(str(task))

    def task_ids(self, split: str | None = None) -> list[str]:
        """The task ids of ``split`` (the env's default split when ``None``)."""
        return self.source.task_ids(split)
