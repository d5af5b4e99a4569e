"""User simulators: offline rules, replay, the LLM user's prompt/roles/tools, and the backends."""

from __future__ import annotations

import json

import numpy as np
import pytest

from trace_gym.datadirs import DataDirError
from trace_gym.tau2.users import (
    STOP,
    TRANSFER,
    LLMUser,
    OfflineUser,
    OpenAIChatBackend,
    ReplayUser,
    UserContext,
    first_person,
    is_user_stop,
    make_user,
    scenario_text,
    user_system_prompt,
)

STRUCTURED = {
    "persona": "Calm.",
    "instructions": {"domain": "retail", "reason_for_call": "You want to return a lamp.\nIt broke.",
                     "known_info": "You are Ann Lee, zip 10001.", "unknown_info": None,
                     "task_instructions": "Accept store credit."},
}


def _task(us=STRUCTURED):
    return {"id": "t", "user_scenario": us}


def _assistant(text):
    return {"role": "assistant", "content": text, "tool_calls": None}


def test_scenario_text_has_tau2s_layout():
    assert scenario_text(STRUCTURED) == (
        "Persona:\n\tCalm.\nInstructions:\n\tDomain: retail\n\tReason for call:\n\t\tYou want to return a lamp.\n"
        "\t\tIt broke.\n\tKnown info:\n\t\tYou are Ann Lee, zip 10001.\n\tTask instructions:\n\t\tAccept store credit."
    )
    assert scenario_text({"persona": None, "instructions": "Just do it."}) == "Instructions:\n\tJust do it."


def test_user_system_prompt_reads_the_guidelines_from_the_data_folder():
    try:
        plain = user_system_prompt(_task(), with_tools=False)
        tools = user_system_prompt(_task(), with_tools=True)
    except DataDirError as exc:
        pytest.skip(str(exc))
    assert plain.startswith("# User Simulation Guidelines") and "<PERSONA_GUIDELINES>" not in plain
    assert plain.endswith("\n\n<scenario>\n" + scenario_text(STRUCTURED) + "\n</scenario>")
    assert "You have some tools" in tools and "You have some tools" not in plain


def test_first_person():
    assert first_person("You want to cancel. Your id is x; they told you so.") == "I want to cancel. My id is x; they told me so."


def test_offline_user_rules():
    u = OfflineUser(max_turns=6)
    u.reset(UserContext(task=_task(), domain="retail"))
    first = u.respond([_assistant("Hi! How can I help you today?")])
    assert first["content"].startswith("Hi! I want to return a lamp. It broke.") and "I am Ann Lee" in first["content"]
    assert u.respond([_assistant("Could you tell me your name and zip code?")])["content"] == "I am Ann Lee, zip 10001."
    assert u.respond([_assistant("Shall I proceed with the return (yes/no)?")])["content"].startswith("Yes")
    assert is_user_stop(u.respond([_assistant("Your return has been processed. Anything else?")]))
    assert u.respond([_assistant("I will transfer you to a human agent.")])["content"] == TRANSFER
    u.respond([_assistant("hmm")])
    assert u.respond([_assistant("hmm")])["content"].endswith(STOP)  # turn limit


def test_offline_user_operates_named_device_tools():
    tools = [{"type": "function", "function": {"name": "toggle_airplane_mode", "parameters": {"type": "object", "properties": {}}}},
             {"type": "function", "function": {"name": "check_status_bar", "parameters": {"type": "object", "properties": {}}}},
             {"type": "function", "function": {"name": "set_apn_settings",
                                               "parameters": {"type": "object", "required": ["apn_settings"]}}}]
    u = OfflineUser()
    u.reset(UserContext(task=_task("You have no signal." and {"instructions": "You have no signal."}), domain="telecom", tools=tools))
    u.respond([_assistant("Hi! How can I help you today?")])
    call = u.respond([_assistant("Please turn off airplane mode on your phone.")])
    assert call["tool_calls"] == [{"name": "toggle_airplane_mode", "arguments": {}}]
    after = u.respond([{"role": "tool", "id": "x", "content": "Airplane Mode is now OFF.", "requestor": "user"}])
    assert "Airplane Mode is now OFF." in after["content"]
    assert u.respond([_assistant("What does your status bar show?")])["tool_calls"][0]["name"] == "check_status_bar"
    # tools with required arguments are never guessed
    assert u.respond([_assistant("Please set apn settings.")]).get("tool_calls") is None


def test_replay_user_and_stop_detection():
    msgs = [_assistant("Hi"), {"role": "user", "content": "hello", "tool_calls": None},
            {"role": "user", "content": None, "tool_calls": [{"id": "a", "name": "toggle_data", "arguments": {}, "requestor": "user"}]},
            {"role": "tool", "id": "a", "content": "ok", "requestor": "user"}]
    r = ReplayUser(msgs)
    r.reset(UserContext(task=_task(), domain="x"))
    assert r.respond([])["content"] == "hello"
    assert r.respond([])["tool_calls"] == [{"name": "toggle_data", "arguments": {}}]
    assert r.respond([])["content"] == STOP
    assert is_user_stop({"role": "user", "content": "x ###OUT-OF-SCOPE###"})
    assert not is_user_stop({"role": "user", "content": None, "tool_calls": [{"name": "a"}]})


class FakeBackend:
    def __init__(self, replies):
        self.replies = list(replies)
        self.seen = []

    def complete(self, messages, tools, rng=None):
        self.seen.append((json.loads(json.dumps(messages)), tools))
        return self.replies.pop(0)


