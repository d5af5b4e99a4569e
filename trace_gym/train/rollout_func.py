"""A TRL ``rollout_func`` that plays trace-gym episodes: :class:`EnvRolloutFunc`.

TRL's ``GRPOTrainer`` hands the rollout function the batch of dataset prompts,
each repeated ``num_generations`` times in a row.  Here a prompt only names an env
seed (see :func:`seed_dataset`); each run of G identical prompts is one GRPO group:
G episodes of the env on that seed, sampled from the current policy.

What the function adds on top of plain episode playing:

* **Hints.**  When the env reports ``info["hint_shown"]`` and ``hint_fraction`` is
  set, a fixed share (``hint_fraction``, rounded per group) of each group's
  episodes is reset with the hint on, chosen by a seeded draw; the others with it
  off (``hint_fraction=None`` leaves the choice to the env).  A hinted episode is
  sampled from the hinted prompt but handed to the loss with the hint-free prompt
  (``info["prompt_messages_without_hint"]``), so the policy learns to act without it.
* **Constant groups.**  A group whose episodes all got the same reward carries no
  GRPO signal; it is replayed on a fresh, derived seed up to ``max_resamples``
  times.  One still constant afterwards is kept for shape but, with
  ``drop_constant_groups``, its mask is all zeros so it adds no loss tokens.
* **Budget.**  Every env episode played (resamples included) is counted in
  :attr:`EnvRolloutFunc.stats`, which checkpoints save and resumes restore.

It returns ``prompt_ids``, ``completion_ids``, ``logprobs`` (the sampler's log-prob of each
completion token when it reports them, as vLLM does, for TRL's importance-sampling
correction; ``None`` otherwise, and the loss recomputes them), ``env_mask`` (TRL's mask of
agent tokens) and per-episode fields for the reward function :func:`env_reward`.

In a data-parallel run whose sampler is a collective (vLLM in server mode, colocated tensor
parallelism, ``generate`` on a sharded model) the processes play in lock step: each keeps
calling the sampler, padded with filler prompts, until every process's episodes and
resamples have ended, so processes whose episodes take different numbers of turns do not
wait on each other forever.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .chat import ChatRenderer
from .config import TrainConfig
from .episodes import EpisodeRequest, GenerateFn, Lockstep, TokenEpisode, run_token_episodes

__all__ = ["EnvRolloutFunc", "RolloutStats", "env_reward", "seed_dataset", "seed_prompt", "parse_seed_prompt", "derived_seed"]

_PROMPT_KEY = "trace_gym_seed"


def seed_prompt(seed: int) -> str:
    """The dataset prompt that stands for one env seed."""
    return json.dumps({_PROMPT_KEY: int(seed)})


def parse_seed_prompt(prompt: Any) -> int:
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):  # a conversational dataset row
        prompt = prompt[-1].get("content")
    try:
        data = json.loads(prompt) if isinstance(prompt, str) else None
        return int(data[_PROMPT_KEY])  # type: ignore[index]
    except (TypeError, ValueError, KeyError, json.JSONDecodeError):
        raise ValueError(f"not a trace-gym seed prompt: {prompt!r}; build the dataset with seed_dataset()") from None


def seed_dataset(seeds: Sequence[int]):
    """A ``datasets.Dataset`` with one ``prompt`` per env seed, for ``GRPOTrainer(train_dataset=...)``."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [seed_prompt(s) for s in seeds], "env_seed": [int(s) for s in seeds]})


def derived_seed(base_seed: int, seed: int, attempt: int) -> int:
    """The env seed of resample ``attempt`` (>= 1) of ``seed``: a hash, so it never depends on batch order."""
    if attempt == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(base_seed) & 0xFFFFFFFF, int(seed) & 0xFFFFFFFF, attempt, 0x7E1C]).generate_state(1)[0] % (2**31 - 1))


def env_reward(completions: list[Any], env_reward: list[float] | None = None, **_: Any) -> list[float]:
    """TRL reward function: the reward the environment gave each episode (passed through by the rollout function)."""
    if env_reward is None:
        raise ValueError("env_reward needs the 'env_reward' field that EnvRolloutFunc returns; use it with rollout_func=EnvRolloutFunc(...)")
    return [float(r) for r in env_reward]


env_reward.__name__ = "env_reward"


