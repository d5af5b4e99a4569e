"""What the trainer records of an env: its capability and spec hash."""

from __future__ import annotations

import gymnasium as gym


def test_env_metadata_of_a_capability_env(tau2_data):
    from trace_gym.train.trainer import env_metadata

    env_id = "trace/cap-refund-policy-v0"
    assert env_id in gym.registry, f"{env_id} is not registered"
    env = gym.make(env_id, disable_env_checker=True)
    env.reset(seed=0)
    meta = env_metadata(env)
    assert meta["capability"] == "cap-refund-policy"
    assert isinstance(meta["spec_hash"], str) and len(meta["spec_hash"]) == 64
