"""Graded scores of an evaluation, overall and per report group, with bootstrap intervals.

A target whose reward is graded (ToolSandbox's milestone similarity) is reported the
way its benchmark reports it: the mean reward and the number of *perfect* episodes
(reward 1 within :data:`trace_gym.core.outcome.TOLERANCE`), overall and per report group
of its task source (a task counts in every group it belongs to, see
:func:`trace_gym.core.tasks.task_groups`), each mean with a percentile-bootstrap interval
that resamples tasks, the share of episodes the agent ended with a message to the user
(:attr:`trace_gym.rollout.Trajectory.ended_with_message`), and the refusal floor
(:mod:`trace_gym.eval.floor`) of the same tasks beside them when the evaluation played it.
:func:`graded_scores` reads one evaluation document
(:meth:`trace_gym.eval.harness.EvalReport.to_dict`); :func:`scores_table` draws several
side by side.  :func:`paired_scores` compares every report with the first one on the
tasks both played, per group (:func:`trace_gym.eval.metrics.paired_difference`), and
:func:`paired_table` draws it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.outcome import is_success
from .metrics import bootstrap_mean, paired_difference

__all__ = ["bootstrap_mean", "graded_scores", "scores_table", "attach_scores", "paired_scores", "paired_table", "OVERALL"]

OVERALL = "overall"
GroupsOf = Callable[[str], "str | Sequence[str]"]


def _summary(rewards: Mapping[str, Sequence[float]], floor: Mapping[str, float], ended: Mapping[str, Sequence[bool]],
             seed: int) -> dict[str, Any]:
    vals = [float(r) for v in rewards.values() for r in v]
    out: dict[str, Any] = {"n_tasks": len(rewards), "episodes": len(vals), "mean": bootstrap_mean(rewards, seed=seed),
                           "perfect": sum(is_success(r, 1.0) for r in vals)}
    ends = [bool(e) for t in rewards for e in ended.get(t, ())]
    if ends:
        out["ended"] = sum(ends) / len(ends)
    fl = [float(floor[t]) for t in rewards if t in floor]
    if fl:
        out["floor"] = {"mean": sum(fl) / len(fl), "perfect": sum(is_success(r, 1.0) for r in fl), "n_tasks": len(fl)}
    return out


def _as_groups(g: str | Sequence[str]) -> tuple[str, ...]:
    return (g,) if isinstance(g, str) else tuple(g)


def group_members(report: Mapping[str, Any], groups: GroupsOf | None = None) -> dict[str, list[str]]:
    """``group -> tasks`` of an evaluation document: each task in every group ``groups(task)`` names (default:
    the document's own ``task_groups``, else one group ``"all"``); groups sorted, tasks in report order."""
    known = report.get("task_groups") or {}
    out: dict[str, list[str]] = {}
    for task in report["rewards"]:
        names = _as_groups(groups(task)) if groups is not None else tuple(known.get(task) or ("all",))
        for g in names:
            out.setdefault(str(g), []).append(task)
    return dict(sorted(out.items()))


def graded_scores(report: Mapping[str, Any], groups: GroupsOf | None = None, *, seed: int = 0) -> dict[str, Any]:
    """``{"overall": ..., "groups": {group: ...}}`` of one evaluation document: tasks, episodes, mean reward
    with its 95% interval, perfect episodes, the share of episodes the agent ended (``ended``, when the
    document records it) and (when played) the refusal floor's mean and perfect count.  ``groups(task)``
    names a task's group or groups (default: the document's ``task_groups``)."""
    rewards: Mapping[str, Sequence[float]] = report["rewards"]
    floor = (report.get("refusal_floor") or {}).get("rewards") or {}
    ended = report.get("ended") or {}
    return {OVERALL: _summary(rewards, floor, ended, seed),
            "groups": {g: _summary({t: rewards[t] for t in ts}, floor, ended, seed)
                       for g, ts in group_members(report, groups).items()}}


def attach_scores(report: dict[str, Any], groups: GroupsOf | None = None, *, seed: int = 0) -> dict[str, Any]:
    """``report`` with its :func:`graded_scores` under ``"scores"`` (the same dict, returned)."""
    report["scores"] = graded_scores(report, groups, seed=seed)
    return report


def paired_scores(reports: Sequence[Mapping[str, Any]], *, seed: int = 0) -> dict[str, dict[str, Any]]:
    """``{name: {"vs": first name, "overall": diff, "groups": {group: diff}}}`` for every report after the
    first: the :func:`~trace_gym.eval.metrics.paired_difference` of its rewards minus the first report's, on
    the tasks both played, overall and per group of the first report (names: ``spec``, else ``policy``)."""
    if len(reports) < 2:
        return {}
    first = reports[0]
    base_name = str(first.get("spec") or first.get("policy"))
    members = group_members(first)
    out: dict[str, dict[str, Any]] = {}
    for rep in reports[1:]:
        name = str(rep.get("spec") or rep.get("policy"))
        a, b = first["rewards"], rep["rewards"]
        out[name] = {"vs": base_name, OVERALL: paired_difference(a, b, list(a), seed=seed),
                     "groups": {g: paired_difference(a, b, ts, seed=seed) for g, ts in members.items()}}
    return out


def _diff_cell(d: Mapping[str, Any], stacked: bool = False) -> str:
    counts = f"{d['wins']}/{d['losses']}/{d['ties']}"
    if stacked:
        from ..render import ci_cell

        return ci_cell(d["value"], d["low"], d["high"], counts, signed=True)
    return f"{d['value']:+.3f} [{d['low']:+.2f}, {d['high']:+.2f}] {counts}"


def paired_table(paired: Mapping[str, Mapping[str, Any]], title: str = "group", *,
                 stacked: bool = False) -> list[list[str]]:
    """Rows (header first) of :func:`paired_scores`: per group, ``mean [95% CI] wins/losses/ties`` of each
    report minus the first (empty without a second report); ``stacked`` cells put the interval over three
    lines for a terminal (:func:`trace_gym.render.ci_cell`)."""
    if not paired:
        return []
    names = list(paired)
    groups = sorted({g for p in paired.values() for g in p["groups"]})
    rows = [[title, *[f"{n} − {paired[n]['vs']}" for n in names]]]
    for g in [*groups, OVERALL]:
        cells = []
        for n in names:
            d = paired[n][OVERALL] if g == OVERALL else paired[n]["groups"].get(g)
            cells.append(_diff_cell(d, stacked) if d and d["n_tasks"] else "–")
        rows.append([g, *cells])
    return rows


def _cell(s: Mapping[str, Any], stacked: bool = False) -> str:
    m = s["mean"]
    if stacked:
        from ..render import ci_cell

        return ci_cell(m["value"], m["low"], m["high"], f"{s['perfect']}/{s['episodes']}",
                       *([f"ended {s['ended']:.0%}"] if "ended" in s else []))
    ended = f" · ended {s['ended']:.0%}" if "ended" in s else ""
    return f"{m['value']:.3f} [{m['low']:.2f}, {m['high']:.2f}] · {s['perfect']}/{s['episodes']}{ended}"


def scores_table(named: Mapping[str, Mapping[str, Any]], title: str, *, stacked: bool = False) -> list[list[str]]:
    """Rows (header first) of mean reward [95% CI] · perfect/episodes per group for each named scores
    document, with the refusal floor (mean · perfect/tasks) in the last column; ``stacked`` cells put the
    interval over three lines and each count on a line of its own, for a terminal."""
    names = list(named)
    groups: list[str] = sorted({g for s in named.values() for g in s["groups"]})
    rows = [[title, *names, "refusal floor"]]
    sep = "\n" if stacked else " · "
    for g in [*groups, OVERALL]:
        cells, floor = [], "–"
        for n in names:
            s = named[n][OVERALL] if g == OVERALL else named[n]["groups"].get(g)
            cells.append(_cell(s, stacked) if s else "–")
            if s and "floor" in s:
                floor = f"{s['floor']['mean']:.3f}{sep}{s['floor']['perfect']}/{s['floor']['n_tasks']}"
        rows.append([g, *cells, floor])
    return rows