@dataclass
class RolloutStats:
    """Rollout budget accounting, cumulative over a run (saved in checkpoints)."""

    rollouts: int = 0  # env episodes played, resamples included
    groups: int = 0  # groups handed to the loss
    resampled_groups: int = 0  # draws replaced because their rewards were constant
    dropped_groups: int = 0  # groups still constant after resampling (masked out)
    constant_groups: int = 0  # groups still constant after resampling (zero advantage, dropped or not)
    hinted_rollouts: int = 0
    agent_tokens: int = 0
    env_tokens: int = 0
    calls: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class EnvRolloutFunc:
    """Callable ``rollout_func(prompts, trainer)`` for TRL's ``GRPOTrainer`` that plays episodes of one env.

    ``env_factory`` makes a fresh env instance (e.g. ``lambda: gym.make(ENV_ID).unwrapped``); ``config`` is the
    run's :class:`~trace_gym.train.config.TrainConfig`, of which the rollout settings are read: ``num_generations``,
    ``seed`` (the base of derived seeds and hint draws), the hint, constant-group and token-budget settings, the
    prompt rendering, ``shared_prefix`` and ``sampling_lookahead`` (validated by the caller, as the trainer does).

    The sampler of each call: ``generate`` when given; else ``sampler(trainer, stop_strings)``, made afresh at
    every call (e.g. :class:`~trace_gym.train.generation.LlamaCppSampler`, ``backend=llamacpp``); else vLLM when
    the trainer uses it; else :func:`~trace_gym.train.generation.transformers_generate_fn` on the trainer's model
    (the one decoding loop over merged weights, with ``sampling_lookahead`` prompt-lookup drafts, reusing the keys
    and values of the prefix the episodes share unless ``shared_prefix`` is off).
    """

    def __init__(self, env_factory: Callable[[], Any], config: TrainConfig, *, generate: GenerateFn | None = None,
                 sampler: Callable[[Any, tuple[str, ...]], GenerateFn] | None = None):
        if not isinstance(config, TrainConfig):
            raise TypeError(f"EnvRolloutFunc takes the run's TrainConfig, got {type(config).__name__}")
        if config.num_generations < 1:
            raise ValueError(f"num_generations must be >= 1, got {config.num_generations}")
        self.env_factory = env_factory
        self.config = config
        self.num_generations = int(config.num_generations)
        self.base_seed = int(config.seed)
        self.generate = generate
        self.sampler = sampler  # (trainer, stop strings) -> the GenerateFn of one call, in place of the built-in ones
        self.stats = RolloutStats()
        self.last_episodes: list[TokenEpisode] = []  # the episodes of the latest call (for inspection)
        self.reward_history: list[float] = []  # mean env reward of each call, dropped groups included
        self._envs: list[Any] = []
        self._renderer: ChatRenderer | None = None
        self._supports_hints: bool | None = None

    # ------------------------------------------------------------------ checkpoint state
    def state_dict(self) -> dict[str, Any]:
        return {"stats": self.stats.to_dict(), "reward_history": list(self.reward_history)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stats = RolloutStats(**state.get("stats", {}))
        self.reward_history = [float(x) for x in state.get("reward_history", [])]

    # ------------------------------------------------------------------ helpers
    def supports_hints(self) -> bool:
        """Whether the env reports ``hint_shown`` (probed once with a reset on the base seed)."""
        if self._supports_hints is None:
            env = self._env_pool(1)[0]
            _, info = env.reset(seed=self.base_seed)
            self._supports_hints = "hint_shown" in info
        return self._supports_hints

    def _env_pool(self, n: int) -> list[Any]:
        while len(self._envs) < n:
            self._envs.append(self.env_factory())
        return self._envs[:n]

    def hint_mask(self, seed: int, attempt: int, size: int) -> list[bool]:
        """Which members of a group see the hint: exactly ``round(hint_fraction * size)``, at seeded positions."""
        k = int(round((self.config.hint_fraction or 0.0) * size))
        rng = np.random.default_rng([self.base_seed & 0xFFFFFFFF, int(seed) & 0xFFFFFFFF, attempt, 0x4817])
        chosen = set(rng.permutation(size)[:k].tolist())
        return [i in chosen for i in range(size)]

    def _requests(self, seed: int, attempt: int, size: int) -> list[EpisodeRequest]:
        env_seed = derived_seed(self.base_seed, seed, attempt)
        if self.config.hint_fraction is None or not self.supports_hints():
            return [EpisodeRequest(env_seed, None) for _ in range(size)]
        return [EpisodeRequest(env_seed, h) for h in self.hint_mask(seed, attempt, size)]

    def renderer(self, tokenizer: Any) -> ChatRenderer:
        if self._renderer is None or self._renderer.tokenizer is not tokenizer:
            cfg = self.config
            self._renderer = ChatRenderer(tokenizer, cfg.tools_in_prompt, cfg.tool_listing, cfg.tool_format)
        return self._renderer

    def play(self, groups: list[tuple[int, int]], tokenizer: Any, generate: GenerateFn, stop_texts: Sequence[str],
             context: int | None = None, lockstep: Lockstep | None = None) -> list[list[TokenEpisode]]:
        """Play ``[(seed, group size), ...]``, resampling constant groups; returns the episodes per group.
        ``context``: the model's context in tokens (episodes that fill it end as truncated); ``lockstep``: the
        processes of a distributed run sample together (see :func:`~trace_gym.train.episodes.run_token_episodes`)
        until every process has played its resamples."""
        renderer = self.renderer(tokenizer)
        attempts = [0] * len(groups)
        results: list[list[TokenEpisode] | None] = [None] * len(groups)
        pending = list(range(len(groups)))
        while pending if lockstep is None else lockstep([int(bool(pending))])[0]:
            requests: list[EpisodeRequest] = []
            for g in pending:
                seed, size = groups[g]
                requests.extend(self._requests(seed, attempts[g], size))
            episodes = run_token_episodes(
                self.env_factory, requests, renderer, generate,
                stop_texts=stop_texts,
                max_new_tokens_per_turn=self.config.max_new_tokens_per_turn,
                max_completion_length=self.config.max_completion_length,
                max_turns=self.config.max_turns,
                truncated_reward=None if self.config.truncated_reward is None else float(self.config.truncated_reward),
                hint_option=self.config.hint_option,
                envs=self._env_pool(len(requests)),
                context=context,
                lockstep=lockstep,
            )
            self.stats.rollouts += len(episodes)
            still: list[int] = []
            pos = 0
            for g in pending:
                size = groups[g][1]
                eps = episodes[pos : pos + size]
                pos += size
                results[g] = eps
                constant = size > 1 and len({e.reward for e in eps}) == 1
                if constant and self.config.resample_constant_groups and attempts[g] < self.config.max_resamples:
                    attempts[g] += 1
                    self.stats.resampled_groups += 1
                    still.append(g)
            pending = still
        return [r for r in results if r is not None]

    def sampler_for(self, trainer: Any) -> tuple[GenerateFn, int | None]:
        """The ``GenerateFn`` of one rollout call and the context (in tokens) its episodes must fit:
        ``generate`` or ``sampler`` when given; else vLLM when the trainer uses it, else the transformers
        sampler; each stops a turn where the model's call format ends an action."""
        from ..policies.decoding import context_limit
        from ..policies.prompting import action_stop_strings
        from .generation import transformers_generate_fn

        stops = action_stop_strings(self.renderer(trainer.processing_class).tool_format)
        context = context_limit(trainer.model)
        if self.generate is not None:
            return self.generate, context
        if self.sampler is not None:
            return self.sampler(trainer, stops), context
        if getattr(trainer, "use_vllm", False):
            from .vllm import vllm_context, vllm_generate_fn

            known = [c for c in (context, vllm_context(trainer)) if c is not None]  # the engine's may be shorter
            return vllm_generate_fn(trainer, stops), (min(known) if known else None)
        return transformers_generate_fn(trainer, prefix_cache=self.config.shared_prefix,
                                        lookahead=self.config.sampling_lookahead,
                                        stop_strings=stops), context

    # ------------------------------------------------------------------ the TRL entry point
    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        from .generation import stop_token_ids
        from .vllm import awake, needs_lockstep

        seeds = [parse_seed_prompt(p) for p in prompts]
        groups: list[tuple[int, int]] = []
        for s in seeds:  # consecutive equal seeds form one group
            if groups and groups[-1][0] == s and groups[-1][1] < self.num_generations:
                groups[-1] = (s, groups[-1][1] + 1)
            else:
                groups.append((s, 1))
        tok = trainer.processing_class
        generate, context = self.sampler_for(trainer)
        stop_texts = [tok.decode([i]) for i in stop_token_ids(trainer)]
        lockstep = (lambda values: _max_across_processes(trainer, values)) if needs_lockstep(trainer) else None
        before = self.stats.to_dict()
        with awake(trainer):
            per_group = self.play(groups, tok, generate, stop_texts, context=context, lockstep=lockstep)

        out: dict[str, list[Any]] = {k: [] for k in ("prompt_ids", "completion_ids", "env_mask", "env_reward", "hint_shown", "env_seed", "turns", "constant_group")}
        logprobs: list[list[float]] | None = []
        hinted = 0
        for eps in per_group:
            constant = len(eps) > 1 and len({e.reward for e in eps}) == 1
            drop = constant and self.config.drop_constant_groups
            self.stats.groups += 1
            self.stats.dropped_groups += int(drop)
            self.stats.constant_groups += int(constant)
            for e in eps:
                completion = e.completion_ids if e.completion_ids else [tok.eos_token_id]
                mask = e.env_mask if e.completion_ids else [0]
                if logprobs is not None and e.logprobs is not None:
                    logprobs.append(list(e.logprobs) if e.completion_ids else [0.0])
                else:
                    logprobs = None
                if drop:
                    mask = [0] * len(mask)
                out["prompt_ids"].append(list(e.prompt_ids))
                out["completion_ids"].append(list(completion))
                out["env_mask"].append(list(mask))
                out["env_reward"].append(e.reward)
                out["hint_shown"].append(e.hint_shown)
                out["env_seed"].append(e.seed)
                out["turns"].append(e.turns)
                out["constant_group"].append(constant)
                hinted += int(e.hint_shown)
                self.stats.agent_tokens += sum(mask)
                self.stats.env_tokens += len(mask) - sum(e.env_mask)
        self.stats.hinted_rollouts += hinted
        self.stats.calls += 1
        self.last_episodes = [e for eps in per_group for e in eps]
        rewards = out["env_reward"]
        reward_sum, count = float(np.sum(rewards)) if rewards else 0.0, len(rewards)
        self._sum_across_processes(trainer, before)
        reward_sum, count, hinted = _sum_across_processes(trainer, [reward_sum, count, hinted])
        self.reward_history.append(reward_sum / count if count else 0.0)
        self._log(trainer, int(count), int(hinted))
        result: dict[str, Any] = dict(out)
        result["logprobs"] = logprobs  # the sampler's, when it reported them (vLLM); else None: the loss recomputes
        return result

    def _sum_across_processes(self, trainer: Any, before: dict[str, int]) -> None:
        """Make :attr:`stats` count every process's rollouts (data-parallel runs): each process adds all increments."""
        fields = [f for f in before if f != "calls"]  # calls: rollout batches, the same count on every process
        mine = [getattr(self.stats, f) - before[f] for f in fields]
        total = _sum_across_processes(trainer, mine)
        if total is not mine:
            summed = {f: before[f] + int(round(t)) for f, t in zip(fields, total, strict=True)}
            self.stats = RolloutStats(**{**self.stats.to_dict(), **summed})

    def _log(self, trainer: Any, n: int, hinted: int) -> None:
        metrics = getattr(trainer, "_metrics", None)
        if metrics is None:
            return
        mode = "train" if getattr(trainer.model, "training", True) else "eval"
        m = metrics[mode]
        m["trace/rollouts_total"].append(float(self.stats.rollouts))
        m["trace/resampled_groups_total"].append(float(self.stats.resampled_groups))
        m["trace/dropped_groups_total"].append(float(self.stats.dropped_groups))
        m["trace/hint_fraction"].append(hinted / n if n else 0.0)
        turns = [e.turns for e in self.last_episodes]
        m["trace/turns_mean"].append(float(np.mean(turns)) if turns else 0.0)


def _sum_across_processes(trainer: Any, values: list[float]) -> list[float]:
    """``values`` summed over the processes of a distributed run (the same list, untouched, in a single process)."""
    return _reduce(trainer, values, "sum")


def _max_across_processes(trainer: Any, values: Sequence[int]) -> list[int]:
    """``values`` element-wise maximum over the processes of a distributed run (a :data:`Lockstep`)."""
    return [int(round(v)) for v in _reduce(trainer, list(values), "max")]


def _reduce(trainer: Any, values: list[float], reduction: str) -> list[float]:
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is None or getattr(accelerator, "num_processes", 1) <= 1:
        return values
    import torch

    total = accelerator.reduce(torch.tensor([float(v) for v in values], dtype=torch.float64, device=accelerator.device), reduction=reduction)
    return [float(x) for x in total.cpu().tolist()]
