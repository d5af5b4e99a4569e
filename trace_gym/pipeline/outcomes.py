"""Routing learned from outcomes: which of the base model and each adapter scored best on train scenarios.

The routing stage (:func:`~trace_gym.pipeline.training.build_router`) with ``router_outcomes`` N > 0 plays each
trained adapter on the first N train tasks that the base model's rollouts played (:func:`outcome_jobs`), each with
the seed and reset options of that task's first base episode, through budgeted target envs charged to the routing
stage one rollout each (:func:`play_outcomes`).  :func:`label_outcomes` then labels each scenario with whichever
of the base model (its stored episode) and the adapters scored the highest reward, ties going to the base model
(:data:`~trace_gym.route.base.NO_ADAPTER`), then to the earlier adapter; :func:`add_outcome_examples` adds one
outcome example per scenario to the router index (its opening user message and offered tools, as every example).

The adapters' episodes are kept in a trajectory store beside the adapters, so a routing stage that runs again
(another rule, a larger N, an interrupted run) replays only what is missing; what it keeps is charged again, as
:func:`~trace_gym.pipeline.stages.play_rollouts` does, so a resumed run spends what an uninterrupted one would.

Errors: ``ValueError`` when fewer than N base tasks were played or a base episode is missing from the store;
:class:`~trace_gym.pipeline.budget.BudgetExceeded` (before any episode is played) when the budget cannot cover
the episodes still to play.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..policies.base import supports
from .budget import BudgetExceeded, RolloutBudget
from .stages import RolloutJob
from .target import Target

__all__ = ["OutcomeRouting", "outcome_jobs", "play_outcomes", "label_outcomes", "add_outcome_examples", "STAGE"]

STAGE = "routing"  # the ledger stage the adapters' episodes are charged to (the routing stage's own)


def outcome_jobs(jobs: list[RolloutJob], n: int) -> list[RolloutJob]:
    """The first base job of each of the first ``n`` distinct tasks among ``jobs`` of the model under study (those
    without a policy of their own), in job order; ``ValueError`` when fewer than ``n`` tasks were played."""
    if n < 0:
        raise ValueError(f"router_outcomes must be >= 0, got {n}")
    out: list[RolloutJob] = []
    seen: set[str] = set()
    for j in jobs:
        if j.policy is None and j.task not in seen and len(out) < n:
            seen.add(j.task)
            out.append(j)
    if len(out) < n:
        raise ValueError(f"router_outcomes = {n} asks for {n} of the base model's train tasks, but its rollouts played "
                         f"{len(out)}; pass router_outcomes <= {len(out)} or more base tasks")
    return out


def _key(target: Target, policy_id: str, job: RolloutJob) -> tuple[str, str, int, str]:
    from ..rollout import episode_key

    return episode_key(target.env_id, policy_id, job.seed, target.reset_options(job.task))


def adapter_policy_id(name: str) -> str:
    """The policy id of adapter ``name``'s outcome episodes in the store."""
    return f"adapter:{name}"


def play_outcomes(target: Target, adapters: list[str], jobs: list[RolloutJob], load: Callable[[str], Any],
                  store_path: str | Path, *, budget: RolloutBudget | None = None,
                  batch_size: int = 1) -> dict[str, dict[str, Any]]:
    """Each adapter (``load(name)`` returns a policy acting with it alone) on every job's task and seed, episodes
    not already in the store at ``store_path`` played (in lock-step batches of ``batch_size``) and stored; returns
    adapter -> task -> its episode.  Kept episodes are charged to ``budget`` again, played ones as they start; a
    policy failure keeps the episode as played so far (scored as it stands)."""
    from ..rollout import RolloutError, TrajectoryStore, rollout_batch

    store = TrajectoryStore(store_path)
    have = store.keys() if store.path.exists() else set()
    todo = {a: [j for j in jobs if _key(target, adapter_policy_id(a), j) not in have] for a in adapters}
    kept = len(adapters) * len(jobs) - sum(len(t) for t in todo.values())
    if budget is not None:
        missing = sum(len(t) for t in todo.values())
        if kept + missing > budget.remaining:
            raise BudgetExceeded(f"routing from outcomes needs {kept + missing} rollouts ({len(jobs)} train scenarios × "
                                 f"{len(adapters)} adapters) but only {budget.remaining} of {budget.total} are left "
                                 f"(spent: {budget.summary_text()}); lower router_outcomes or raise the budget")
        budget.charge(STAGE, kept)
    for a in adapters:
        if not todo[a]:
            continue
        policy = load(a)
        policy.policy_id = adapter_policy_id(a)
        size = max(1, batch_size if supports(policy, "batchable") else 1)
        envs = [target.make(budget, STAGE, todo[a][0].env_kwargs) for _ in range(min(size, len(todo[a])))]
        try:
            for start in range(0, len(todo[a]), size):
                chunk = todo[a][start:start + size]
                try:
                    trajs = rollout_batch(envs[:len(chunk)], policy, [j.seed for j in chunk],
                                          [target.reset_options(j.task) for j in chunk])
                except RolloutError as exc:
                    trajs = [*exc.completed, exc.trajectory]
                for t in trajs:
                    t.env_id = target.env_id
                    store.append(t)
        finally:
            for e in envs:
                e.close()
        del policy
    by_key = {t.key: t for t in store.load()}
    return {a: {j.task: by_key[_key(target, adapter_policy_id(a), j)] for j in jobs} for a in adapters}


