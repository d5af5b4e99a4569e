"""The pieces each compared method is built from: models, task splits, budgeted envs.

Capability env factories, training and the forfeiting evaluation wrapper are the
pipeline's (:mod:`trace_gym.pipeline`), re-exported here.

Everything here is a plain function over a :class:`~trace_gym.compare.pipeline.CompareConfig`
(passed as ``cfg``); :mod:`trace_gym.compare.pipeline` strings them into resumable stages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from ..pipeline.evaluation import FORFEIT, ForfeitOnError
from ..pipeline.stages import capability_factory
from ..pipeline.training import plan_train_steps, train_adapter, worst_rollouts_per_step
from .budget import BudgetedEnv, RolloutBudget

__all__ = [
    "TaskPoolEnv",
    "load_base_policy",
    "trainable",
    "train_model_name",
    "target_domain",
    "target_has_gold",
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
    """The base weights and tokenizer, loaded once per process and kept in CPU memory (callers get copies of the
    weights on their device), so that no accelerator memory is held between the stages of a comparison."""
    key = (model, seed)
    if key not in _MODELS:
        from ..policies import hf
        from ..policies.model_registry import model_spec

        spec = model_spec(model)
        if spec is not None:
            _MODELS[key] = spec.load(seed, None, "cpu")
        else:
            pol = hf.HFPolicy.from_pretrained(train_model_name(model), device="cpu")
            _MODELS[key] = (pol.model, pol.tokenizer)
    return _MODELS[key]


def load_base_policy(model: str, *, seed: int = 0, **gen: Any) -> Any:
    """A fresh base policy: ``tiny`` (random tiny Llama), ``smollm2``, ``hf:NAME`` or a folder/hub name, or a
    server/script spec (``openai:URL#MODEL``, ``scripted:FILE``): what
    :func:`~trace_gym.policies.policy_from_spec` builds, except that a trainable model's weights come from
    this module's cache.

    Local models are loaded once per process; each policy gets its own copy of the weights (on the GPU when
    there is one), because loading adapters modifies the model it is given.
    """
    import copy

    gen = {k: v for k, v in gen.items() if v is not None}
    if not trainable(model):
        from ..policies import policy_from_spec

        return policy_from_spec(model, seed=seed, **gen)
    import torch

    from ..policies.hf import HFPolicy

    weights, tok = _pristine(model, seed)
    keep = {k: gen[k] for k in ("max_new_tokens", "greedy", "temperature", "top_k", "top_p", "batch_size") if k in gen}
    from ..policies.model_registry import is_plumbing

    device = "cuda" if torch.cuda.is_available() and not is_plumbing(model) else "cpu"
    return HFPolicy(copy.deepcopy(weights).to(device), tok, policy_id=model, seed=seed, **keep)


def trainable(model: str) -> bool:
    """Whether the trainer can put LoRA adapters on ``model`` (:func:`trace_gym.policies.kinds.trainable`: a
    transformers model, not a server, a script or a llama.cpp policy)."""
    from ..policies.kinds import trainable as kind_trainable

    return kind_trainable(model)


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


def classifier_policy(model: str, weights: str, manifest: str | Path, trace: dict[str, Any], *, seed: int,
                      gen: dict[str, Any], policy_id: str) -> Any:
    """TRACE's per-capability adapters routed by the paper's classifier router: the base model (``weights``, loaded
    with transformers for scoring, whatever acts) picks one of the adapters' capabilities or none from their
    definitions, the nearest indexed examples and the conversation's request and offered tools
    (:class:`~trace_gym.route.classifier.ClassifierRouter`)."""
    import json

    from ..route.classifier import ClassifierRouter
    from ..route.index import RouterIndex
    from ..route.policy import AdapterPolicy, RoutedPolicy
    from ..route.registry import AdapterRegistry
    from ..route.retrieval import RetrievalRouter
    from ..train.models import load_model_and_tokenizer

    adapters = [a["adapter"] for a in trace.get("adapters") or []]
    caps = json.loads(Path(trace["analysis"]["capabilities_json"]).read_text(encoding="utf-8"))["capabilities"]
    definitions = {c["capability"]: c.get("definition") or "" for c in caps}
    descriptions = {a["adapter"]: definitions.get(a["capability"], a["capability"]) for a in trace.get("adapters") or []}
    scorer, tokenizer = load_model_and_tokenizer(weights[3:] if weights.startswith("hf:") else weights, seed=seed)
    scorer.eval()
    router = ClassifierRouter(scorer, tokenizer, retrieval=RetrievalRouter(RouterIndex.load(trace["routing"]["index"])),
                              labels=adapters, descriptions=descriptions)
    base = load_base_policy(model, seed=seed, **gen)
    pol = RoutedPolicy(AdapterPolicy(base, AdapterRegistry(manifest), names=adapters), router, {a: a for a in adapters})
    pol.policy_id = policy_id
    return pol


# ----------------------------------------------------------------------------- targets
def target_domain(env_id: str, env_kwargs: dict[str, Any] | None = None) -> str | None:
    """The tool domain of a target that capability envs can be synthesized for, or ``None`` (its task source's)."""
    from ..core.tasks import task_source_for

    return task_source_for(env_id, env_kwargs).domain


def target_has_gold(env_id: str, env_kwargs: dict[str, Any] | None = None, *, probe: int = 3) -> bool:
    """Whether the target's tasks have gold references (what the offline analysis labels from); the first
    ``probe`` tasks of its default split are asked."""
    from ..core.tasks import task_source_for

    src = task_source_for(env_id, env_kwargs)
    tasks = src.task_ids()[:probe]
    return bool(tasks) and all(src.gold(t) is not None for t in tasks)


def _seeded_order(items: list[str], seed: int) -> list[str]:
    order = np.random.default_rng(seed).permutation(len(items))
    return [items[i] for i in order]


TRAIN_FRACTION = 0.6  # of a target without a train/test split


def target_splits(env_id: str, *, seed: int, n_train: int | None = None, n_test: int | None = None,
                  env_kwargs: dict[str, Any] | None = None, train_split: str = "train",
                  test_split: str = "test") -> tuple[list[str], list[str], str]:
    """``(train task ids, held-out task ids, how they were obtained)`` for a target.

    A target whose task source has the splits ``train_split`` and ``test_split`` (default ``train`` and
    ``test``; e.g. ToolSandbox's ``fold_b`` and ``fold_a`` to swap its folds) uses them; any other target's
    default split is split here, a seeded 60/40, and naming other splits than the defaults raises
    :class:`~trace_gym.core.tasks.UnknownSplitError`.  The two splits must not share a task.  ``n_train``/``n_test`` keep
    the first tasks of a seeded order of each split, taken in turn from each of the task
    source's report groups (so a few held-out tasks still span the categories).
    """
    from ..core.tasks import task_source_for

    src = task_source_for(env_id, env_kwargs)
    if {train_split, test_split} <= set(src.splits()):
        train, test = src.task_ids(train_split), src.task_ids(test_split)
        if set(train) & set(test):
            raise ValueError(f"{env_id}: splits {train_split!r} and {test_split!r} share tasks; pick two that do not")
        how = (f"{env_id}: its own train/test split" if (train_split, test_split) == ("train", "test")
               else f"{env_id}: its splits {train_split} (learning) and {test_split} (held out)")
    elif (train_split, test_split) != ("train", "test"):
        from ..core.tasks import UnknownSplitError

        missing = [s for s in (train_split, test_split) if s not in src.splits()]
        raise UnknownSplitError(f"{env_id} has no split {', '.join(map(repr, missing))}; its splits are {list(src.splits())}")
    else:
        every = src.task_ids()
        shuffled = _seeded_order(every, seed)
        cut = int(round(TRAIN_FRACTION * len(shuffled)))
        train, test = shuffled[:cut], shuffled[cut:]
        how = (f"{env_id} has no train/test split: the {len(every)} tasks of its {src.default_split()!r} split, "
               f"cut {round(100 * TRAIN_FRACTION)}/{round(100 * (1 - TRAIN_FRACTION))} (seed {seed})")
    train, test = _by_group(_seeded_order(train, seed + 1), src.group), _by_group(_seeded_order(test, seed + 2), src.group)
    if n_train is not None:
        train = train[:n_train]
    if n_test is not None:
        test = test[:n_test]
    return train, test, how


def _by_group(order: list[str], group: Callable[[str], str]) -> list[str]:
    """``order`` interleaved by report group: one task of each group in turn (groups by first appearance)."""
    queues: dict[str, list[str]] = {}
    for t in order:
        queues.setdefault(group(t), []).append(t)
    out: list[str] = []
    while len(out) < len(order):
        for q in queues.values():
            if q:
                out.append(q.pop(0))
    return out


class TaskPoolEnv(gym.Wrapper):
    """Reset without a task option plays ``tasks[seed % len(tasks)]``: a seed-indexed task pool (e.g. a train split).

    The task's reset options come from the env's task source; ``option`` names the reset
    option to fill in directly instead (for an env without a task source).
    """

    def __init__(self, env: gym.Env, tasks: list[Any], option: str | None = None):
        super().__init__(env)
        if not tasks:
            raise ValueError("TaskPoolEnv needs at least one task")
        self.tasks = list(tasks)
        self._source = None
        if option is None:
            from ..core.tasks import task_source

            self._source = task_source(env)
            option = self._source.option_key
        self.option = option

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        opts = dict(options or {})
        if self.option not in opts:
            task = self.tasks[(seed or 0) % len(self.tasks)]
            opts.update(self._source.reset_options(str(task)) if self._source is not None else {self.option: task})
        return self.env.reset(seed=seed, options=opts)


def target_factory(env_id: str, env_kwargs: dict[str, Any], budget: RolloutBudget | None, stage: str,
                   tasks: list[Any] | None = None, option: str | None = None) -> Callable[[], gym.Env]:
    """Fresh instances of the target env, optionally restricted to ``tasks`` and charged to ``budget``."""

    def make() -> gym.Env:
        env: gym.Env = gym.make(env_id, disable_env_checker=True, **env_kwargs)
        if tasks is not None:
            env = TaskPoolEnv(env, tasks, option)
        if budget is not None:
            env = BudgetedEnv(env, budget, stage)
        return env

    return make


def held_out_routing_of(trace: dict[str, Any], base_store: str | Path, *, seed: int = 0) -> dict[str, Any] | None:
    """Where TRACE's router sends the held-out tasks, against the analysis labels of the base model's episodes on
    them (:func:`trace_gym.pipeline.routing.held_out_routing`); ``None`` without a router index or base episodes."""
    from ..eval.floor import RefusalPolicy
    from ..pipeline.routing import held_out_routing
    from ..pipeline.stages import Analysis
    from ..pipeline.training import TrainedAdapter
    from ..rollout import TrajectoryStore

    index = (trace.get("routing") or {}).get("index")
    if not index or not trace.get("analysis") or not trace.get("adapters") or not Path(base_store).exists():
        return None
    base = [t for t in TrajectoryStore(base_store).load() if t.policy_id != RefusalPolicy.policy_id]
    if not base:
        return None
    return held_out_routing(base, Analysis.from_dict(trace["analysis"]),
                            [TrainedAdapter.from_dict(a) for a in trace["adapters"]], index, seed=seed)
