"""Per-capability adapters or one joint adapter: chosen by outcomes on the learning tasks, not by belief.

With ``adapter_choice="select"`` the routing stage (``needs`` rule) plays both candidates on the first ``n``
learning tasks its gate hands to an adapter: *per-capability* (each task played by the adapter the router
picks for it) and *joint* (every task played by the joint adapter), each task with the seed ``seed + i`` and
its reset options, through budgeted target envs charged to the routing stage one rollout each (episodes kept
in a store, replayed on resume and charged again, as :func:`~trace_gym.pipeline.outcomes.play_outcomes` does).
The candidate with the higher mean reward is kept; a tie (or no task to play: ``n`` 0, or none the gate
passes) keeps per-capability adapters (the paper's method).  No held-out task takes part.

Errors: :class:`~trace_gym.pipeline.budget.BudgetExceeded` when the budget cannot cover the episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .outcomes import play_outcomes
from .settings import ADAPTER_CHOICES, JOINT_CHOICE, PER_CAPABILITY
from .stages import RolloutJob
from .target import Target

__all__ = ["AdapterSelection", "Selection", "select_adapters", "PER_CAPABILITY", "JOINT_CHOICE", "ADAPTER_CHOICES"]


@dataclass
class AdapterSelection:
    """How the routing stage plays the selection: ``n`` learning tasks, adapters loaded by ``load(name)`` (a
    policy acting with that adapter alone), episodes kept in ``store``, played in batches of ``batch_size``."""

    n: int
    load: Callable[[str], Any]
    store: Path
    batch_size: int = 1


@dataclass
class Selection:
    """What the selection played and chose: per task its per-capability route and both rewards."""

    choice: str
    n: int = 0
    mean: dict[str, float] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    rollouts: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"choice": self.choice, "n": self.n, "mean": self.mean, "rows": self.rows, "rollouts": self.rollouts}


def select_adapters(target: Target, tasks: list[str], route: Callable[[str], str], joint: str,
                    load: Callable[[str], Any], store: str | Path, *, n: int, seed: int, budget: Any = None,
                    batch_size: int = 1) -> Selection:
    """Play both candidates on the first ``n`` of ``tasks`` that ``route(task)`` (the router's label for a task's
    opening; ``none`` for the base model) hands to an adapter, and keep the better (module docstring).
    ``load(name)`` returns a policy acting with adapter ``name`` alone."""
    from ..route.base import NO_ADAPTER

    picked: list[tuple[int, str, str]] = []
    for i, t in enumerate(tasks if n > 0 else []):
        label = route(t)
        if label != NO_ADAPTER:
            picked.append((i, t, label))
        if len(picked) >= n:
            break
    if not picked:
        return Selection(PER_CAPABILITY)
    jobs = {t: RolloutJob("select", t, seed + i, None) for i, t, _ in picked}
    per_route: dict[str, list[RolloutJob]] = {}
    for _, t, label in picked:
        per_route.setdefault(joint if label == joint else label, []).append(jobs[t])
    before = budget.stage_used("routing") if budget is not None else 0
    played: dict[str, dict[str, Any]] = {}
    for name in sorted({*per_route, joint}):
        todo = list(jobs.values()) if name == joint else per_route[name]
        played[name] = play_outcomes(target, [name], todo, load, store, budget=budget, batch_size=batch_size)[name]
    rows = []
    for _, t, label in picked:
        rows.append({"task": t, "route": label, PER_CAPABILITY: float(played[label][t].reward),
                     JOINT_CHOICE: float(played[joint][t].reward)})
    mean = {c: sum(r[c] for r in rows) / len(rows) for c in (PER_CAPABILITY, JOINT_CHOICE)}
    choice = JOINT_CHOICE if mean[JOINT_CHOICE] > mean[PER_CAPABILITY] else PER_CAPABILITY
    used = (budget.stage_used("routing") - before) if budget is not None else sum(len(v) for v in played.values())
    return Selection(choice, len(rows), mean, rows, used)
