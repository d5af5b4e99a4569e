"""pass^k, mean reward and paired differences with bootstrap intervals: the library's one of each.

τ²-bench's pass^k is the probability that *all* k i.i.d. trials of a task succeed,
estimated per task from n ≥ k trials with c successes as ``C(c, k) / C(n, k)`` and
averaged over tasks.  pass^1 is the mean success rate.  A trial's outcome is a
boolean or a reward; a reward succeeds by :func:`trace_gym.core.outcome.is_success`
(reward 1 within 1e-6 by default).  The interval resamples tasks with replacement
(percentile bootstrap, seeded).

:func:`bootstrap_mean` is the mean reward over every episode with the same task-resampling
interval.  :func:`paired_difference` compares two policies that played the same tasks: per
task, the difference of their mean rewards over trials; its mean, a paired bootstrap
interval (tasks resampled, both policies' values of a task kept together) and the count of
tasks where the second policy did better, worse or the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

import numpy as np

from ..core.outcome import DEFAULT_THRESHOLD, is_success

__all__ = ["task_pass_hat_k", "pass_hat_k", "bootstrap_pass_hat_k", "PassK", "bootstrap_mean", "paired_difference",
           "TIE"]

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


def _interval(per_task: np.ndarray, value: float, n_boot: int, level: float, seed: int) -> tuple[float, float]:
    """Percentile-bootstrap interval of the mean of ``per_task`` (tasks resampled), widened to hold ``value``."""
    if len(per_task) < 2:
        return value, value
    rng = np.random.default_rng(seed)
    boots = per_task[rng.integers(0, len(per_task), size=(n_boot, len(per_task)))].mean(axis=1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(min(lo, value)), float(max(hi, value))


def bootstrap_mean(rewards: Mapping[str, Sequence[float]], *, n_boot: int = 1000, level: float = 0.95,
                   seed: int = 0) -> dict[str, float]:
    """Mean reward over every episode of ``rewards`` (task -> rewards per trial) and its interval (tasks resampled)."""
    per_task = [np.asarray(v, dtype=float) for v in rewards.values() if len(v)]
    if not per_task:
        return {"value": 0.0, "low": 0.0, "high": 0.0}
    value = float(np.concatenate(per_task).mean())
    lo, hi = _interval(np.array([v.mean() for v in per_task]), value, n_boot, level, seed)
    return {"value": value, "low": lo, "high": hi}


TIE = 1e-9  # per-task differences smaller than this count as ties


def paired_difference(first: Mapping[str, Sequence[float]], second: Mapping[str, Sequence[float]],
                      tasks: Sequence[str] | None = None, *, n_boot: int = 1000, level: float = 0.95,
                      seed: int = 0) -> dict[str, Any]:
    """``second − first`` on the tasks both played (``tasks``: only these).

    Per task, the difference of the mean rewards over each side's trials; returns the mean of
    those differences (``value``) with a paired percentile-bootstrap interval (``low``,
    ``high``: tasks resampled with replacement, seeded), ``n_tasks``, and ``wins`` / ``losses``
    / ``ties``: tasks where ``second`` scored higher, lower, or within :data:`TIE`.
    """
    ids = [t for t in (tasks if tasks is not None else first) if t in first and t in second and len(first[t]) and len(second[t])]
    if not ids:
        return {"value": 0.0, "low": 0.0, "high": 0.0, "n_tasks": 0, "wins": 0, "losses": 0, "ties": 0}
    d = np.array([float(np.mean(second[t])) - float(np.mean(first[t])) for t in ids])
    value = float(d.mean())
    lo, hi = _interval(d, value, n_boot, level, seed)
    return {"value": value, "low": lo, "high": hi, "n_tasks": len(ids), "wins": int((d > TIE).sum()),
            "losses": int((d < -TIE).sum()), "ties": int((np.abs(d) <= TIE).sum())}
