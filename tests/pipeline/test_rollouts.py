"""Stage 1 of the pipeline on the notes test env: batches of different tasks, per-job env kwargs, resume, budget."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest

from tests.compare.envs import ENV_ID, TaskIdNotesEnv
from tests.helpers_envs import TASKS
from trace_gym.core import format_tool_call
from trace_gym.pipeline import RolloutBudget, RolloutJob, Target, play_rollouts


class Solver:
    """Writes the requested note (in batches: ``act_batch``)."""

    policy_id = "solver"

    def __init__(self):
        self.batches: list[int] = []

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if any(m.get("role") == "tool" for m in messages):
            return "Done."
        first = next(m["content"] for m in messages if m["role"] == "user")
        task = next(t for t in TASKS if f"'{t['key']}'" in first)
        return format_tool_call("write_note", dict(task))

    def act_batch(self, requests, seeds=None):
        self.batches.append(len(requests))
        return [self.act(m, t) for m, t in requests]


class Idle:
    policy_id = "idle"

    def act(self, messages, tools):
        return "Hello."


def test_rollouts_batch_tasks_resume_and_charge_the_budget(tmp_path):
    target = Target(ENV_ID)
    assert target.domain is None and target.threshold == 1.0 and target.reset_options("2") == {"task_id": "2"}
    solver = Solver()
    jobs = [RolloutJob("solver", str(t), 0, solver) for t in range(4)] + [RolloutJob("idle", "1", 0, Idle, {"patience": 1})]
    budget = RolloutBudget(10, tmp_path / "budget.json")
    res = play_rollouts(target, jobs, tmp_path / "r.jsonl", budget=budget, batch_size=3)
    assert solver.batches[0] == 3  # three different tasks answered in one call
    assert res.n == 5 and res.passed == 4 and res.by_policy == {"solver": {"episodes": 4, "passed": 4},
                                                               "idle": {"episodes": 1, "passed": 0}}
    assert res.rollouts == 5 and budget.by_stage == {"base_rollouts": 5}
    trajs = {(t.policy_id, t.options["task_id"]): t for t in res.trajectories()}
    assert sorted(k for k in trajs) == [("idle", "1"), *[("solver", str(i)) for i in range(4)]]
    assert all(t.env_id == ENV_ID for t in trajs.values())
    assert len(trajs[("idle", "1")].actions) == 1  # patience 1: the job's env kwargs were used

    again = play_rollouts(target, jobs, tmp_path / "r.jsonl", budget=RolloutBudget(10, tmp_path / "budget.json"), batch_size=3)
    assert again.n == 5 and again.rollouts == 5  # nothing played or charged twice


def test_a_declared_success_threshold_counts_passes(tmp_path):
    class Lenient(TaskIdNotesEnv):
        success_threshold = 0.0

    if "trace-test/lenient-notes-v0" not in gym.registry:
        gym.register(id="trace-test/lenient-notes-v0", entry_point=Lenient)
    res = play_rollouts(Target("trace-test/lenient-notes-v0"), [RolloutJob("idle", "0", 0, Idle())], tmp_path / "r.jsonl")
    assert res.passed == 1  # a reward of 0 passes a threshold of 0


def test_rollout_batch_takes_one_option_set_per_episode():
    from trace_gym.rollout import rollout_batch

    envs = [gym.make(ENV_ID) for _ in range(2)]
    trajs = rollout_batch(envs, Solver(), [0, 0], [{"task_id": "1"}, {"task_id": "3"}])
    assert [t.options for t in trajs] == [{"task_id": "1"}, {"task_id": "3"}] and all(t.reward == 1.0 for t in trajs)
    with pytest.raises(ValueError, match="option sets"):
        rollout_batch(envs, Solver(), [0, 0], [{"task_id": "1"}])
