"""The refusal floor: what an agent that refuses everything scores on a target.

Some benchmarks give credit for refusing: ToolSandbox's insufficient-information
scenarios score 1.0 for any answer that changes nothing, so incoherent text scores
there too.  A number is only meaningful beside that floor.  :class:`RefusalPolicy`
answers every turn with the same refusal; :func:`refusal_floor` plays it once per task
(it is deterministic) and gives its reward per task.  An evaluation adds the floor by
itself when the env's task source says rewards on its tasks have one
(``refusal_floor = True``, an optional task-source attribute), or when asked.

Where a number claims learning, leave out the groups where refusing already earns
credit: :func:`refusal_credited_groups` names them from the floor itself (no group
name is written here), and ``evaluate(..., exclude_groups=...)`` skips them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["REFUSAL", "RefusalPolicy", "refusal_floor", "floor_by_group", "refusal_credited_groups", "wants_floor"]

REFUSAL = "I'm sorry, but I can't help with that."


class RefusalPolicy:
    """Refuses every request with one fixed sentence; never calls a tool."""

    policy_id = "refusal-floor"
    batchable = True

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return REFUSAL


def wants_floor(source: Any) -> bool:
    """Whether a task source says its rewards have a refusal floor worth reporting."""
    return bool(getattr(source, "refusal_floor", False))


def refusal_floor(env_id: str, tasks: Sequence[str], *, store: str | Path | None = None, base_seed: int = 0,
                  env_kwargs: Mapping[str, Any] | None = None,
                  extra_options: Mapping[str, Any] | None = None) -> tuple[dict[str, float], int]:
    """The refusal policy's reward on each task (one episode each, seed ``base_seed``) and the episodes played.

    Episodes are kept in ``store`` under the refusal policy's id, so a resumed evaluation
    does not play them again.
    """
    from ..core.tasks import task_source_for
    from ..rollout import TrajectoryStore, collect, episode_key

    source = task_source_for(env_id, dict(env_kwargs or {}))
    st = TrajectoryStore(store) if store is not None else None
    by_key = {tr.key: tr for tr in st.load()} if st is not None else {}
    policy = RefusalPolicy()
    out: dict[str, float] = {}
    played = 0
    for task in tasks:
        opts = {**source.reset_options(str(task)), **(extra_options or {})}
        new = collect(env_id, policy, [base_seed], store=st, options=opts, env_kwargs=dict(env_kwargs or {}) or None)
        played += len(new)
        for tr in new:
            by_key[tr.key] = tr
        out[str(task)] = float(by_key[episode_key(env_id, policy.policy_id, base_seed, opts)].reward)
    return out, played


def floor_by_group(floor: Mapping[str, float], groups: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """The mean refusal-floor reward of each group's tasks."""
    out = {}
    for g, ts in groups.items():
        vals = [floor[t] for t in ts if t in floor]
        if vals:
            out[g] = sum(vals) / len(vals)
    return out


def refusal_credited_groups(env_id: str, tasks: Sequence[str] | None = None, *, threshold: float = 0.5,
                            env_kwargs: Mapping[str, Any] | None = None, base_seed: int = 0) -> list[str]:
    """The report groups where refusing everything already scores at least ``threshold`` on average.

    ``tasks`` defaults to the env's default split.  These are the groups to leave out
    (``evaluate(..., exclude_groups=...)``) where a number claims that an agent learned.
    """
    from ..core.tasks import task_groups, task_source_for

    source = task_source_for(env_id, dict(env_kwargs or {}))
    ids = [str(t) for t in (tasks if tasks is not None else source.task_ids(None))]
    floor, _ = refusal_floor(env_id, ids, base_seed=base_seed, env_kwargs=env_kwargs)
    groups: dict[str, list[str]] = defaultdict(list)
    for t in ids:
        for g in task_groups(source, t):
            groups[g].append(t)
    return sorted(g for g, v in floor_by_group(floor, groups).items() if v >= threshold)
