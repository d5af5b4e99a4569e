"""pass^k and its bootstrap confidence interval.

τ²-bench's pass^k is the probability that *all* k i.i.d. trials of a task succeed,
estimated per task from n ≥ k trials with c successes as ``C(c, k) / C(n, k)`` and
averaged over tasks.  pass^1 is the mean success rate.  The interval resamples tasks
with replacement (percentile bootstrap, seeded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb

import numpy as np

__all__ = ["task_pass_hat_k", "pass_hat_k", "bootstrap_pass_hat_k", "PassK"]


def task_pass_hat_k(successes: Sequence[bool], k: int) -> float:
    n, c = len(successes), sum(bool(s) for s in successes)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n < k:
        raise ValueError(f"pass^{k} needs at least {k} trials per task, got {n}")
    return comb(c, k) / comb(n, k)


def pass_hat_k(results: Mapping[str, Sequence[bool]], k: int) -> float:
    """Mean over tasks of ``C(c, k) / C(n, k)``."""
    if not results:
        raise ValueError("pass^k of no tasks is undefined")
    return float(np.mean([task_pass_hat_k(v, k) for v in results.values()]))


@dataclass(frozen=True)
class PassK:
    k: int
    value: float
    low: float
    high: float
    n_tasks: int

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap_pass_hat_k(results: Mapping[str, Sequence[bool]], k: int, *, n_boot: int = 1000, level: float = 0.95,
                         seed: int = 0) -> PassK:
    per_task = np.array([task_pass_hat_k(v, k) for v in results.values()], dtype=float)
    value = float(per_task.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per_task), size=(n_boot, len(per_task)))
    means = per_task[idx].mean(axis=1)
    alpha = (1 - level) / 2
    return PassK(k, value, float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)), len(per_task))
