"""Using trace-gym envs from other trainers.

With your own TRL ``GRPOTrainer``
---------------------------------
:func:`grpo_trainer_kwargs` returns the three arguments that connect an env to
TRL: a ``train_dataset`` of env seeds, a ``rollout_func`` that plays G episodes per
seed through the env (tool results and user turns come from the env and are masked
out of the loss), and ``reward_funcs`` returning the env's reward::

    import gymnasium as gym
    from trl import GRPOConfig, GRPOTrainer
    from trace_gym.train import grpo_trainer_kwargs

    args = GRPOConfig(output_dir="runs/x", num_generations=8, per_device_train_batch_size=8,
                      max_completion_length=1024, beta=0.0, epsilon_high=0.28, loss_type="dapo", max_steps=100)
    trainer = GRPOTrainer(
        model=model, args=args, processing_class=tokenizer, peft_config=my_lora_config,
        **grpo_trainer_kwargs("trace/cap-refund-policy-v0", seeds=range(256), num_generations=8),
    )
    trainer.train()

Keep ``num_generations`` equal to the ``GRPOConfig`` value.  Everything else in
``GRPOConfig`` is yours; the rollout function samples with the trainer's own
generation settings (temperature, top-p/k) and back end (vLLM when ``use_vllm``).
To also compute each group's shared prompt prefix once in the loss (same loss
and gradients, far less compute on long prompts), build the trainer from
``trace_gym.train.grpo_trainer_class()`` instead of ``GRPOTrainer``.

With any other RL library
-------------------------
:func:`collect_episodes` plays one episode per seed with any policy and returns
plain records (messages, actions, rewards, reward breakdown), so a library can do
its own credit assignment::

    records = collect_episodes(env, lambda obs, info: my_model(obs), seeds=range(16))
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EpisodeRecord", "collect_episodes", "grpo_trainer_kwargs"]


@dataclass
class EpisodeRecord:
    """One played episode (text level)."""

    seed: int
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    reward_info: dict[str, Any] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    termination_reason: str | None = None
    reset_info: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def steps(self) -> int:
        return len(self.actions)


def _as_policy_fn(policy: Any) -> Callable[[str, dict[str, Any]], str]:
    act = getattr(policy, "act", None)
    if callable(act):  # a trace_gym.policies Policy: act(messages, tools)
        return lambda obs, info: act(list(info.get("messages") or [{"role": "user", "content": obs}]), list(info.get("tools") or []))
    if callable(policy):
        return policy
    raise TypeError(f"policy must be callable as policy(observation, info) or have act(messages, tools); got {type(policy).__name__}")


def collect_episodes(
    env: Any,
    policy_fn: Any,
    seeds: Iterable[int],
    *,
    options: dict[str, Any] | None = None,
    max_steps: int | None = None,
) -> list[EpisodeRecord]:
    """Play one episode per seed and return the records.

    ``env``: a Gymnasium env instance or a registered env id.  ``policy_fn``:
    ``policy_fn(observation, info) -> action`` or an object with
    ``act(messages, tools)`` (a trace-gym policy).  ``max_steps`` stops an episode
    that the env would let run longer (it is then marked truncated, reward 0).
    """
    import gymnasium as gym

    if isinstance(env, str):
        import trace_gym  # noqa: F401  (registers trace/* ids)

        env = gym.make(env, disable_env_checker=True)
    fn = _as_policy_fn(policy_fn)
    reset = getattr(policy_fn, "reset", None) if hasattr(policy_fn, "act") else None
    records = []
    for seed in seeds:
        t0 = time.perf_counter()
        if callable(reset):  # per-episode policy state (e.g. a scripted policy's position)
            reset(int(seed))
        obs, info = env.reset(seed=int(seed), options=options)
        rec = EpisodeRecord(seed=int(seed), observations=[obs], reset_info={k: v for k, v in info.items() if k not in ("messages", "tools")})
        while True:
            action = fn(obs, info)
            obs, reward, terminated, truncated, info = env.step(action)
            rec.actions.append(action)
            rec.observations.append(obs)
            rec.rewards.append(float(reward))
            if terminated or truncated:
                rec.terminated, rec.truncated = bool(terminated), bool(truncated)
                rec.reward = float(reward)
                rec.reward_info = dict(info.get("reward_info") or {})
                rec.termination_reason = info.get("termination_reason")
                break
            if max_steps is not None and len(rec.actions) >= max_steps:
                rec.truncated = True
                rec.termination_reason = "collect_max_steps"
                break
        rec.messages = list(info.get("messages") or [])
        rec.seconds = time.perf_counter() - t0
        records.append(rec)
    return records


def grpo_trainer_kwargs(
    env: str | Callable[[], Any],
    *,
    seeds: Iterable[int],
    num_generations: int,
    env_kwargs: dict[str, Any] | None = None,
    generate: Any = None,
    sampler: Any = None,
    **rollout_options: Any,
) -> dict[str, Any]:
    """``train_dataset``, ``rollout_func`` and ``reward_funcs`` for ``trl.GRPOTrainer`` on a trace-gym env.

    ``env`` is a registered env id or a factory returning a fresh env.
    ``rollout_options`` are :class:`~trace_gym.train.config.TrainConfig` fields the
    :class:`~trace_gym.train.rollout_func.EnvRolloutFunc` reads (``hint_fraction``, ``max_resamples``,
    ``max_new_tokens_per_turn``, ``max_completion_length`` (keep it equal to ``GRPOConfig``'s), ``max_turns``,
    ``shared_prefix``, ...; an unknown or invalid one is a :class:`~trace_gym.train.config.ConfigError`);
    ``generate`` or ``sampler`` replace its sampler (see that class).
    """
    from .config import TrainConfig
    from .rollout_func import EnvRolloutFunc, env_reward, seed_dataset
    from .trainer import make_env_factory

    config = TrainConfig().with_overrides(num_generations=num_generations, **rollout_options).validate()
    factory = make_env_factory(env, env_kwargs) if isinstance(env, str) else env
    return {
        "train_dataset": seed_dataset(list(seeds)),
        "rollout_func": EnvRolloutFunc(factory, config, generate=generate, sampler=sampler),
        "reward_funcs": [env_reward],
    }