def test_llm_user_flips_roles_and_passes_tools():
    try:
        user_system_prompt(_task(), with_tools=False)
    except DataDirError as exc:
        pytest.skip(str(exc))
    tools = [{"type": "function", "function": {"name": "toggle_data", "parameters": {"type": "object", "properties": {}}}}]
    backend = FakeBackend([{"content": "My data is off.", "tool_calls": None},
                           {"content": None, "tool_calls": [{"name": "toggle_data", "arguments": {}}]},
                           {"content": "Fixed, thanks! ###STOP###", "tool_calls": None}])
    u = LLMUser(backend)
    u.reset(UserContext(task=_task(), domain="telecom", tools=tools, rng=np.random.default_rng(0)))
    assert u.respond([_assistant("Hi! How can I help you today?")])["content"] == "My data is off."
    call = u.respond([_assistant("Please toggle your mobile data.")])
    assert call["tool_calls"][0]["name"] == "toggle_data" and call["content"] is None
    cid = call["tool_calls"][0]["id"]
    final = u.respond([{"role": "tool", "id": cid, "content": "Mobile Data is now ON.", "requestor": "user"}])
    assert is_user_stop(final)
    msgs, seen_tools = backend.seen[-1]
    assert msgs[0]["role"] == "system" and "<scenario>" in msgs[0]["content"] and "You have some tools" in msgs[0]["content"]
    assert [m["role"] for m in msgs[1:]] == ["user", "assistant", "user", "assistant", "tool"]
    assert msgs[4]["tool_calls"][0]["function"]["name"] == "toggle_data" and msgs[5]["tool_call_id"] == cid
    assert seen_tools == tools


def test_llm_user_drives_a_telecom_episode_with_device_calls():
    from trace_gym.tau2.env import Tau2Env

    backend = FakeBackend([{"content": "My phone shows no service.", "tool_calls": None},
                           {"content": None, "tool_calls": [{"name": "check_status_bar", "arguments": {}}]},
                           {"content": None, "tool_calls": [{"name": "no_such_device_tool", "arguments": {}}]},
                           {"content": "It says no service. ###STOP###", "tool_calls": None}])
    try:
        env = Tau2Env("telecom", user=LLMUser(backend))
        obs, info = env.reset(seed=0)
    except DataDirError as exc:
        pytest.skip(str(exc))
    assert info["messages"][-1] == {"role": "user", "content": "My phone shows no service."}
    obs, r, term, trunc, info = env.step("Could you check your status bar?")
    assert term and info["termination_reason"] == "user_stop"
    traj = env.tau2_trajectory()
    tool_msgs = [m for m in traj if m["role"] == "tool"]
    assert [m["requestor"] for m in tool_msgs] == ["user", "user"]
    assert tool_msgs[0]["error"] is False and tool_msgs[1]["content"] == "Error: Tool 'no_such_device_tool' not found."
    assert info["num_errors"] == 1
    assert "check_status_bar" not in json.dumps(info["messages"][1:])  # the agent never sees user tool traffic
    # the user saw the real tool result
    msgs, _ = backend.seen[2]
    assert msgs[-1]["role"] == "tool" and "Status Bar" in msgs[-1]["content"]


def test_failing_user_is_a_user_error():
    from trace_gym.tau2.env import Tau2Env

    class Broken:
        def reset(self, context):
            pass

        def respond(self, incoming):
            raise RuntimeError("endpoint down")

    try:
        env = Tau2Env("mock", user=Broken())
        env.reset(seed=0, options={"task_id": "create_task_1"})
    except DataDirError as exc:
        pytest.skip(str(exc))
    obs, r, term, trunc, info = env.step("anything")
    assert term and r == 0.0 and info["termination_reason"] == "user_error" and "endpoint down" in info["user_error"]


def test_openai_backend_payload_and_tool_call_parsing():
    seen = {}

    def transport(payload):
        seen.update(payload)
        return {"content": None, "tool_calls": [{"id": "1", "type": "function",
                                                 "function": {"name": "toggle_data", "arguments": "{\"on\": true}"}}]}

    b = OpenAIChatBackend("m", base_url="http://x", api_key="", transport=transport)
    out = b.complete([{"role": "system", "content": "s"}], [{"type": "function", "function": {"name": "toggle_data"}}],
                     np.random.default_rng(1))
    assert out["tool_calls"] == [{"name": "toggle_data", "arguments": {"on": True}}]
    assert seen["tools"][0]["function"]["name"] == "toggle_data" and isinstance(seen["seed"], int)
    assert seen["temperature"] == 0.0


def test_make_user_specs():
    assert isinstance(make_user("offline"), OfflineUser)
    assert isinstance(make_user({"kind": "offline", "max_turns": 3}), OfflineUser)
    assert isinstance(make_user({"kind": "replay", "messages": []}), ReplayUser)
    assert isinstance(make_user({"kind": "llm", "model": "m", "base_url": "http://x"}), LLMUser)
    with pytest.raises(ValueError):
        make_user({"kind": "psychic"})
    with pytest.raises(ValueError):
        OfflineUser(max_turns=0)


def test_openai_backend_parses_calls_written_as_text():
    b = OpenAIChatBackend("m", transport=lambda p: {"content": '<tool_call>{"name": "toggle_data", "arguments": {}}</tool_call>'})
    tools = [{"type": "function", "function": {"name": "toggle_data"}}]
    assert b.complete([], tools)["tool_calls"] == [{"name": "toggle_data", "arguments": {}}]
    assert b.complete([], None)["tool_calls"] is None
