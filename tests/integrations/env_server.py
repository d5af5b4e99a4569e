"""``trace-gym serve`` started for real on 127.0.0.1 (a child process), and the in-process episodes it must match."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.integrations.openenv import json_safe
from trace_gym.integrations.openenv_server import ServerProcess

ENV = "trace/cap-refund-policy-v0"
ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 300  # a busy machine is slow to import OpenEnv (gradio)


def start_server(*args: str, env_id: str = ENV) -> ServerProcess:
    """``trace-gym serve ENV *args`` from this tree, up and healthy."""
    return ServerProcess(env_id, *args, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT),
                         start_timeout_s=START_TIMEOUT_S)


def in_process(seed: int, env_id: str = ENV) -> tuple[list, list[str]]:
    """(reset then each step's (text, reward, done, info) as JSON, the actions) for the reference episode of seed."""
    env = gym.make(env_id, disable_env_checker=True)
    obs, info = env.reset(seed=seed)
    actions = env.unwrapped.reference_actions()
    out = [(obs, None, False, json_safe(info))]
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        out.append((obs, float(reward), bool(term or trunc), json_safe(info)))
        if term or trunc:
            return out, actions[: len(out) - 1]
    return out, actions


def as_played(frame: dict) -> tuple:
    """An observation frame of the wire as ``(text, reward, done, info)``, like :func:`in_process`'s entries."""
    assert frame["type"] == "observation", frame
    data = frame["data"]
    return data["observation"]["text"], data["reward"], data["done"], data["observation"]["info"]
