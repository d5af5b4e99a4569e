import gymnasium as gym
import pytest

import tests.train.envs  # noqa: F401  (registers trace-test/train-*)
from trace_gym.core.toolcalls import format_tool_call
from trace_gym.integrations.records import MAX_STEPS, collect_episodes
from trace_gym.policies.scripted import ScriptedPolicy


def test_collect_episodes_with_a_plain_function():
    env = gym.make("trace-test/train-multi-v0", disable_env_checker=True)
    seen = []

    def policy(obs, info):
        seen.append(obs)
        code = next((m["content"] for m in info["messages"] if m["role"] == "tool"), None)
        return format_tool_call("lookup", {}) if code is None else f"Your code is {code}."

    recs = collect_episodes(env, policy, seeds=[1, 2])
    assert [r.seed for r in recs] == [1, 2]
    for r in recs:
        assert r.terminated and r.termination_reason == "user_done" and r.steps == 3
        assert r.reward_info["told"] == 1.0 and r.reward_info["looked_up"] is True
        assert r.reward == r.rewards[-1] > 0.7 and r.messages[-1]["content"] == "Bye."
        assert "messages" not in r.reset_info and r.reset_info["hint_shown"] is False
    # Same seeds, same episodes.
    again = collect_episodes(env, policy, seeds=[1, 2])
    assert [r.messages for r in again] == [r.messages for r in recs]


def test_collect_episodes_with_a_policy_object_and_an_env_id():
    policy = ScriptedPolicy(["hello there", "bye"])
    recs = collect_episodes("trace-test/train-multi-v0", policy, seeds=[0, 1], options={"hint": True})
    assert all(r.actions == ["hello there", "bye"] for r in recs)  # the script restarts every episode
    assert all(r.reset_info["hint_shown"] for r in recs)
    assert all(r.reward_info["told"] == 0.0 for r in recs)


def test_collect_episodes_max_steps_cuts_long_episodes():
    env = gym.make("trace-test/train-multi-v0", disable_env_checker=True)
    recs = collect_episodes(env, lambda obs, info: "hm", seeds=[0], max_steps=1)
    r = recs[0]
    assert r.truncated and not r.terminated and r.termination_reason == MAX_STEPS == "collect_max_steps" and r.steps == 1
    # scored as the env scores a truncated episode (the same rule as a rollout's cut), the score last in rewards
    env.reset(seed=0)
    env.step("hm")
    score, parts = env.unwrapped.truncate()
    assert r.reward == r.rewards[-1] == score and len(r.rewards) == 2
    assert r.reward_info == {**parts, "cut": MAX_STEPS}
    with pytest.raises(ValueError, match="max_steps"):
        collect_episodes(env, lambda obs, info: "hm", seeds=[0], max_steps=0)
