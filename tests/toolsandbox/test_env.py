"""``trace/toolsandbox-v0``: resets, tool calls, users, augmentations and upstream scores."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import trace_gym  # noqa: F401  (registers trace/*)
from tests.corpora import corpus_dir
from trace_gym.core import format_tool_call

ENV_ID = "trace/toolsandbox-v0"


def _make(**kw):
    return gym.make(ENV_ID, **kw).unwrapped


def _action(step) -> str:
    if step["type"] == "tool_calls":
        return "\n".join(format_tool_call(c["name"], c["arguments"]) for c in step["calls"])
    return step["content"]


def _play(env, record):
    """Drive the env with a corpus record's steps (the replay user answers for the user)."""
    from trace_gym.toolsandbox.users import ReplayUser

    env.user = ReplayUser(record["steps"])
    env.reset(seed=0, options={"scenario": record["scenario"]})
    info: dict = {}
    reward, done = 0.0, False
    for step in (s for s in record["steps"] if s["role"] == "agent"):
        _, reward, term, trunc, info = env.step(_action(step))
        if term or trunc:
            done = True
            break
    return reward, done, info


def test_reset_by_name_category_and_seed(root):
    env = _make()
    obs, info = env.reset(seed=1, options={"scenario": "wifi_off"})
    assert info["scenario"] == "wifi_off" and info["agent_tools"] == ["set_wifi_status"]
    assert "Turn off wifi" in obs and info["messages"][0]["role"] == "system"
    assert [t["function"]["name"] for t in info["tools"]] == ["set_wifi_status"]
    _, info = env.reset(seed=3, options={"category": "MULTIPLE_USER_TURN"})
    assert "MULTIPLE_USER_TURN" in info["categories"]
    a = [env.reset(seed=s)[1]["scenario"] for s in range(6)]
    b = [env.reset(seed=s)[1]["scenario"] for s in range(6)]
    assert a == b and len(set(a)) > 1
    with pytest.raises(ValueError, match="unknown ToolSandbox scenario"):
        env.reset(options={"scenario": "nope"})
    with pytest.raises(ValueError, match="category"):
        env.reset(options={"category": "NOPE"})


def test_oracle_trajectories_score_as_upstream():
    env = _make(unknown_tool="abort")  # upstream's runner aborts on a tool that is not offered
    checked = 0
    for path in sorted(corpus_dir("toolsandbox").glob("*.jsonl")):
        for line in open(path):
            r = json.loads(line)
            if r["kind"] not in ("oracle", "disallowed_tool", "minefield_call"):
                continue
            reward, done, info = _play(env, r)
            assert done, r["id"]
            assert abs(reward - r["result"]["similarity"]) < 1e-6, r["id"]
            assert info["reward_info"]["turn_count"] == r["result"]["turn_count"], r["id"]
            if r["kind"] == "oracle":
                got = {k: [v["message_index"], v["score"]] for k, v in info["reward_info"]["milestones"].items()}
                assert got.keys() == r["result"]["milestone_mapping"].keys(), r["id"]
                assert all(v["step"] >= 0 for v in info["reward_info"]["milestones"].values())
            checked += 1
    assert checked > 150


def test_unknown_tool_aborts_with_zero_reward_in_upstream_mode(root):
    env = _make(unknown_tool="abort")
    env.reset(options={"scenario": "wifi_off"})
    before = env.state_fingerprint()
    _, reward, term, _, info = env.step(format_tool_call("get_current_timestamp", {}))
    assert term and reward == 0.0
    assert info["reward_info"]["exception"].startswith("KeyError: ") and info["reward_info"]["turn_count"] == 30
    assert info["reward_info"]["aborted"] is True
    assert env.state_fingerprint() == before
    with pytest.raises(ValueError, match="unknown_tool"):
        _make(unknown_tool="ignore")


def test_unknown_tool_is_an_error_result_that_changes_nothing(root):
    env = _make()
    env.reset(options={"scenario": "wifi_off"})
    before, bus = env.state_fingerprint(), env.bus()
    obs, reward, term, trunc, info = env.step(format_tool_call("get_current_timestamp", {}))
    assert not term and not trunc and reward == 0.0 and len(info["tool_errors"]) == 1
    assert "KeyError" in obs and "get_current_timestamp" in obs and "set_wifi_status" in obs
    assert env.state_fingerprint() == before and env.bus() == bus
    # the episode goes on and can still be solved
    env.step(format_tool_call("set_wifi_status", {"on": False}))
    _, reward, term, _, info = env.step("Wifi is turned off")
    assert term and reward == 1.0 and info["reward_info"]["aborted"] is False and info["reward_info"]["exception"] == ""


