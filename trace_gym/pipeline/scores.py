"""Graded scores of an evaluation, overall and per report group, with bootstrap intervals.

A target whose reward is graded (ToolSandbox's milestone similarity) is reported the
way its benchmark reports it: the mean reward and the number of *perfect* episodes
(reward 1 within :data:`trace_gym.core.outcome.TOLERANCE`), overall and per report group
of its task source, each mean with a percentile-bootstrap interval that resamples tasks,
and the refusal floor (:mod:`trace_gym.eval.floor`) of the same tasks beside them when
the evaluation played it.  :func:`graded_scores` reads one
:func:`~trace_gym.pipeline.learn.evaluate_policy` document; :func:`scores_table` draws
several side by side.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core.outcome import is_success

__all__ = ["bootstrap_mean", "graded_scores", "scores_table", "attach_scores"]


def bootstrap_mean(rewards: Mapping[str, Sequence[float]], *, n_boot: int = 1000, level: float = 0.95,
                   seed: int = 0) -> dict[str, float]:
    """Mean reward over every episode of ``rewards`` (task -> rewards per trial) and its interval (tasks resampled)."""
    per_task = [np.asarray(v, dtype=float) for v in rewards.values() if len(v)]
    if not per_task:
        return {"value": 0.0, "low": 0.0, "high": 0.0}
    means = np.array([v.mean() for v in per_task])
    value = float(np.concatenate(per_task).mean())
    if len(means) == 1:
        return {"value": value, "low": value, "high": value}
    rng = np.random.default_rng(seed)
    boots = means[rng.integers(0, len(means), size=(n_boot, len(means)))].mean(axis=1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return {"value": value, "low": float(min(lo, value)), "high": float(max(hi, value))}


def _summary(rewards: Mapping[str, Sequence[float]], floor: Mapping[str, float], seed: int) -> dict[str, Any]:
    vals = [float(r) for v in rewards.values() for r in v]
    out: dict[str, Any] = {"n_tasks": len(rewards), "episodes": len(vals), "mean": bootstrap_mean(rewards, seed=seed),
                           "perfect": sum(is_success(r, 1.0) for r in vals)}
    fl = [float(floor[t]) for t in rewards if t in floor]
    if fl:
        out["floor"] = {"mean": sum(fl) / len(fl), "perfect": sum(is_success(r, 1.0) for r in fl), "n_tasks": len(fl)}
    return out


def graded_scores(report: Mapping[str, Any], group: Callable[[str], str], *, seed: int = 0) -> dict[str, Any]:
    """``{"overall": ..., "groups": {group: ...}}`` of one evaluation document: tasks, episodes, mean reward
    with its 95% interval, perfect episodes and (when played) the refusal floor's mean and perfect count."""
    rewards: Mapping[str, Sequence[float]] = report["rewards"]
    floor = (report.get("refusal_floor") or {}).get("rewards") or {}
    by_group: dict[str, dict[str, Sequence[float]]] = {}
    for task, rs in rewards.items():
        by_group.setdefault(group(task), {})[task] = rs
    return {"overall": _summary(rewards, floor, seed),
            "groups": {g: _summary(rs, floor, seed) for g, rs in sorted(by_group.items())}}


def attach_scores(report: dict[str, Any], group: Callable[[str], str], *, seed: int = 0) -> dict[str, Any]:
    """``report`` with its :func:`graded_scores` under ``"scores"`` (the same dict, returned)."""
    report["scores"] = graded_scores(report, group, seed=seed)
    return report


def _cell(s: Mapping[str, Any]) -> str:
    m = s["mean"]
    return f"{m['value']:.3f} [{m['low']:.2f}, {m['high']:.2f}] · {s['perfect']}/{s['episodes']}"


def scores_table(named: Mapping[str, Mapping[str, Any]], title: str) -> list[list[str]]:
    """Rows (header first) of mean reward [95% CI] · perfect/episodes per group for each named scores
    document, with the refusal floor (mean · perfect/tasks) in the last column."""
    names = list(named)
    groups: list[str] = sorted({g for s in named.values() for g in s["groups"]})
    rows = [[title, *names, "refusal floor"]]
    for g in [*groups, "overall"]:
        cells, floor = [], "–"
        for n in names:
            s = named[n]["overall"] if g == "overall" else named[n]["groups"].get(g)
            cells.append(_cell(s) if s else "–")
            if s and "floor" in s:
                floor = f"{s['floor']['mean']:.3f} · {s['floor']['perfect']}/{s['floor']['n_tasks']}"
        rows.append([g, *cells, floor])
    return rows
