"""Run a policy K times on each task of a target env and report pass^k.

Episodes are stored in a :class:`~trace_gym.rollout.TrajectoryStore` as they finish,
so an interrupted evaluation resumes where it stopped.  Trial ``j`` of every task
uses seed ``base_seed + j``.  Which tasks a split holds, the reset options that play
a task and the group a task is reported in come from the env's task source
(:mod:`trace_gym.core.tasks`), so any env that offers one can be evaluated.

A task counts in every report group its source puts it in
(:func:`~trace_gym.core.tasks.task_groups`: a ToolSandbox scenario in each of its categories).
The report records, per episode, whether the agent ended it with a message to the user
(``ended``), and its document carries the graded scores per group
(:func:`trace_gym.eval.scores.graded_scores`: mean reward with an interval, perfect count,
ended share, floor).

Beside the policy's numbers the report can carry the **refusal floor**
(:mod:`trace_gym.eval.floor`): what refusing everything scores on the same tasks, per
group.  It is added when the task source sets ``refusal_floor = True`` (ToolSandbox does)
or when ``floor=True`` is passed; its episodes do not count as the policy's rollouts.
``exclude_groups`` leaves out every task that counts in one of those groups (e.g. the
groups where refusing already earns credit,
:func:`~trace_gym.eval.floor.refusal_credited_groups`), for a number that claims learning.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.outcome import is_success
from ..core.tasks import task_groups, task_source_for
from .floor import refusal_floor, wants_floor
from .metrics import PassK, bootstrap_pass_hat_k

__all__ = ["EvalReport", "evaluate", "task_option_key", "default_tasks"]


def task_option_key(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> str:
    """The reset option that names a task of ``env_id`` (asked of its task source)."""
    return task_source_for(env_id, env_kwargs).option_key


def default_tasks(env_id: str, split: str | None = None, env_kwargs: Mapping[str, Any] | None = None) -> list[str]:
    """The task ids of ``split`` of ``env_id`` (``None``: the env's default split)."""
    return task_source_for(env_id, env_kwargs).task_ids(split)


@dataclass
class EvalReport:
    env_id: str
    policy_id: str
    trials: int
    results: dict[str, list[bool]]          # task id -> success per trial
    rewards: dict[str, list[float]]          # task id -> reward per trial
    groups: dict[str, list[str]] = field(default_factory=dict)  # group -> task ids (a task may be in several)
    rollouts: int = 0
    wall_s: float = 0.0
    floor: dict[str, float] = field(default_factory=dict)     # task id -> the refusal policy's reward
    floor_rollouts: int = 0
    excluded: dict[str, list[str]] = field(default_factory=dict)  # group left out -> its task ids
    ended: dict[str, list[bool]] = field(default_factory=dict)  # task id -> the agent ended the episode, per trial

    def pass_k(self, k: int, tasks: Sequence[str] | None = None, seed: int = 0) -> PassK:
        res = self.results if tasks is None else {t: self.results[t] for t in tasks}
        return bootstrap_pass_hat_k(res, k, seed=seed)

    def mean_reward(self, tasks: Sequence[str] | None = None) -> float:
        ts = list(self.rewards) if tasks is None else list(tasks)
        vals = [r for t in ts for r in self.rewards[t]]
        return sum(vals) / len(vals) if vals else 0.0

    def task_groups(self) -> dict[str, list[str]]:
        """task id -> every group it is reported in."""
        out: dict[str, list[str]] = {t: [] for t in self.results}
        for g, ts in sorted(self.groups.items()):
            for t in ts:
                out.setdefault(t, []).append(g)
        return out

    def to_dict(self) -> dict[str, Any]:
        from .scores import attach_scores

        ks = range(1, self.trials + 1)
        return attach_scores({
            "env_id": self.env_id, "policy": self.policy_id, "trials": self.trials, "n_tasks": len(self.results),
            "rollouts": self.rollouts, "wall_s": self.wall_s, "mean_reward": self.mean_reward(),
            "pass_hat_k": {str(k): vars(self.pass_k(k)) for k in ks},
            "groups": {g: {"n_tasks": len(ts), "mean_reward": self.mean_reward(ts),
                           "perfect": sum(1 for t in ts for s in self.results[t] if s),
                           "pass_hat_k": {str(k): vars(self.pass_k(k, ts)) for k in ks}}
                       for g, ts in sorted(self.groups.items())},
            "results": self.results, "rewards": self.rewards, "ended": self.ended, "task_groups": self.task_groups(),
            **self._floor_dict(),
        })

    def _floor_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.excluded:
            out["excluded_groups"] = {g: len(ts) for g, ts in sorted(self.excluded.items())}
        if not self.floor:
            return out
        from .floor import RefusalPolicy

        def summary(ts: Sequence[str]) -> dict[str, Any]:
            vals = [self.floor[t] for t in ts if t in self.floor]
            return {"mean_reward": sum(vals) / len(vals) if vals else 0.0,
                    "perfect": sum(1 for v in vals if is_success(v, 1.0)), "n_tasks": len(vals)}

        out["refusal_floor"] = {"policy": RefusalPolicy.policy_id, "rollouts": self.floor_rollouts,
                                **summary(list(self.results)),
                                "groups": {g: summary(ts) for g, ts in sorted(self.groups.items())},
                                "rewards": dict(self.floor)}
        return out


def evaluate(env_id: str, policy: Any, tasks: Sequence[str], trials: int, *, store: str | Path | None = None,
             base_seed: int = 0, success: float = 1.0, env_kwargs: dict[str, Any] | None = None,
             extra_options: dict[str, Any] | None = None, batch_size: int = 1,
             on_episode: Callable[[Any], None] | None = None, floor: bool | None = None,
             exclude_groups: Sequence[str] = ()) -> EvalReport:
    """Play every task ``trials`` times (resuming from ``store``) and collect per-task successes.

    ``floor``: also play the refusal policy once per task (``None``: when the task source
    asks for it); ``exclude_groups``: report groups whose tasks are not played at all.
    """
    import time

    from ..progress import track
    from ..rollout import TrajectoryStore, collect, episode_key, mode_note

    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    if not tasks:
        raise ValueError("evaluate() needs at least one task")
    source = task_source_for(env_id, env_kwargs)
    plan = [(str(task), {**source.reset_options(str(task)), **(extra_options or {})}) for task in tasks]  # unknown ids fail here
    excluded: dict[str, list[str]] = defaultdict(list)
    if exclude_groups:
        drop = set(exclude_groups)
        for task, _ in plan:
            for g in task_groups(source, task):
                if g in drop:
                    excluded[g].append(task)
        plan = [(task, opts) for task, opts in plan if drop.isdisjoint(task_groups(source, task))]
        if not plan:
            raise ValueError(f"exclude_groups={sorted(drop)} leaves no task to evaluate")
    st = TrajectoryStore(store) if store is not None else None
    t0 = time.perf_counter()
    seeds = [base_seed + j for j in range(trials)]
    by_key = {tr.key: tr for tr in st.load()} if st is not None else {}
    results: dict[str, list[bool]] = {}
    rewards: dict[str, list[float]] = {}
    ended: dict[str, list[bool]] = {}
    groups: dict[str, list[str]] = defaultdict(list)
    bar = track(f"eval {policy.policy_id} on {env_id}{mode_note(policy, min(batch_size, len(plan) * trials))}",
                total=len(plan) * trials)

    def played(tr: Any) -> None:
        bar.tick(tr)
        if on_episode:
            on_episode(tr)

    def skipped(seed: int) -> None:
        bar.skip()
        if on_episode:
            on_episode(None)

    with bar:  # every (task, trial) episode in one queue, so a batch can hold several tasks
        new = collect(env_id, policy, [s for _ in plan for s in seeds], store=st,
                      options=[opts for _, opts in plan for _ in seeds], env_kwargs=env_kwargs, batch_size=batch_size,
                      on_episode=played, on_skip=skipped)
    rollouts = len(new)
    for tr in new:
        by_key[tr.key] = tr
    for task, opts in plan:
        trajs = [by_key[episode_key(env_id, policy.policy_id, s, opts)] for s in seeds]
        results[task] = [is_success(tr.reward, success) for tr in trajs]
        rewards[task] = [float(tr.reward) for tr in trajs]
        ended[task] = [tr.ended_with_message for tr in trajs]
        for g in task_groups(source, task):
            groups[g].append(task)
    floor_rewards: dict[str, float] = {}
    floor_rollouts = 0
    if floor if floor is not None else wants_floor(source):
        floor_rewards, floor_rollouts = refusal_floor(env_id, [t for t, _ in plan], store=store, base_seed=base_seed,
                                                      env_kwargs=env_kwargs, extra_options=extra_options)
    return EvalReport(env_id, policy.policy_id, trials, results, rewards, dict(groups), rollouts, time.perf_counter() - t0,
                      floor_rewards, floor_rollouts, dict(excluded), ended)
