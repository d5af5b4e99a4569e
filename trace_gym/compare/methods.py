"""The pieces each compared method is built from: models, task splits, budgeted envs, training.

Everything here is a plain function over a :class:`~trace_gym.compare.pipeline.CompareConfig`
(passed as ``cfg``); :mod:`trace_gym.compare.pipeline` strings them into resumable stages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from .budget import BudgetedEnv, RolloutBudget

__all__ = [
    "TaskPoolEnv",
    "load_base_policy",
    "trainable",
    "train_model_name",
    "target_domain",
    "target_splits",
    "target_factory",
    "capability_factory",
    "worst_rollouts_per_step",
    "plan_train_steps",
    "train_adapter",
    "adapter_policy",
    "ForfeitOnError",
    "FORFEIT",
]


# ----------------------------------------------------------------------------- models
_MODELS: dict[tuple[str, int], tuple[Any, Any]] = {}


def _pristine(model: str, seed: int) -> tuple[Any, Any]:
    """The base weights and tokenizer, loaded once per process (callers get copies of the weights)."""
    key = (model, seed)
    if key not in _MODELS:
        from ..policies import hf

        if model == "tiny":
            _MODELS[key] = hf.tiny_test_model(seed)
        elif model == "smollm2":
            import torch

            _MODELS[key] = hf.load_smollm2(device="cuda" if torch.cuda.is_available() else "cpu")
        else:
            pol = hf.HFPolicy.from_pretrained(train_model_name(model))
            _MODELS[key] = (pol.model, pol.tokenizer)
    return _MODELS[key]


def load_base_policy(model: str, *, seed: int = 0, **gen: Any) -> Any:
    """A fresh base policy: ``tiny`` (random tiny Llama), ``smollm2``, ``hf:NAME`` or a folder/hub name, or a
    server/script spec (``openai:URL#MODEL``, ``scripted:FILE``).

    Local models are loaded once per process; each policy gets its own copy of the weights,
    because loading adapters modifies the model it is given.
    """
    import copy

    gen = {k: v for k, v in gen.items() if v is not None}
    if not trainable(model):
        from ..policies import policy_from_spec

        return policy_from_spec(model, seed=seed, **gen)
    from ..policies.hf import HFPolicy

    weights, tok = _pristine(model, seed)
    keep = {k: gen[k] for k in ("max_new_tokens", "greedy", "temperature", "top_k", "top_p", "batch_size") if k in gen}
    return HFPolicy(copy.deepcopy(weights), tok, policy_id=model, seed=seed, **keep)


def trainable(model: str) -> bool:
    """Whether the trainer can put LoRA adapters on ``model`` (a local model, not a server or a script)."""
    return not model.startswith(("openai:", "scripted:"))


def train_model_name(model: str) -> str:
    return model[3:] if model.startswith("hf:") else model


def adapter_policy(model: str, manifest: str | Path, name: str | None, *, seed: int, gen: dict[str, Any], policy_id: str) -> Any:
    """The base model with the adapters of ``manifest`` loaded; ``name`` fixes one (else all are loaded, none active)."""
    from ..route.policy import AdapterPolicy
    from ..route.registry import AdapterRegistry

    base = load_base_policy(model, seed=seed, **gen)
    pol = AdapterPolicy(base, AdapterRegistry(manifest), fixed=name)
    pol.policy_id = policy_id
    return pol


# ----------------------------------------------------------------------------- targets
def target_domain(env_id: str) -> str | None:
    name = env_id.split("/")[-1]
    if name.startswith("tau2-"):
        return name[len("tau2-"):].rsplit("-v", 1)[0]
    return None


def _seeded_order(items: list[str], seed: int) -> list[str]:
    order = np.random.default_rng(seed).permutation(len(items))
    return [items[i] for i in order]


def target_splits(env_id: str, *, seed: int, n_train: int | None = None, n_test: int | None = None) -> tuple[list[str], list[str], str]:
    """``(train task ids, held-out task ids, how they were obtained)`` for a target.

    τ²-bench domains use their own ``train``/``test`` split; a domain without one (mock)
    and ToolSandbox are split here, a seeded half and half (60/40 for ToolSandbox).
    ``n_train``/``n_test`` keep the first tasks of a seeded order of each split.
    """
    from ..eval.harness import default_tasks

    domain = target_domain(env_id)
    if domain is not None:
        try:
            train, test = default_tasks(env_id, "train"), default_tasks(env_id, "test")
            how = f"τ²-bench {domain} train/test split"
        except ValueError:
            base = default_tasks(env_id, "base")
            shuffled = _seeded_order(base, seed)
            half = len(shuffled) // 2
            train, test = shuffled[:half], shuffled[half:]
            how = f"τ²-bench {domain} has no train/test split: its {len(base)} tasks split in half (seed {seed})"
    else:
        every = default_tasks(env_id)
        shuffled = _seeded_order(every, seed)
        cut = int(round(0.6 * len(shuffled)))
        train, test = shuffled[:cut], shuffled[cut:]
        how = f"{len(every)} scenarios split 60/40 (seed {seed})"
    train, test = _seeded_order(train, seed + 1), _seeded_order(test, seed + 2)
    if n_train is not None:
        train = train[:n_train]
    if n_test is not None:
        test = test[:n_test]
    return train, test, how


class TaskPoolEnv(gym.Wrapper):
    """Reset without a task option picks ``tasks[seed % len(tasks)]``: a seed-indexed task pool (e.g. a train split)."""

    def __init__(self, env: gym.Env, tasks: list[Any], option: str = "task_id"):
        super().__init__(env)
        if not tasks:
            raise ValueError("TaskPoolEnv needs at least one task")
        self.tasks = list(tasks)
        self.option = option

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        opts = dict(options or {})
        if self.option not in opts:
            opts[self.option] = self.tasks[(seed or 0) % len(self.tasks)]
        return self.env.reset(seed=seed, options=opts)


def target_factory(env_id: str, env_kwargs: dict[str, Any], budget: RolloutBudget | None, stage: str,
                   tasks: list[Any] | None = None, option: str = "task_id") -> Callable[[], gym.Env]:
    """Fresh instances of the target env, optionally restricted to ``tasks`` and charged to ``budget``."""

    def make() -> gym.Env:
        env: gym.Env = gym.make(env_id, disable_env_checker=True, **env_kwargs)
        if tasks is not None:
            env = TaskPoolEnv(env, tasks, option)
        if budget is not None:
            env = BudgetedEnv(env, budget, stage)
        return env

    return make


def capability_factory(spec_path: str | Path, env_kwargs: dict[str, Any], budget: RolloutBudget | None,
                       stage: str) -> Callable[[], gym.Env]:
    """Fresh capability envs built straight from a spec file (no registry lookup, so no stale registration)."""
    from ..capabilities.env import CapabilityEnv

    def make() -> gym.Env:
        env: gym.Env = CapabilityEnv(str(spec_path), **env_kwargs)
        if budget is not None:
            env = BudgetedEnv(env, budget, stage)
        return env

    return make


# ----------------------------------------------------------------------------- training
def worst_rollouts_per_step(train: dict[str, Any]) -> int:
    """The most episodes one optimizer step can play (every group resampled the maximum number of times)."""
    from ..train.config import TrainConfig

    cfg = TrainConfig(**{k: v for k, v in train.items() if k in TrainConfig.field_names()})
    resamples = cfg.max_resamples if cfg.resample_constant_groups else 0
    return cfg.seeds_per_step * cfg.num_generations * (1 + resamples) * cfg.gradient_accumulation_steps


def plan_train_steps(rollouts: int, train: dict[str, Any], max_steps: int | None = None) -> int:
    """Optimizer steps that fit in ``rollouts`` even in the worst case (capped by ``max_steps``)."""
    steps = rollouts // worst_rollouts_per_step(train)
    return min(steps, max_steps) if max_steps is not None else steps


def train_adapter(*, model: str, seed: int, env_factory: Callable[[], gym.Env], env_id: str, out: Path,
                  steps: int, train: dict[str, Any], run_name: str) -> dict[str, Any]:
    """GRPO+LoRA for ``steps`` optimizer steps; returns the manifest entry plus timing."""
    from ..train import TrainConfig
    from ..train import train as run_train

    fields = {k: v for k, v in train.items() if k in TrainConfig.field_names()}
    fields.update(env_id=env_id, model=train_model_name(model), out=str(out), max_steps=steps, seed=seed,
                  progress=False, save_steps=0, run_name=run_name)
    fields.setdefault("num_train_seeds", max(64, steps * fields.get("seeds_per_step", 1)))
    cfg = TrainConfig(**fields)
    res = run_train(cfg, env_factory=env_factory)
    entry = dict(res.manifest_entry)
    entry["seconds"] = res.seconds
    return json.loads(json.dumps(entry, default=str))


# ----------------------------------------------------------------------------- evaluation
FORFEIT = "I am unable to continue with this request. ###STOP###"


class ForfeitOnError:
    """Wrap a policy so that a failure to act (e.g. a conversation longer than the model's
    context) ends the agent's episode with a stop message instead of aborting the whole
    evaluation; the episode is then scored as it stands.  ``forfeits`` counts them.
    """

    def __init__(self, inner: Any):
        self.inner = inner
        self.policy_id = inner.policy_id
        self.accepts_seeds = bool(getattr(inner, "accepts_seeds", False))
        self.batchable = bool(getattr(inner, "batchable", True))
        self.forfeits: list[str] = []

    def reset(self, seed: int | None = None) -> None:
        reset = getattr(self.inner, "reset", None)
        if reset is not None:
            reset(seed)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        from ..policies.base import PolicyError

        try:
            return self.inner.act(messages, tools)
        except PolicyError as exc:
            self.forfeits.append(str(exc)[:300])
            return FORFEIT

    def act_batch(self, requests: list[Any], seeds: list[int | None] | None = None) -> list[str]:
        from ..policies.base import PolicyError, act_batch

        try:
            return act_batch(self.inner, requests, seeds)
        except PolicyError:  # answer one at a time so that only the failing episodes forfeit
            out = []
            for i, (m, t) in enumerate(requests):
                if seeds is not None and hasattr(self.inner, "reset"):
                    self.inner.reset(seeds[i])
                out.append(self.act(m, t))
            return out