def label_outcomes(target: Target, jobs: list[RolloutJob], base: list[Any],
                   played: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per job's task: ``task``, ``seed``, ``rewards`` (``none``: the base model's stored episode in ``base``, then
    each adapter of ``played`` in order) and ``label``: the source with the highest reward, ties to the base model,
    then to the earlier adapter.  ``ValueError`` when a job's base episode is not among ``base``."""
    from ..route.base import NO_ADAPTER

    by_key = {t.key: t for t in base}
    out = []
    for j in jobs:
        b = by_key.get(_key(target, j.policy_id, j))
        if b is None:
            raise ValueError(f"no base episode of task {j.task} (seed {j.seed}) in the base rollouts: play them first")
        rewards = {NO_ADAPTER: float(b.reward), **{a: float(eps[j.task].reward) for a, eps in played.items()}}
        label = max(rewards, key=lambda s: (rewards[s], -list(rewards).index(s)))
        out.append({"task": j.task, "seed": j.seed, "rewards": rewards, "label": label})
    return out


def add_outcome_examples(index: Any, outcomes: list[dict[str, Any]], base: list[Any], target: Target,
                         jobs: list[RolloutJob], embedder: Any) -> int:
    """One outcome example per scenario of ``outcomes`` (in ``jobs``' order): the base episode's first user message
    and offered tools, labelled with its ``label``, its source the base episode's (so leave-one-out drops both);
    a scenario without a user message gets none (``indexed`` false in its row).  Returns the examples added."""
    from ..route.base import first_user_message, tool_names
    from ..route.build import example_source

    by_key = {t.key: t for t in base}
    texts, labels, sources, tools = [], [], [], []
    for row, j in zip(outcomes, jobs, strict=True):
        b = by_key[_key(target, j.policy_id, j)]
        text = first_user_message(b.transcript or b.messages)
        row["indexed"] = text is not None
        if text is not None:
            texts.append(text)
            labels.append(row["label"])
            sources.append(example_source(b))
            tools.append(tool_names(b.tools or None))
    if texts:
        index.add(texts, labels, sources, embedder.encode(texts), tools, outcome=True)
    return len(texts)


@dataclass
class OutcomeRouting:
    """What routing from outcomes plays: ``n`` train scenarios of ``jobs`` (the base rollouts' jobs), each adapter
    loaded by ``load(name)``, its episodes kept in ``store``, played in batches of ``batch_size``."""

    n: int
    jobs: list[RolloutJob]
    load: Callable[[str], Any]
    store: Path
    batch_size: int = 1

    def add_to(self, index: Any, target: Target, adapters: list[str], base: list[Any], embedder: Any,
               budget: RolloutBudget | None = None) -> list[dict[str, Any]]:
        """Play, label and index the scenarios (module docstring); returns their rows (task, seed, rewards, label,
        indexed)."""
        jobs = outcome_jobs(self.jobs, self.n)
        played = play_outcomes(target, adapters, jobs, self.load, self.store, budget=budget, batch_size=self.batch_size)
        rows = label_outcomes(target, jobs, base, played)
        add_outcome_examples(index, rows, base, target, jobs, embedder)
        return rows
