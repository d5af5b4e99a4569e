from __future__ import annotations

import json

import gymnasium as gym
import pytest

import tests.train.envs  # noqa: F401  (registers trace-test/train-*)
from tests.compare.envs import ENV_ID
from trace_gym.compare.budget import BudgetedEnv, BudgetExceeded, RolloutBudget


def test_budget_counts_per_stage_and_refuses_past_total(tmp_path):
    b = RolloutBudget(5, tmp_path / "b.json")
    b.charge("base", 2)
    b.charge("train", 3)
    assert (b.used, b.remaining, b.by_stage) == (5, 0, {"base": 2, "train": 3})
    with pytest.raises(BudgetExceeded, match="only 0 of 5"):
        b.charge("train", 1)
    assert b.used == 5 and b.by_stage["train"] == 3  # the refused charge counted nothing
    with pytest.raises(ValueError):
        b.charge("x", -1)


def test_budget_persists_and_resumes(tmp_path):
    p = tmp_path / "b.json"
    b = RolloutBudget(10, p)
    b.charge("base", 4)
    data = json.loads(p.read_text())
    assert data["used"] == 4 and data["by_stage"] == {"base": 4}
    again = RolloutBudget(10, p)
    assert again.by_stage == {"base": 4} and again.remaining == 6
    with pytest.raises(ValueError, match="budget of 10"):
        RolloutBudget(12, p)


def test_restarting_a_stage_keeps_only_what_it_keeps(tmp_path):
    b = RolloutBudget(10, tmp_path / "b.json")
    b.charge("base", 3)
    b.charge("train", 5)  # then the run is killed mid-training
    b.start_stage("train", 0)  # training starts over
    assert b.used == 3 and b.remaining == 7
    with pytest.raises(BudgetExceeded):
        b.start_stage("base", 11)


def test_budgeted_env_charges_on_first_step_and_refuses_without_stepping(tmp_path):
    b = RolloutBudget(1, tmp_path / "b.json")
    env = BudgetedEnv(gym.make(ENV_ID, disable_env_checker=True), b, "gepa")
    env.reset(seed=0)  # a reset alone is free
    assert b.used == 0
    env.step("Done.")
    env.step("Done.")  # the same episode: one rollout
    assert b.by_stage == {"gepa": 1}
    env.reset(seed=1)
    before = env.unwrapped.step_count
    with pytest.raises(BudgetExceeded):
        env.step("Done.")
    assert env.unwrapped.step_count == before  # the wrapped env never saw the refused action
    assert b.used == 1


def test_forfeit_wrapper_turns_policy_errors_into_a_stop_message():
    from trace_gym.compare.methods import FORFEIT, ForfeitOnError
    from trace_gym.policies.base import PolicyError

    class Flaky:
        policy_id = "flaky"

        def act(self, messages, tools):
            if messages and messages[-1].get("content") == "long":
                raise PolicyError("prompt too long")
            return "ok"

    p = ForfeitOnError(Flaky())
    assert p.policy_id == "flaky"
    assert p.act([{"role": "user", "content": "hi"}], []) == "ok"
    assert p.act([{"role": "user", "content": "long"}], []) == FORFEIT and "###STOP###" in FORFEIT
    assert p.act_batch([([{"role": "user", "content": "long"}], []), ([{"role": "user", "content": "x"}], [])]) == [FORFEIT, "ok"]
    assert len(p.forfeits) == 2


def test_forfeit_wrapper_lets_a_full_context_end_the_episode_and_forwards_every_feature():
    from trace_gym.capabilities.calibrate import ReferencePolicy
    from trace_gym.compare.methods import ForfeitOnError
    from trace_gym.episode import CONTEXT_LENGTH, SERVING, rollout_mode
    from trace_gym.policies.base import ContextExceeded
    from trace_gym.rollout import rollout_queue

    class Served:
        policy_id = "served"
        accepts_seeds = True
        batch_size = 2

        def __init__(self):
            self.served, self.resets = 0, []

        def act(self, messages, tools):
            raise ContextExceeded("full", [0], [99], 64)

        def reset(self, seed=None):
            self.resets.append(seed)

        def serve(self, queue):
            self.served += 1
            while (got := queue.take()) is not None:
                key, _, _ = got
                queue.reject(key, ContextExceeded("full", [0], [99], 64))

    inner = Served()
    p = ForfeitOnError(inner)
    assert (p.policy_id, p.accepts_seeds, p.batch_size) == ("served", True, 2)
    p.reset(7)
    assert inner.resets == [7] and not hasattr(p, "bind_env")
    ref = ForfeitOnError(ReferencePolicy())
    ref.bind_env("env")
    assert ref.inner.env == "env"
    assert rollout_mode(p, 2) == SERVING  # serve reached through the wrapper
    with pytest.raises(ContextExceeded):  # a full context is not forfeited
        p.act([{"role": "user", "content": "x"}], [])
    assert p.forfeits == []
    envs = [gym.make("trace-test/train-multi-v0", disable_env_checker=True) for _ in range(2)]
    trajs = rollout_queue(envs, p, [0, 1, 2])
    assert inner.served == 1 and all(t.termination_reason == CONTEXT_LENGTH and t.truncated for t in trajs)
    assert all(t.reward_info["cut"] == CONTEXT_LENGTH for t in trajs) and p.forfeits == []
