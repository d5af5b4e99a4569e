"""After ``reset``, a τ²-bench episode imports nothing: its steps and its evaluation run on
what ``gym.make`` and ``reset`` loaded, so no first call pays for an import.

Each run is a fresh interpreter, so an import done by an earlier test cannot hide one.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_EPISODE = """
import json, sys
import gymnasium as gym
import trace_gym
env = gym.make(sys.argv[1]).unwrapped
env.reset(seed=0)
before = set(sys.modules)
env.step(json.dumps({"name": "calculate", "arguments": {"expression": "1 + 2"}}))
env.step('{"name": "broken", "arguments": {')
done = False
while not done:
    _, _, term, trunc, info = env.step("Thanks, that is all. ###STOP###")
    done = term or trunc
assert "reward_info" in info
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.parametrize("env_id", ["trace/tau2-airline-v0", "trace/tau2-retail-v0", "trace/tau2-telecom-v0"])
def test_steps_and_evaluation_import_nothing_after_reset(tau2_data, env_id):
    run = subprocess.run([sys.executable, "-c", _EPISODE, env_id], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []
