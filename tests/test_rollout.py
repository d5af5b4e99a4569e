"""rollout(), rollout_batch() and collect() on the test-only notes env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

try:
    from helpers_envs import ENV_ID, TASKS, solve_actions, solver
except ImportError:  # tests/ imported as a package
    from tests.helpers_envs import ENV_ID, TASKS, solve_actions, solver

from trace_gym.core import format_tool_call
from trace_gym.policies import ScriptedPolicy, ScriptExhausted
from trace_gym.rollout import RolloutError, Trajectory, TrajectoryStore, collect, rollout, rollout_batch


def _strip_timings(t: Trajectory) -> dict:
    d = t.to_dict()
    d.pop("timings")
    return d


def test_helper_env_passes_gymnasium_checker():
    check_env(gym.make(ENV_ID).unwrapped)


def test_rollout_solved_episode():
    env = gym.make(ENV_ID)
    policy = ScriptedPolicy(solve_actions(2))
    t = rollout(env, policy, seed=5, options={"task": 2})
    assert t.env_id == ENV_ID and t.policy_id == "scripted" and t.seed == 5
    assert t.terminated and not t.truncated and t.termination_reason == "user_stop"
    assert t.actions == solve_actions(2)
    assert t.rewards == [0.0, 0.0, 1.0] and t.reward == 1.0
    assert t.reward_info == {"db_match": 1.0, "user_turns": 1}
    assert len(t.observations) == 4  # reset + one per step
    assert t.reset_info["task_index"] == 2
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "user"]
    assert t.transcript == t.messages  # nothing rejected
    assert {"reset_s", "policy_s", "env_s", "total_s"} <= set(t.timings)
    assert t.timings["total_s"] >= t.timings["env_s"] >= 0
    assert [s["function"]["name"] for s in t.tools] == ["read_note", "write_note"]


def test_rollout_records_rejected_actions_outside_the_transcript():
    actions = ['{"name": "write_note", "arguments": ', *solve_actions(0)]
    t = rollout(gym.make(ENV_ID), ScriptedPolicy(actions), seed=0, options={"task": 0})
    assert t.action_errors == [0]
    assert t.reward == 1.0
    assert len(t.messages) == len(t.transcript) + 2
    assert all(m.get("name") != "env_feedback" for m in t.transcript)


def test_same_seed_same_trajectory():
    env = gym.make(ENV_ID)
    a = rollout(env, ScriptedPolicy(solver), seed=11)
    b = rollout(env, ScriptedPolicy(solver), seed=11)
    assert _strip_timings(a) == _strip_timings(b)


def test_exhausted_script_raises_with_partial_trajectory():
    policy = ScriptedPolicy(solve_actions(1)[:1])
    with pytest.raises(RolloutError) as info:
        rollout(gym.make(ENV_ID), policy, seed=0, options={"task": 1})
    assert policy.exhausted
    assert isinstance(info.value.__cause__, ScriptExhausted)
    assert "ran out after 1 actions" in str(info.value)
    partial = info.value.trajectory
    assert partial.num_steps == 1 and not partial.done


def test_truncation_at_max_steps():
    env = gym.make(ENV_ID, patience=100, max_steps=3)
    t = rollout(env, ScriptedPolicy(lambda m, tl: "hello?"), seed=0)
    assert t.truncated and not t.terminated and t.termination_reason == "max_steps"
    assert t.num_steps == 3 and t.reward == 0.0


def test_rollout_batch_matches_one_at_a_time():
    seeds = [0, 1, 2, 3, 4]
    one = [rollout(gym.make(ENV_ID), ScriptedPolicy(solver), seed=s) for s in seeds]
    envs = [gym.make(ENV_ID) for _ in seeds]
    batched = rollout_batch(envs, ScriptedPolicy(solver), seeds)
    assert [_strip_timings(t) for t in batched] == [_strip_timings(t) for t in one]
    with pytest.raises(ValueError):
        rollout_batch([envs[0], envs[0]], ScriptedPolicy(solver), [0, 1])
    with pytest.raises(ValueError, match="one episode at a time"):
        rollout_batch(envs[:2], ScriptedPolicy(solve_actions(0)), [0, 1])


def test_collect_resumes_and_batches(tmp_path):
    out = tmp_path / "runs" / "traj.jsonl"
    first = collect(ENV_ID, ScriptedPolicy(solver, policy_id="solver"), range(4), store=out)
    assert [t.seed for t in first] == [0, 1, 2, 3]
    skipped: list[int] = []
    second = collect(ENV_ID, ScriptedPolicy(solver, policy_id="solver"), range(7), store=out, batch_size=2, on_skip=skipped.append)
    assert skipped == [0, 1, 2, 3]
    assert [t.seed for t in second] == [4, 5, 6]
    stored = TrajectoryStore(out).load()
    assert [t.seed for t in stored] == list(range(7))
    assert all(t.reward == 1.0 for t in stored)
    # A different policy id or reset options is a different episode.
    third = collect(ENV_ID, ScriptedPolicy(solver, policy_id="solver"), [0], store=out, options={"task": 3})
    assert len(third) == 1 and third[0].options == {"task": 3}
    assert collect(ENV_ID, ScriptedPolicy(solver, policy_id="solver"), [0], store=out, options={"task": 3}) == []
    assert len(collect(ENV_ID, ScriptedPolicy(solver, policy_id="solver"), [0], store=out, resume=False)) == 1


def test_collect_rejects_bad_arguments():
    with pytest.raises(ValueError):
        collect(ENV_ID, ScriptedPolicy(solver), [0], batch_size=0)
    with pytest.raises(TypeError):
        collect(ENV_ID, ScriptedPolicy(solver), ["0"])
    with pytest.raises(ValueError, match="2 option sets for 3 seeds"):
        collect(ENV_ID, ScriptedPolicy(solver), [0, 1, 2], options=[{"task": 0}, {"task": 1}])


def test_collect_plays_one_option_set_per_seed_in_one_batch(tmp_path):
    out = tmp_path / "traj.jsonl"
    opts = [{"task": 0}, {"task": 3}, {"task": 3}]
    got = collect(ENV_ID, ScriptedPolicy(solver, policy_id="solver"), [5, 5, 6], store=out, options=opts, batch_size=3)
    assert [(t.seed, t.options) for t in got] == [(5, {"task": 0}), (5, {"task": 3}), (6, {"task": 3})]
    assert [t.reset_info["task_index"] for t in got] == [0, 3, 3] and all(t.reward == 1.0 for t in got)
    assert collect(ENV_ID, ScriptedPolicy(solver, policy_id="solver"), [5, 5, 6], store=out, options=opts) == []


def test_trajectory_round_trip_and_json_cleaning():
    t = Trajectory(env_id="e", policy_id="p", seed=1, reward_info={"x": np.float32(0.5), "ids": {3, 1}})
    d = t.to_dict()
    assert d["reward_info"] == {"x": 0.5, "ids": [1, 3]}
    assert Trajectory.from_dict(d).to_dict() == d
    with pytest.raises(ValueError, match="unknown trajectory fields"):
        Trajectory.from_dict({**d, "surprise": 1})
    with pytest.raises(ValueError, match="version"):
        Trajectory.from_dict({**d, "version": 99})


def test_every_task_is_solvable_by_the_solver():
    env = gym.make(ENV_ID)
    for i in range(len(TASKS)):
        assert rollout(env, ScriptedPolicy(solver), seed=0, options={"task": i}).reward == 1.0


def test_collect_keeps_finished_batch_episodes_when_one_fails(tmp_path):
    env = gym.make(ENV_ID)
    seeds = list(range(8))
    tasks = {s: env.reset(seed=s)[1]["task_index"] for s in seeds}
    failing = {s for s in seeds if TASKS[tasks[s]]["key"] == "travel"}
    assert failing and failing != set(seeds)

    def policy_fn(messages, tools):
        if "'travel'" not in messages[1]["content"]:
            return solver(messages, tools)
        turns = sum(m["role"] == "assistant" for m in messages)
        return [format_tool_call("write_note", {"key": "travel", "text": "wrong"}), "Saved.", None][turns]

    out = tmp_path / "t.jsonl"
    with pytest.raises(RolloutError) as info:
        collect(ENV_ID, ScriptedPolicy(policy_fn), seeds, store=out, batch_size=len(seeds))
    assert info.value.trajectory.seed in failing
    assert {t.seed for t in info.value.completed} == set(seeds) - failing
    assert sorted(t.seed for t in TrajectoryStore(out).load()) == sorted(set(seeds) - failing)


def test_a_slot_whose_episode_ends_starts_the_next_seed_at_once(tmp_path):
    """collect() keeps every policy call full until the queue runs dry, and plays what one-at-a-time plays."""
    from trace_gym.rollout import rollout_queue

    sizes: list[int] = []

    class Recording:
        policy_id = "recording"

        def act(self, messages, tools):
            return self.act_batch([(messages, tools)])[0]

        def act_batch(self, requests):
            sizes.append(len(requests))
            # episodes of different lengths: even seeds dawdle one turn before solving
            return [("Let me see." if "'" in m[1]["content"] and sum(x["role"] == "assistant" for x in m) == 0
                     and len(m[1]["content"]) % 2 == 0 else solver(m, t)) for m, t in requests]

    seeds = list(range(7))
    envs = [gym.make(ENV_ID) for _ in range(3)]
    done_order: list[int] = []
    queued = rollout_queue(envs, Recording(), seeds, on_episode=lambda t: done_order.append(t.seed))
    alone = [rollout(gym.make(ENV_ID), Recording(), s) for s in seeds]
    assert [t.seed for t in queued] == seeds and sorted(done_order) == seeds
    assert [t.actions for t in queued] == [t.actions for t in alone]
    first_short = next(i for i, n in enumerate(sizes) if n < 3)
    assert all(n == 3 for n in sizes[:first_short]) and first_short >= 3
    trajs = collect(ENV_ID, Recording(), seeds, store=tmp_path / "q.jsonl", batch_size=3)
    assert [t.actions for t in trajs] == [t.actions for t in alone]
