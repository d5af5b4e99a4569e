"""pass^k and its bootstrap confidence interval: the library's one pass^k.

τ²-bench's pass^k is the probability that *all* k i.i.d. trials of a task succeed,
estimated per task from n ≥ k trials with c successes as ``C(c, k) / C(n, k)`` and
averaged over tasks.  pass^1 is the mean success rate.  A trial's outcome is a
boolean or a reward; a reward succeeds by :func:`trace_gym.core.outcome.is_success`
(reward 1 within 1e-6 by default).  The interval resamples tasks with replacement
(percentile bootstrap, seeded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

import numpy as np

from ..core.outcome import DEFAULT_THRESHOLD, is_success

__all__ = ["task_pass_hat_k", "pass_hat_k", "bootstrap_pass_hat_k", "PassK"]

Outcomes = Mapping[Any, Sequence[Any]] | Sequence[Sequence[Any]]


def task_pass_hat_k(outcomes: Sequence[Any], k: int, threshold: float = DEFAULT_THRESHOLD) -> float:
    """``C(c, k) / C(n, k)`` for one task's ``n`` trial outcomes (booleans or rewards) with ``c`` successes."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    n, c = len(outcomes), sum(1 for o in outcomes if is_success(o, threshold))
    if n < k:
        raise ValueError(f"pass^{k} needs at least {k} trials per task, got {n}")
    return comb(c, k) / comb(n, k)


def _per_task(results: Outcomes, k: int, threshold: float) -> list[float]:
    groups = list(results.values()) if isinstance(results, Mapping) else list(results)
    if not groups:
        raise ValueError("pass^k of no tasks is undefined")
    return [task_pass_hat_k(g, k, threshold) for g in groups]


def pass_hat_k(results: Outcomes, k: int, threshold: float = DEFAULT_THRESHOLD) -> float:
    """Mean over tasks of ``C(c, k) / C(n, k)``; ``results`` maps each task (or lists, per task) to its trials' outcomes."""
    return float(np.mean(_per_task(results, k, threshold)))


@dataclass(frozen=True)
class PassK:
    k: int
    value: float
    low: float
    high: float
    n_tasks: int

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap_pass_hat_k(results: Outcomes, k: int, *, n_boot: int = 1000, level: float = 0.95,
                         seed: int = 0, threshold: float = DEFAULT_THRESHOLD) -> PassK:
    per_task = np.array(_per_task(results, k, threshold), dtype=float)
    value = float(per_task.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per_task), size=(n_boot, len(per_task)))
    means = per_task[idx].mean(axis=1)
    alpha = (1 - level) / 2
    return PassK(k, value, float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)), len(per_task))
