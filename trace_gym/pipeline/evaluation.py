"""TRACE's evaluation stage: pass^k of any policy on held-out tasks of the target.

* :func:`evaluate_policy` — one policy, resuming from its episode store, a failing policy's episode
  forfeited (:class:`ForfeitOnError`) rather than the evaluation aborted;
* :func:`evaluate_policies` — several side by side (:class:`Evaluation`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..policies.wrapper import PolicyWrapper
from .store import StageOutput
from .target import Target

__all__ = ["evaluate_policy", "ForfeitOnError", "FORFEIT", "Evaluation", "evaluate_policies"]


FORFEIT = "I am unable to continue with this request. ###STOP###"


class ForfeitOnError(PolicyWrapper):
    """Wrap a policy so that its failure to act ends that agent's episode with :data:`FORFEIT` (a stop
    message, the episode then scored as it stands) instead of aborting the whole evaluation; ``forfeits``
    lists them.

    A full context is not a failure: :class:`~trace_gym.policies.base.ContextExceeded` passes through, and
    the rollout ends those episodes as the env scores a truncated one (termination reason
    ``context_length``), the one way a full context ends an episode.  Every feature the wrapper does not
    change is the wrapped policy's (``policy_id``, ``accepts_seeds``, ``batchable``, ``batch_size``,
    ``reset``, ``bind_env``, ``serve``, ...).  Under continuous serving (``serve``) the policy answers
    through the episode queue itself, so a failure there stops the rollout as it would unwrapped.
    """

    bypassable = ("serve",)  # serving answers through the episode queue: a failure there stops the rollout

    def __init__(self, inner: Any):
        super().__init__(inner)
        self.forfeits: list[str] = []

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        from ..policies.base import ContextExceeded, PolicyError

        try:
            return self.inner.act(messages, tools)
        except ContextExceeded:
            raise
        except PolicyError as exc:
            self.forfeits.append(str(exc)[:300])
            return FORFEIT

    def act_batch(self, requests: list[Any], seeds: list[int | None] | None = None) -> list[str]:
        from ..policies.base import ContextExceeded, PolicyError, act_batch, reset_policy

        try:
            return act_batch(self.inner, requests, seeds)
        except ContextExceeded:
            raise
        except PolicyError:  # answer one at a time so that only the failing episodes forfeit
            out, full = [], []
            for i, (m, t) in enumerate(requests):
                if seeds is not None:
                    reset_policy(self.inner, seeds[i])
                try:
                    out.append(self.act(m, t))
                except ContextExceeded as exc:
                    full.append((i, exc))
            if full:
                raise ContextExceeded(str(full[0][1]), [i for i, _ in full], [e.lengths[0] if e.lengths else 0 for _, e in full],
                                      full[0][1].limit) from full[0][1]
            return out


def evaluate_policy(target: Target, policy: Any, tasks: list[Any], trials: int, store: str | Path, *, base_seed: int,
                    batch_size: int = 1, on_episode: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """pass^1..pass^trials (bootstrap intervals) of ``policy`` on ``tasks``, resuming from ``store``, with the
    graded scores per report group (``scores``, :func:`~trace_gym.eval.scores.graded_scores`).

    A policy failure forfeits the episode (scored as it stands) and is counted in ``forfeits``.
    """
    from ..eval.harness import evaluate
    from ..eval.scores import graded_scores

    guarded = ForfeitOnError(policy)
    rep = evaluate(target.env_id, guarded, [str(t) for t in tasks], trials, store=store, base_seed=base_seed,
                   env_kwargs=target.env_kwargs, batch_size=batch_size, success=target.threshold, on_episode=on_episode)
    d = rep.to_dict()
    d["eval_wall_s"] = rep.wall_s
    d["forfeits"] = len(guarded.forfeits)  # actions the policy could not produce (episode ended by a stop message)
    d["forfeit_examples"] = sorted(set(guarded.forfeits))[:3]
    d["scores"] = graded_scores(d, seed=base_seed)  # mean reward, perfect count, ended share per group (task_groups), CIs
    return d


@dataclass
class Evaluation(StageOutput):
    tasks: list[str] = field(default_factory=list)
    trials: int = 0
    reports: list[dict[str, Any]] = field(default_factory=list)  # one evaluate_policy() document per policy, with "spec"
    comparison: str | None = None
    plot: str | None = None

    def artifacts(self) -> list[str]:
        return ([self.comparison] if self.comparison else []) + ([self.plot] if self.plot else [])


def evaluate_policies(target: Target, policies: dict[str, Callable[[], Any]], tasks: list[str], trials: int, out: str | Path,
                      *, base_seed: int, batch_size: int = 1,
                      on_report: Callable[[dict[str, Any]], None] | None = None) -> Evaluation:
    """Evaluate each named policy (loaded one at a time) on ``tasks``: ``<out>/<name>/report.json`` each, then
    ``comparison.json`` and ``comparison.png``.  Progress goes to :mod:`trace_gym.progress`."""
    from ..eval.report import plot_comparison
    from ..io import atomic_write_json

    out = Path(out)
    reports = []
    for name, load in policies.items():
        policy = load()
        doc = evaluate_policy(target, policy, tasks, trials, out / name / "episodes.jsonl", base_seed=base_seed,
                              batch_size=batch_size)
        doc["spec"] = name
        if hasattr(policy, "fired"):
            doc["context_overflows"] = policy.fired
        if hasattr(policy, "decisions"):
            doc["routing"] = policy.decisions
        atomic_write_json(out / name / "report.json", doc)
        if on_report is not None:
            on_report(doc)
        reports.append(doc)
        del policy
    atomic_write_json(out / "comparison.json", {"env_id": target.env_id, "tasks": tasks, "trials": trials, "reports": reports})
    png = plot_comparison(reports, out / "comparison.png")
    return Evaluation(list(tasks), trials, reports, str(out / "comparison.json"), str(png) if png else None)
