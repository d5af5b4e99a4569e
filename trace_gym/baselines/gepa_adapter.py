"""GEPA prompt optimization as a baseline: the agent instruction is the evolving text.

The candidate GEPA evolves is ``{"system_prompt": text}``.  :class:`SystemPromptPolicy`
wraps any trace-gym policy and rewrites the system message it is shown: the
environment's own agent instruction (``anchor``) is replaced by the candidate text,
so a domain policy that follows the instruction stays in place; when the system
message does not contain the anchor, the candidate is put in front of it.

:class:`TraceGEPAAdapter` implements GEPA's adapter protocol (``gepa.core.adapter``):

* ``evaluate(batch, candidate)`` plays one episode per task id of the batch with the
  wrapped policy and scores it with the environment's reward.  Every episode is one
  GEPA metric call and one rollout charged to a :class:`~trace_gym.compare.budget.RolloutBudget`.
* ``make_reflective_dataset`` turns each episode into a record with the task's
  opening request, the transcript (trimmed) and feedback built from the reward and
  its breakdown, which GEPA's reflection prompt shows to the reflection model.

:func:`policy_reflection_lm` makes GEPA's reflection model (a ``str -> str`` callable)
out of any trace-gym policy, by default the base model itself.  :func:`optimize_prompt`
runs ``gepa.optimize`` within a rollout budget: a stopper ends the search before an
iteration that could overrun the budget, so GEPA never asks for a refused rollout.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.outcome import is_success
from ..policies.wrapper import PolicyWrapper

__all__ = [
    "CANDIDATE_KEY",
    "SystemPromptPolicy",
    "TraceGEPAAdapter",
    "BudgetStopper",
    "ListLogger",
    "policy_reflection_lm",
    "optimize_prompt",
    "GEPARun",
    "default_anchor",
]

CANDIDATE_KEY = "system_prompt"


def default_anchor(env_id: str, env_kwargs: dict[str, Any] | None = None) -> str | None:
    """The agent instruction a target's system prompt opens with (its task source's ``instruction``), else ``None``."""
    from ..core.tasks import task_source_for

    return task_source_for(env_id, env_kwargs).instruction


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


class SystemPromptPolicy(PolicyWrapper):
    """A policy that sees ``instruction`` in place of the env's agent instruction; every other feature is the
    inner policy's (:class:`~trace_gym.policies.wrapper.PolicyWrapper`: no ``serve``, which would skip the rewrite)."""

    def __init__(self, inner: Any, instruction: str, anchor: str | None = None, policy_id: str | None = None):
        super().__init__(inner)
        self.instruction = instruction
        self.anchor = anchor
        self.policy_id = policy_id or f"{getattr(inner, 'policy_id', 'policy')}+prompt:{_short_hash(instruction)}"

    def rewrite(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The conversation with the system message rewritten (a copy; the input is not changed)."""
        out = [dict(m) for m in messages]
        for m in out:
            if m.get("role") != "system":
                continue
            content = str(m.get("content") or "")
            if self.anchor and self.anchor in content:
                m["content"] = content.replace(self.anchor, self.instruction, 1)
            else:
                m["content"] = f"{self.instruction}\n\n{content}" if content else self.instruction
            return out
        return [{"role": "system", "content": self.instruction}, *out]

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return self.inner.act(self.rewrite(messages), tools)

    def act_batch(self, requests: Sequence[tuple[list[dict[str, Any]], list[dict[str, Any]]]], seeds: Sequence[int | None] | None = None) -> list[str]:
        from ..policies.base import act_batch

        rewritten = [(self.rewrite(m), t) for m, t in requests]
        return act_batch(self.inner, rewritten, seeds)


def policy_reflection_lm(policy: Any, seed: int = 0) -> Callable[[str | list[dict[str, Any]]], str]:
    """A GEPA reflection model (prompt or chat messages -> text) backed by a trace-gym policy.

    Each call uses a new seed (``seed``, ``seed + 1``, ...) so repeated reflections differ
    while a rerun of the whole search repeats them exactly.
    """
    from ..llm import PolicyChatClient

    client = PolicyChatClient(policy)
    counter = {"n": 0}

    def lm(prompt: str | list[dict[str, Any]]) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        n = counter["n"]
        counter["n"] += 1
        return client.chat(messages, seed=seed + n).text

    return lm


def _first_user_text(messages: list[dict[str, Any]]) -> str:
    for m in messages:
        if m.get("role") == "user" and m.get("name") != "env_feedback" and m.get("content"):
            return str(m["content"])
    return ""


def _render(messages: list[dict[str, Any]], limit: int) -> str:
    from ..core.env import render_messages

    text = render_messages([m for m in messages if m.get("role") != "system"])
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters left out ...]\n{text[-half:]}"


def _feedback(reward: float, reward_info: dict[str, Any], termination: str | None, success: float) -> str:
    verdict = "The episode succeeded" if is_success(reward, success) else "The episode failed"
    lines = [f"{verdict}: reward {reward:.3f} (success needs {success:g}); it ended by {termination or 'unknown'}."]
    for key, value in (reward_info or {}).items():
        if key in ("info",):
            continue
        blob = json.dumps(value, ensure_ascii=False, default=str)
        lines.append(f"- {key}: {blob[:400]}")
    return "\n".join(lines)


class TraceGEPAAdapter:
    """GEPA adapter over a trace-gym env: data instances are task ids, scores are env rewards.

    A task is played with the reset options the env's task source gives for it
    (:mod:`trace_gym.core.tasks`), or with ``{task_option: id}`` when ``task_option`` is set.
    """

    def __init__(
        self,
        env_factory: Callable[[], Any],
        policy: Any,
        *,
        task_option: str | None = None,
        anchor: str | None = None,
        seed: int = 0,
        budget: Any = None,
        stage: str = "gepa",
        success: float = 1.0,
        transcript_chars: int = 6000,
        on_episode: Callable[[Any], None] | None = None,
    ):
        self.env_factory = env_factory
        self.policy = policy
        self.task_option = task_option
        self.anchor = anchor
        self.seed = seed
        self.budget = budget
        self.stage = stage
        self.success = success
        self.transcript_chars = transcript_chars
        self.on_episode = on_episode
        self.rollouts = 0
        self.history: list[dict[str, Any]] = []  # (candidate hash, task, reward) of every rollout
        self._env: Any = None
        self.propose_new_texts = None  # GEPA's own reflective proposer does the proposing

    def _get_env(self) -> Any:
        if self._env is None:
            self._env = self.env_factory()
        return self._env

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    def _options(self, env: Any, task: Any) -> dict[str, Any]:
        """The reset options that play ``task``: ``{task_option: task}``, else the env's task source's."""
        if self.task_option is not None:
            return {self.task_option: task}
        from ..core.tasks import task_source

        return task_source(env).reset_options(str(task))

    def candidate_policy(self, candidate: dict[str, str]) -> SystemPromptPolicy:
        text = candidate.get(CANDIDATE_KEY)
        if not isinstance(text, str):
            raise KeyError(f"a candidate needs a {CANDIDATE_KEY!r} text, got keys {sorted(candidate)}")
        return SystemPromptPolicy(self.policy, text, self.anchor)

    def evaluate(self, batch: list[Any], candidate: dict[str, str], capture_traces: bool = False):
        from gepa.core.adapter import EvaluationBatch

        from ..rollout import RolloutError, rollout

        policy = self.candidate_policy(candidate)
        env = self._get_env()
        outputs: list[dict[str, Any]] = []
        scores: list[float] = []
        traces: list[dict[str, Any]] = []
        chash = _short_hash(candidate[CANDIDATE_KEY])
        for task in batch:
            if self.budget is not None:
                self.budget.charge(self.stage, 1)  # a refused rollout is never played
            self.rollouts += 1
            try:
                traj = rollout(env, policy, self.seed, self._options(env, task))
                error = None
            except RolloutError as exc:  # a policy failure scores 0 and is shown to the reflection model
                traj, error = exc.trajectory, str(exc)
            if self.on_episode is not None:
                self.on_episode(traj)
            reward = float(traj.reward) if error is None else 0.0
            last = next((m.get("content") for m in reversed(traj.transcript) if m.get("role") == "assistant"), "")
            outputs.append({"task": task, "reward": reward, "final_message": last or "", "error": error})
            scores.append(reward)
            self.history.append({"candidate": chash, "task": task, "reward": reward})
            if capture_traces:
                traces.append({"task": task, "transcript": traj.transcript, "reward": reward,
                               "reward_info": traj.reward_info, "termination_reason": traj.termination_reason,
                               "error": error})
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=traces if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]):
        records = []
        for tr in eval_batch.trajectories or []:
            fb = _feedback(tr["reward"], tr["reward_info"], tr["termination_reason"], self.success)
            if tr.get("error"):
                fb += f"\nThe agent failed to produce an action: {tr['error']}"
            records.append({
                "Inputs": _first_user_text(tr["transcript"]) or f"task {tr['task']}",
                "Generated Outputs": _render(tr["transcript"], self.transcript_chars),
                "Feedback": fb,
            })
        return {name: records for name in components_to_update}


class BudgetStopper:
    """GEPA stop condition: stop when the next iteration could need more rollouts than are left.

    One GEPA iteration evaluates the parent and the proposal on a minibatch and, if the
    proposal is accepted, the whole validation set: at most ``2 * minibatch + n_val``.
    """

    def __init__(self, budget: Any, minibatch: int, n_val: int):
        self.budget = budget
        self.worst = 2 * minibatch + n_val

    def __call__(self, gepa_state: Any) -> bool:
        return self.budget.remaining < self.worst


class ListLogger:
    """A GEPA logger that keeps messages (and optionally appends them to a file) instead of printing."""

    def __init__(self, path: str | Path | None = None):
        self.lines: list[str] = []
        self.path = Path(path) if path is not None else None

    def log(self, message: str) -> None:
        self.lines.append(str(message))
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(f"{message}\n")


@dataclass
class GEPARun:
    """What :func:`optimize_prompt` found and spent."""

    best_candidate: dict[str, str]
    best_val_score: float
    seed_val_score: float
    n_candidates: int
    metric_calls: int
    rollouts: int
    val_scores: list[float] = field(default_factory=list)
    candidates: list[dict[str, str]] = field(default_factory=list)
    stopped_by_budget: bool = False
    iteration_errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"best_candidate": self.best_candidate, "best_val_score": self.best_val_score,
                "seed_val_score": self.seed_val_score, "n_candidates": self.n_candidates,
                "metric_calls": self.metric_calls, "rollouts": self.rollouts, "val_scores": self.val_scores,
                "candidates": self.candidates, "stopped_by_budget": self.stopped_by_budget,
                "iteration_errors": self.iteration_errors}


def optimize_prompt(
    adapter: TraceGEPAAdapter,
    seed_instruction: str,
    trainset: list[Any],
    valset: list[Any],
    *,
    reflection_lm: Callable[[Any], str] | None = None,
    proposer: Callable[..., dict[str, str]] | None = None,
    max_metric_calls: int | None = None,
    minibatch: int = 3,
    seed: int = 0,
    log_path: str | Path | None = None,
) -> GEPARun:
    """Run ``gepa.optimize`` on ``{"system_prompt": seed_instruction}`` within the adapter's budget.

    ``reflection_lm`` (GEPA's default reflective proposer) or ``proposer`` (a custom
    ``(candidate, reflective_dataset, components) -> new texts`` function) proposes new
    instructions.  ``max_metric_calls`` defaults to what the budget has left.
    """
    import gepa

    if not trainset or not valset:
        raise ValueError("GEPA needs at least one training and one validation task")
    if reflection_lm is None and proposer is None:
        raise ValueError("pass reflection_lm or proposer")
    budget = adapter.budget
    limit = max_metric_calls if max_metric_calls is not None else (budget.remaining if budget is not None else None)
    if limit is None:
        raise ValueError("pass max_metric_calls or give the adapter a budget")
    if limit < len(valset):
        raise ValueError(f"GEPA's first step scores the seed prompt on all {len(valset)} validation tasks, "
                         f"but only {limit} metric calls are allowed")
    stoppers = [BudgetStopper(budget, minibatch, len(valset))] if budget is not None else []
    logger = ListLogger(log_path)
    result = gepa.optimize(
        seed_candidate={CANDIDATE_KEY: seed_instruction},
        trainset=list(trainset),
        valset=list(valset),
        adapter=adapter,
        reflection_lm=None if proposer is not None else reflection_lm,
        custom_candidate_proposer=proposer,
        reflection_minibatch_size=minibatch,
        max_metric_calls=limit,
        stop_callbacks=stoppers or None,
        logger=logger,
        seed=seed,
        display_progress_bar=False,
        # A failed iteration (e.g. the reflection model cannot answer) is logged and the search goes
        # on; every iteration spends rollouts first, so the budget still ends it.
        raise_on_exception=False,
        skip_perfect_score=True,
    )
    best = dict(result.best_candidate)
    scores = [float(s) for s in result.val_aggregate_scores]
    stopped = budget is not None and budget.remaining < 2 * minibatch + len(valset)
    return GEPARun(
        best_candidate=best,
        best_val_score=scores[result.best_idx],
        seed_val_score=scores[0],
        n_candidates=len(result.candidates),
        metric_calls=int(result.total_metric_calls or adapter.rollouts),
        rollouts=adapter.rollouts,
        val_scores=scores,
        candidates=[dict(c) for c in result.candidates],
        stopped_by_budget=stopped,
        iteration_errors=[line for line in logger.lines if "Exception during optimization" in line or "reflection failed" in line],
    )
