"""GRPO + LoRA training of LLM agents on trace-gym environments (needs the ``train`` extra).

* :func:`train` / :class:`TrainConfig` — the ``trace-gym train`` command's engine,
  built on TRL's ``GRPOTrainer`` and PEFT (see :mod:`trace_gym.train.trainer`);
  :func:`grpo_trainer_class` — that ``GRPOTrainer`` subclass, whose loss computes a
  group's shared prompt prefix once (see :mod:`trace_gym.train.shared_prefix`);
* :class:`EnvRolloutFunc`, :func:`env_reward`, :func:`seed_dataset` — the pieces that
  hand any trace-gym env to your own ``GRPOTrainer``
  (:func:`trace_gym.integrations.trl.grpo_trainer_kwargs` puts them together);
* :func:`warm_start` / :func:`train_with_warm_start` — LoRA SFT on reference episodes
  (:func:`build_demonstrations`) before GRPO (see :mod:`trace_gym.train.sft`).

Heavy imports (torch, transformers, trl) happen only when a function that needs
them is called.
"""

from __future__ import annotations

from .config import ConfigError, TrainConfig, load_config
from .demos import Demonstration, build_demonstrations
from .rollout_func import EnvRolloutFunc, RolloutStats, env_reward, seed_dataset
from .sft import WarmStartResult, train_with_warm_start, warm_start
from .trainer import TrainResult, grpo_trainer_class, train

__all__ = [
    "TrainConfig", "ConfigError", "load_config", "train", "TrainResult", "grpo_trainer_class",
    "EnvRolloutFunc", "RolloutStats", "env_reward", "seed_dataset",
    "Demonstration", "build_demonstrations", "WarmStartResult", "warm_start", "train_with_warm_start",
]
