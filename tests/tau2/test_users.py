"""User simulators: offline rules, replay, the LLM user's prompt/roles/tools, and the backends."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers_llm import completion, server_fixture, tool_call  # noqa: F401 (server fixture)
from trace_gym.core.users import UserSimulator, UserTurn
from trace_gym.llm import ChatReply, FunctionChatClient, OpenAIChatClient
from trace_gym.tau2.users import (
    STOP,
    TRANSFER,
    LLMUser,
    OfflineUser,
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
    plain = user_system_prompt(_task(), with_tools=False)
    tools = user_system_prompt(_task(), with_tools=True)
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


class FakeBackend(FunctionChatClient):
    """A chat client answering from a list; ``seen`` holds each request's (messages, tools)."""

    def __init__(self, replies):
        self.replies = list(replies)
        super().__init__(lambda messages: self.replies.pop(0))

    @property
    def seen(self):
        return [(r["messages"], r["tools"]) for r in self.requests]


def _calls(*names):
    return ChatReply(None, tuple({"id": None, "name": n, "arguments": {}} for n in names))


def test_llm_user_flips_roles_and_passes_tools():
    user_system_prompt(_task(), with_tools=False)
    tools = [{"type": "function", "function": {"name": "toggle_data", "parameters": {"type": "object", "properties": {}}}}]
    backend = FakeBackend([ChatReply("My data is off."), _calls("toggle_data"), ChatReply("Fixed, thanks! ###STOP###")])
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

    backend = FakeBackend([ChatReply("My phone shows no service."), _calls("check_status_bar"),
                           _calls("no_such_device_tool"), ChatReply("It says no service. ###STOP###")])
    env = Tau2Env("telecom", user=LLMUser(backend))
    obs, info = env.reset(seed=0)
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

    env = Tau2Env("mock", user=Broken())
    env.reset(seed=0, options={"task_id": "create_task_1"})
    obs, r, term, trunc, info = env.step("anything")
    assert term and r == 0.0 and info["termination_reason"] == "user_error" and "endpoint down" in info["user_error"]


def test_llm_user_over_http_sends_tools_and_a_seeded_request(server):
    user_system_prompt(_task(), with_tools=True)
    tools = [{"type": "function", "function": {"name": "toggle_data", "parameters": {"type": "object", "properties": {}}}}]
    server.push(completion(None, [tool_call("toggle_data", '{"on": true}')]))
    server.push(completion('<tool_call>{"name": "toggle_data", "arguments": {}}</tool_call>'))  # no tool-call parser
    server.push(completion("Thanks! ###STOP###"))
    u = make_user({"kind": "llm", "model": "m", "base_url": server.url, "api_key": ""})
    u.reset(UserContext(task=_task(), domain="telecom", tools=tools, rng=np.random.default_rng(1)))
    first = u.respond([_assistant("Please toggle data.")])
    assert first["tool_calls"] == [{"id": "user_call_0", "name": "toggle_data", "arguments": {"on": True}}]
    second = u.respond([{"role": "tool", "id": "user_call_0", "content": "ok", "requestor": "user"}])
    assert second["tool_calls"] == [{"id": "user_call_1", "name": "toggle_data", "arguments": {}}]
    last = u.respond([{"role": "tool", "id": "user_call_1", "content": "ok", "requestor": "user"}])
    assert is_user_stop(last) and last.end and isinstance(last, UserTurn)
    body = server.requests[0]["body"]
    assert body["tools"][0]["function"]["name"] == "toggle_data" and isinstance(body["seed"], int)
    assert body["temperature"] == 0.0 and body["model"] == "m"
    assert [r["body"]["seed"] for r in server.requests] == [int(s) for s in np.random.default_rng(1).integers(0, 2**31 - 1, 3)]


def test_make_user_specs():
    assert isinstance(make_user("offline"), OfflineUser)
    assert isinstance(make_user({"kind": "offline", "max_turns": 3}), OfflineUser)
    assert isinstance(make_user({"kind": "replay", "messages": []}), ReplayUser)
    assert isinstance(make_user({"kind": "llm", "model": "m", "base_url": "http://x"}), LLMUser)
    with pytest.raises(ValueError):
        make_user({"kind": "psychic"})
    with pytest.raises(ValueError):
        OfflineUser(max_turns=0)


def test_every_user_implements_the_core_seam():
    assert all(isinstance(u, UserSimulator) for u in (OfflineUser(), ReplayUser([]), LLMUser(FakeBackend([]))))
    client = make_user({"kind": "llm", "model": "m", "base_url": "http://x"}).client
    assert isinstance(client, OpenAIChatClient) and client.url == "http://x/chat/completions"