def test_tool_errors_are_observed_and_change_nothing(root):
    env = _make()
    env.reset(options={"scenario": "turn_on_wifi_low_battery_mode"})
    before = env.state_fingerprint()
    obs, _, term, _, info = env.step(format_tool_call("set_wifi_status", {"on": True}))
    assert "PermissionError: Wifi cannot be turned on in low battery mode" in obs and not term
    assert info["tool_errors"] and env.state_fingerprint() == before


def test_scripted_user_ends_after_reply_and_llm_user(root):
    from trace_gym.toolsandbox.users import LLMUser

    env = _make()
    env.reset(options={"scenario": "wifi_off"})
    obs, reward, term, _, info = env.step("I cannot do that.")
    assert term and info["termination_reason"] == "user_ended" and reward < 1.0
    assert env.bus()[-1]["openai_function_name"] == "end_conversation"

    replies = iter(["Please turn it off now.", "Thanks! end_conversation"])
    seen = []

    def fake_model(messages):
        seen.append(messages)
        return next(replies)

    env = _make(user=LLMUser(fake_model))
    env.reset(options={"scenario": "wifi_off"})
    obs, _, term, _, _ = env.step("Do you want wifi off?")
    assert "Please turn it off now." in obs and not term
    assert seen[0][0]["content"].startswith("You are no longer an assistant")
    assert seen[0][-1] == {"role": "user", "content": "Do you want wifi off?"}
    env.step(format_tool_call("set_wifi_status", {"on": False}))
    _, reward, term, _, info = env.step("Wifi is turned off")
    assert term and reward == 1.0


def test_parallel_calls_in_one_action(root):
    env = _make()
    env.reset(options={"scenario": "turn_on_wifi_low_battery_mode"})
    action = format_tool_call("set_low_battery_mode_status", {"on": False}) + format_tool_call("set_wifi_status", {"on": True})
    obs, _, _, _, info = env.step(action)
    tool_msgs = [m for m in info["messages"] if m["role"] == "tool"]
    assert "PermissionError" in tool_msgs[1]["content"] and tool_msgs[0]["content"] == "None"
    bus = env.bus()
    assert [r["openai_function_name"] for r in bus[-2:]] == ["set_wifi_status", "set_low_battery_mode_status"]


def test_augmentations(root):
    env = _make()
    _, info = env.reset(options={"scenario": "wifi_off", "distraction_tools": 3})
    assert len(info["agent_tools"]) == 4 and "set_wifi_status" in info["agent_tools"]
    _, info = env.reset(options={"scenario": "wifi_off", "scramble": "tool_name"})
    (name,) = info["agent_tools"]
    assert name != "set_wifi_status" and info["tools"][0]["function"]["name"] == name
    _, _, _, _, _ = env.step(format_tool_call(name, {"on": False}))
    _, reward, _, _, _ = env.step("Wifi is turned off")
    assert reward == 1.0
    _, info = env.reset(options={"scenario": "wifi_off", "scramble": "tool_description"})
    assert info["tools"][0]["function"]["description"] == ""
    _, info = env.reset(options={"scenario": "wifi_off", "scramble": "arg_type"})
    assert "type" not in info["tools"][0]["function"]["parameters"]["properties"]["on"]
    with pytest.raises(ValueError, match="scramble"):
        env.reset(options={"scramble": "everything"})
    with pytest.raises(ValueError, match="distraction_tools"):
        _make(distraction_tools=7)


def test_message_cap_terminates(root):
    env = _make(user=__import__("trace_gym.toolsandbox.users", fromlist=["ScriptedUser"]).ScriptedUser(["more"] * 40),
                max_steps=100)
    env.reset(options={"scenario": "wifi_off"})
    for i in range(40):
        _, _, term, trunc, info = env.step(f"question {i}")
        if term or trunc:
            break
    assert term and info["termination_reason"] == "max_messages" and env.sandbox.new_count == 30


def test_check_env(root):
    from gymnasium.utils.env_checker import check_env

    check_env(_make())


def test_envs_in_one_process_do_not_share_state(root):
    a, b = _make(), _make()
    a.reset(options={"scenario": "wifi_off"})
    b.reset(options={"scenario": "wifi_off"})
    fp = b.state_fingerprint()
    a.step(format_tool_call("set_wifi_status", {"on": False}))
    assert a.sandbox.world.setting("wifi") is False and b.sandbox.world.setting("wifi") is True
    assert b.state_fingerprint() == fp
    # a fresh reset restores the scenario's world and restarts the id sequence
    a.reset(options={"scenario": "wifi_off"})
    assert a.state_fingerprint() == fp
