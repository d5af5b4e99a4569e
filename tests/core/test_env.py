import gymnasium as gym
import pytest

from trace_gym.core import render_messages


def test_episode_flow_reward_and_info():
    env = gym.make("trace-test/counter-v0")
    obs, info = env.reset(seed=3)
    target = env.unwrapped.target
    assert "[tools]" in obs and "bring the counter" in obs
    assert [t["function"]["name"] for t in info["tools"]] == ["get_count", "add"]
    obs, r, term, trunc, info = env.step(f'<tool_call>{{"name": "add", "arguments": {{"amount": {target}}}}}</tool_call>')
    assert obs.startswith("[tool add]") and not term and r == 0.0
    obs, r, term, trunc, info = env.step("All done, bye!")
    assert term and not trunc and r == 1.0
    assert info["reward_info"] == {"count": target, "target": target}
    assert info["termination_reason"] == "agent_stop"
    roles = [m["role"] for m in info["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step("again")


def test_step_limit_truncates_and_scores():
    env = gym.make("trace-test/counter-v0", max_steps=2)
    env.reset(seed=0)
    env.step("hi")
    _, r, term, trunc, info = env.step("hi")
    assert trunc and not term and info["termination_reason"] == "max_steps" and r == 0.0


def test_malformed_action_is_feedback_not_state():
    env = gym.make("trace-test/counter-v0")
    env.reset(seed=0)
    u = env.unwrapped
    before = u.transcript()
    obs, r, term, trunc, info = env.step('{"name": "add", "arguments": {"amount": 1}')
    assert "not executed" in obs and "not valid JSON" in info["action_error"]
    assert u.count == 0 and u.transcript() == before
    assert info["messages"][-1]["name"] == "env_feedback"  # the policy sees what went wrong


def test_several_calls_in_one_action_run_in_order():
    env = gym.make("trace-test/counter-v0")
    env.reset(seed=0)
    obs, *_ , info = env.step("add(amount=2)\nadd(amount=3)\nget_count()")
    assert env.unwrapped.count == 5
    tool_msgs = [m for m in info["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ['{"count": 2}', '{"count": 5}', '{"count": 5}']
    ids = [tc["id"] for tc in info["messages"][-4]["tool_calls"]]
    assert ids == [m["tool_call_id"] for m in tool_msgs]


def test_render_modes():
    env = gym.make("trace-test/counter-v0", render_mode="ansi")
    env.reset(seed=0)
    env.step("hello")
    text = env.render()
    assert "[user]" in text and "[assistant]\nhello" in text
    assert render_messages([]) == ""
    with pytest.raises(ValueError, match="render_mode"):
        gym.make("trace-test/counter-v0", render_mode="rgb_array")
