"""Two runs appending to one trajectory store at the same time never duplicate an episode."""

from __future__ import annotations

import json
import multiprocessing as mp
from collections import Counter

import pytest

try:
    from helpers_envs import ENV_ID, solve_actions
except ImportError:  # tests/ imported as a package
    from tests.helpers_envs import ENV_ID, solve_actions

from trace_gym.rollout import Trajectory, TrajectoryStore

SEEDS = list(range(40))


def _collect_after(barrier, script: str, out: str, queue) -> None:
    from trace_gym.policies import policy_from_spec
    from trace_gym.rollout import collect

    policy = policy_from_spec(f"scripted:{script}")
    barrier.wait(timeout=60)  # both runs read the (empty) store, then play every seed
    new = collect(ENV_ID, policy, SEEDS, store=out, options={"task": 2})
    queue.put(len(new))


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs the fork start method")
def test_two_concurrent_collects_store_each_episode_once(tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps(solve_actions(2)))
    out = tmp_path / "t.jsonl"
    ctx = mp.get_context("fork")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_collect_after, args=(barrier, str(script), str(out), queue)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
        assert p.exitcode == 0
    played = [queue.get(timeout=5) for _ in procs]
    stored = TrajectoryStore(out).load()
    counts = Counter(t.seed for t in stored)
    assert sorted(counts) == SEEDS and max(counts.values()) == 1, [s for s, n in counts.items() if n > 1]
    assert sum(played) >= len(SEEDS)  # both ran concurrently (each returns what it played)


def test_unique_append_checks_under_the_lock(tmp_path):
    a, b = TrajectoryStore(tmp_path / "t.jsonl"), TrajectoryStore(tmp_path / "t.jsonl")  # two writers, one file
    t = Trajectory(env_id="e", policy_id="p", seed=1, actions=["x"], rewards=[1.0], reward=1.0)
    assert a.append(t, unique=True) is True
    assert b.append(t, unique=True) is False  # b never read the file before: it looks under the lock
    assert a.append(t, unique=True) is False
    other = Trajectory(env_id="e", policy_id="p", seed=1, actions=["x"], rewards=[1.0], reward=1.0, options={"task": 1})
    assert b.append(other, unique=True) is True
    assert a.append(t) is True  # without unique, append never looks (the --no-resume case)
    assert len(a) == 3
