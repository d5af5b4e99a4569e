"""Run a policy K times on each task of a target env and report pass^k.

Episodes are stored in a :class:`~trace_gym.rollout.TrajectoryStore` as they finish,
so an interrupted evaluation resumes where it stopped.  Trial ``j`` of every task
uses seed ``base_seed + j``; the task is chosen with the env's reset option
(``task_id`` for τ²-bench, ``scenario`` for ToolSandbox).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..datadirs import tau2_domain_dir
from .metrics import PassK, bootstrap_pass_hat_k

__all__ = ["EvalReport", "evaluate", "task_option_key", "default_tasks", "group_of"]


def task_option_key(env_id: str) -> str:
    return "scenario" if "toolsandbox" in env_id else "task_id"


@lru_cache(maxsize=16)
def _tau2_split(domain: str, split: str) -> tuple[str, ...]:
    d = tau2_domain_dir(domain)
    splits = json.loads((d / "split_tasks.json").read_text(encoding="utf-8"))
    if split not in splits:
        raise ValueError(f"τ²-bench {domain} has no split {split!r}; it has {sorted(splits)}")
    return tuple(str(t) for t in splits[split])


def default_tasks(env_id: str, split: str = "test") -> list[str]:
    """The task ids of a split (τ²-bench) or every scenario name (ToolSandbox)."""
    name = env_id.split("/")[-1]
    if name.startswith("tau2-"):
        domain = name[len("tau2-"):].rsplit("-v", 1)[0]
        return list(_tau2_split(domain, split))
    if "toolsandbox" in name:
        from ..toolsandbox.scenarios import load_scenarios  # type: ignore[attr-defined]

        return [s.name for s in load_scenarios()]
    raise ValueError(f"{env_id}: no task list known; pass task ids explicitly")


def group_of(env_id: str, trajectory: Any) -> str:
    """Per-domain for τ²-bench, per-category for ToolSandbox, else the env id."""
    info = trajectory.reset_info or {}
    if "toolsandbox" in env_id:
        cats = info.get("categories") or info.get("category")
        if isinstance(cats, list):
            for c in ("SINGLE_TOOL_CALL", "MULTIPLE_TOOL_CALL", "MULTIPLE_USER_TURN", "INSUFFICIENT_INFORMATION"):
                if c in cats:
                    return c.lower()
            return ",".join(cats)
        return str(cats or "toolsandbox")
    name = env_id.split("/")[-1]
    return name[len("tau2-"):].rsplit("-v", 1)[0] if name.startswith("tau2-") else env_id


@dataclass
class EvalReport:
    env_id: str
    policy_id: str
    trials: int
    results: dict[str, list[bool]]          # task id -> success per trial
    rewards: dict[str, list[float]]          # task id -> reward per trial
    groups: dict[str, list[str]] = field(default_factory=dict)  # group -> task ids
    rollouts: int = 0
    wall_s: float = 0.0

    def pass_k(self, k: int, tasks: Sequence[str] | None = None, seed: int = 0) -> PassK:
        res = self.results if tasks is None else {t: self.results[t] for t in tasks}
        return bootstrap_pass_hat_k(res, k, seed=seed)

    def mean_reward(self, tasks: Sequence[str] | None = None) -> float:
        ts = list(self.rewards) if tasks is None else list(tasks)
        vals = [r for t in ts for r in self.rewards[t]]
        return sum(vals) / len(vals) if vals else 0.0

    def to_dict(self) -> dict[str, Any]:
        ks = range(1, self.trials + 1)
        return {
            "env_id": self.env_id, "policy": self.policy_id, "trials": self.trials, "n_tasks": len(self.results),
            "rollouts": self.rollouts, "wall_s": self.wall_s, "mean_reward": self.mean_reward(),
            "pass_hat_k": {str(k): vars(self.pass_k(k)) for k in ks},
            "groups": {g: {"n_tasks": len(ts), "mean_reward": self.mean_reward(ts),
                           "perfect": sum(1 for t in ts for s in self.results[t] if s),
                           "pass_hat_k": {str(k): vars(self.pass_k(k, ts)) for k in ks}}
                       for g, ts in sorted(self.groups.items())},
            "results": self.results, "rewards": self.rewards,
        }


def evaluate(env_id: str, policy: Any, tasks: Sequence[str], trials: int, *, store: str | Path | None = None,
             base_seed: int = 0, success: float = 1.0, env_kwargs: dict[str, Any] | None = None,
             extra_options: dict[str, Any] | None = None, batch_size: int = 1,
             on_episode: Callable[[Any], None] | None = None) -> EvalReport:
    """Play every task ``trials`` times (resuming from ``store``) and collect per-task successes."""
    import time

    from ..rollout import TrajectoryStore, collect, episode_key

    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    if not tasks:
        raise ValueError("evaluate() needs at least one task")
    key = task_option_key(env_id)
    st = TrajectoryStore(store) if store is not None else None
    t0 = time.perf_counter()
    seeds = [base_seed + j for j in range(trials)]
    by_key = {tr.key: tr for tr in st.load()} if st is not None else {}
    results: dict[str, list[bool]] = {}
    rewards: dict[str, list[float]] = {}
    groups: dict[str, list[str]] = defaultdict(list)
    rollouts = 0
    for task in tasks:
        opts = {key: task, **(extra_options or {})}
        new = collect(env_id, policy, seeds, store=st, options=opts, env_kwargs=env_kwargs, batch_size=batch_size,
                      on_episode=on_episode, on_skip=(lambda s: on_episode(None)) if on_episode else None)
        rollouts += len(new)
        for tr in new:
            by_key[tr.key] = tr
        trajs = [by_key[episode_key(env_id, policy.policy_id, s, opts)] for s in seeds]
        results[task] = [tr.reward >= success for tr in trajs]
        rewards[task] = [float(tr.reward) for tr in trajs]
        groups[group_of(env_id, trajs[0])].append(task)
    return EvalReport(env_id, policy.policy_id, trials, results, rewards, dict(groups), rollouts, time.perf_counter() - t0)
