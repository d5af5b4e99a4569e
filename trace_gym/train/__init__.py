"""GRPO + LoRA training of LLM agents on trace-gym environments (needs the ``train`` extra).

* :func:`train` / :class:`TrainConfig` — the ``trace-gym train`` command's engine,
  built on TRL's ``GRPOTrainer`` and PEFT (see :mod:`trace_gym.train.trainer`);
* :class:`EnvRolloutFunc`, :func:`env_reward`, :func:`seed_dataset` — the pieces to
  hand any trace-gym env to your own ``GRPOTrainer`` (see :mod:`trace_gym.train.integration`);
* :func:`collect_episodes` — play episodes with any policy, for any RL library.

Heavy imports (torch, transformers, trl) happen only when a function that needs
them is called.
"""

from __future__ import annotations

from .config import ConfigError, TrainConfig, load_config
from .integration import EpisodeRecord, collect_episodes, grpo_trainer_kwargs
from .rollout_func import EnvRolloutFunc, RolloutStats, env_reward, seed_dataset
from .trainer import TrainResult, train

__all__ = [
    "TrainConfig", "ConfigError", "load_config", "train", "TrainResult",
    "EnvRolloutFunc", "RolloutStats", "env_reward", "seed_dataset",
    "collect_episodes", "EpisodeRecord", "grpo_trainer_kwargs",
]
