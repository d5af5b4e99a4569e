"""A trace-gym env as a SkyRL-gym text env, in SkyRL-gym's registry (the ``skyrl`` extra).

:func:`register` puts a trace id into ``skyrl_gym``'s registry (``register_all`` every
registered trace id), so SkyRL's trainer makes it as it makes its own envs, with the
dataset row as ``extras``::

    import skyrl_gym
    from trace_gym.integrations.skyrl import register, dataset_rows

    register("trace/cap-refund-policy-v0")
    env = skyrl_gym.make("trace/cap-refund-policy-v0", env_config={}, extras={"extra_info": {"seed": 3}})
    chat, info = env.init([])          # the episode's opening (system prompt with the tools, user)
    out = env.step(model_reply)        # {"observations": [...], "reward", "done", "metadata"}

A SkyRL dataset for an env is :func:`dataset_rows` (``prompt``, ``env_class``,
``extra_info.seed``), written to parquet as SkyRL's ``data.train_data`` expects.  Each step
is one env action (the model's whole reply); ``reward`` is the env's reward on the step
that ends the episode (0 before); ``metadata`` carries the env's ``termination_reason`` and
``reward_info`` at the end.
"""

from __future__ import annotations

from typing import Any

from . import require

require("skyrl_gym", "skyrl")

import skyrl_gym  # noqa: E402
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput  # noqa: E402

from .chat import ChatEpisode  # noqa: E402

__all__ = ["TraceSkyRLEnv", "register", "register_all", "dataset_rows", "ENTRY_POINT"]

ENTRY_POINT = "trace_gym.integrations.skyrl:TraceSkyRLEnv"


def _seed(extras: dict[str, Any]) -> int | None:
    seed = extras.get("seed")
    if seed is None:
        seed = (extras.get("extra_info") or {}).get("seed")
    return None if seed is None else int(seed)


class TraceSkyRLEnv(BaseTextEnv):
    """One trace-gym episode as a SkyRL-gym ``BaseTextEnv``.

    ``env_id`` comes from the registration; the episode's seed from ``extras["seed"]`` or
    ``extras["extra_info"]["seed"]``; ``env_config`` may hold ``env_kwargs`` (``gym.make``
    kwargs), ``tool_format`` and ``tool_listing``.  ``init`` with a non-empty ``prompt`` that
    is not the episode's opening raises ``ValueError``; ``step`` after the end raises
    ``RuntimeError``.
    """

    def __init__(self, env_id: str, env_config: Any = None, extras: dict[str, Any] | None = None):
        super().__init__()
        from ..registration import make_env_factory

        config = dict(env_config or {})
        self.env_id = env_id
        self.extras = dict(extras or {})
        self.seed = _seed(self.extras)
        env = make_env_factory(env_id, config.get("env_kwargs"))()
        self.episode = ChatEpisode(env, tool_format=config.get("tool_format", "hermes"),
                                   tool_listing=config.get("tool_listing", "json"))
        self.max_turns = int(getattr(env.unwrapped, "max_steps", 100))

    def init(self, prompt: list[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        opening = self.episode.open(self.seed)
        if prompt and [(m.get("role"), m.get("content")) for m in prompt] != [(m["role"], m["content"]) for m in opening]:
            raise ValueError(f"the prompt is not the opening of {self.env_id} seed {self.seed}; build the dataset "
                             "with dataset_rows() and the same env_config")
        return opening, {"env_id": self.env_id, "seed": self.seed}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if self.episode.done:
            raise RuntimeError("the episode is over: call init() first")
        self.turns += 1
        messages, reward, done, info = self.episode.act(action)
        metadata: dict[str, Any] = {"step": info.get("step")}
        if info.get("action_error"):
            metadata["action_error"] = info["action_error"]
        if done:
            metadata["termination_reason"] = info.get("termination_reason")
            metadata["reward_info"] = info.get("reward_info") or {}
        return BaseTextEnvStepOutput(observations=[] if done else messages, reward=reward, done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        return {"turns": self.turns, "reward": self.episode.reward if self.episode.done else 0.0}

    def close(self) -> None:
        self.episode.env.close()


def register(env_id: str) -> None:
    """Register ``env_id`` (a registered trace id) in SkyRL-gym's registry under the same id (again: no-op)."""
    import gymnasium as gym

    import trace_gym  # noqa: F401  (registers the trace/* ids)

    gym.spec(env_id)  # an unknown id fails here, with Gymnasium's message
    existing = skyrl_gym.registry.get(env_id)
    if existing is not None:
        if existing.entry_point != ENTRY_POINT:
            raise ValueError(f"{env_id} is already registered in skyrl_gym by {existing.entry_point}")
        return
    skyrl_gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"env_id": env_id})


def register_all() -> list[str]:
    """Register every registered trace id (``trace/*`` and plug-ins); returns the ids."""
    from ..registration import list_envs

    ids = [env_id for env_id, _ in list_envs()]
    for env_id in ids:
        register(env_id)
    return ids


def dataset_rows(env_id: str, seeds: Any, env_config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """SkyRL dataset rows: per seed the episode's opening as ``prompt``, ``env_class`` and ``extra_info.seed``."""
    env = TraceSkyRLEnv(env_id, env_config, {})
    rows = []
    for s in seeds:
        env.seed = int(s)
        prompt, _ = env.init()
        rows.append({"prompt": prompt, "env_class": env_id, "extra_info": {"seed": int(s)}})
    env.close()
    return rows
