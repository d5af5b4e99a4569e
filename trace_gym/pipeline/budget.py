"""Rollout accounting for equal-budget comparisons.

A *rollout* is one environment episode that a method plays while it learns
(collecting data, calibrating, optimizing a prompt, training).  Held-out
evaluation is not charged: every method is evaluated the same way.

* :class:`RolloutBudget` holds a total ``B`` and a per-stage ledger.  ``charge``
  refuses (:class:`BudgetExceeded`) any rollout past ``B`` before it is played, and
  the ledger is written atomically to a JSON file after every change, so a killed
  run knows what it spent.
* :class:`BudgetedEnv` is a Gymnasium wrapper that charges one rollout on the
  first step of every episode.  A reset alone (e.g. a probe of the env's metadata)
  costs nothing; a refused episode raises before the wrapped env is stepped, so its
  state is unchanged.

When a stage is redone after an interruption, :meth:`RolloutBudget.start_stage`
sets that stage's count to what the stage keeps from the earlier attempt (0 when it
starts over), so a resumed run spends what an uninterrupted one would have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym

from ..io import atomic_write_json

__all__ = ["BudgetExceeded", "RolloutBudget", "BudgetedEnv"]

FORMAT = "trace-gym/rollout-budget@1"


class BudgetExceeded(RuntimeError):
    """A stage asked for more rollouts than the budget has left."""


class RolloutBudget:
    """At most ``total`` rollouts, counted per stage; persisted to ``path`` when given.

    An existing file at ``path`` with the same total is loaded (resume); one with a
    different total is an error, so two budgets never share a ledger by mistake.
    """

    def __init__(self, total: int, path: str | Path | None = None):
        if isinstance(total, bool) or not isinstance(total, int) or total < 0:
            raise ValueError(f"the rollout budget must be an int >= 0, got {total!r}")
        self.total = total
        self.path = Path(path) if path is not None else None
        self.by_stage: dict[str, int] = {}
        if self.path is not None and self.path.exists():
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT:
                raise ValueError(f"{self.path}: not a rollout budget ledger (format {data.get('format')!r})")
            if data.get("total") != total:
                raise ValueError(f"{self.path}: ledger is for a budget of {data.get('total')} rollouts, not {total}")
            self.by_stage = {str(k): int(v) for k, v in data.get("by_stage", {}).items()}

    # ------------------------------------------------------------------ queries
    @property
    def used(self) -> int:
        return sum(self.by_stage.values())

    @property
    def remaining(self) -> int:
        return self.total - self.used

    def can_afford(self, n: int = 1) -> bool:
        return n <= self.remaining

    def stage_used(self, stage: str) -> int:
        return self.by_stage.get(stage, 0)

    # ------------------------------------------------------------------ changes
    def charge(self, stage: str, n: int = 1) -> None:
        """Count ``n`` rollouts for ``stage``; raise :class:`BudgetExceeded` (counting nothing) past the total."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"a charge must be an int >= 0, got {n!r}")
        if n > self.remaining:
            raise BudgetExceeded(
                f"stage {stage!r} asked for {n} rollout(s) but only {self.remaining} of {self.total} are left "
                f"(spent: {self.summary_text()})"
            )
        self.by_stage[stage] = self.by_stage.get(stage, 0) + n
        self._save()

    def start_stage(self, stage: str, kept: int = 0) -> None:
        """(Re)start ``stage``: its count becomes ``kept``, the rollouts it keeps from an earlier attempt."""
        if kept < 0:
            raise ValueError(f"kept must be >= 0, got {kept}")
        others = self.used - self.stage_used(stage)
        if others + kept > self.total:
            raise BudgetExceeded(f"stage {stage!r} keeps {kept} rollouts but only {self.total - others} are left")
        self.by_stage[stage] = kept
        self._save()

    # ------------------------------------------------------------------ output
    def summary_text(self) -> str:
        parts = [f"{k}={v}" for k, v in self.by_stage.items()]
        return ", ".join(parts) if parts else "nothing"

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "total": self.total, "used": self.used, "remaining": self.remaining,
                "by_stage": dict(self.by_stage)}

    def _save(self) -> None:
        if self.path is not None:
            atomic_write_json(self.path, self.to_dict())

    def __repr__(self) -> str:
        return f"RolloutBudget(total={self.total}, used={self.used}, by_stage={self.by_stage})"


class BudgetedEnv(gym.Wrapper):
    """Charge ``budget`` one rollout for ``stage`` on the first step of each episode."""

    def __init__(self, env: gym.Env, budget: RolloutBudget, stage: str):
        super().__init__(env)
        self.budget = budget
        self.stage = stage
        self._charged = True  # nothing to charge before the first reset
        self.episodes = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        out = self.env.reset(seed=seed, options=options)
        self._charged = False
        return out

    def step(self, action: Any):
        if not self._charged:
            self.budget.charge(self.stage, 1)  # raises before the wrapped env sees the action
            self._charged = True
            self.episodes += 1
        return self.env.step(action)
