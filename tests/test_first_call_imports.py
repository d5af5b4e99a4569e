"""A fresh process pays no avoidable import on its first episode.

A τ²-bench episode played to the end (its evaluation included) must not load an HTTP
client, TLS, the JSON-Schema engine (τ² tools check their own arguments) or a deep-learning
stack; each run is a fresh interpreter, so an import done by an earlier test cannot hide one.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

AVOIDABLE = ["http.client", "urllib.request", "ssl", "requests", "httpx", "jsonschema", "torch", "transformers"]

_EPISODE = """
import json, sys
import gymnasium as gym
import trace_gym
env = gym.make(sys.argv[1]).unwrapped
env.reset(seed=0)
env.step(json.dumps({"name": "calculate", "arguments": {"expression": "1 + 2"}}))
done = False
while not done:
    _, _, term, trunc, info = env.step("Thanks, that is all. ###STOP###")
    done = term or trunc
assert "reward_info" in info
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("env_id", ["trace/tau2-retail-v0", "trace/tau2-airline-v0"])
def test_a_tau2_episode_imports_nothing_avoidable(tau2_data, env_id):
    run = subprocess.run([sys.executable, "-c", _EPISODE, env_id], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    loaded = set(json.loads(run.stdout.strip().splitlines()[-1]))
    assert "trace_gym.tau2.evaluator" in loaded  # the episode was evaluated
    assert [m for m in AVOIDABLE if m in loaded] == []
