"""The core user-simulator seam: the turn type, shared pieces, and every family implementing it."""

from __future__ import annotations

import pytest

from trace_gym.capabilities.user import ScriptedUser as CapabilityScriptedUser
from trace_gym.capabilities.user import SimulatedUser
from trace_gym.core.users import STOP, ReplayTurns, UserError, UserSimulator, UserTurn, flip_roles
from trace_gym.llm import ChatReply, FunctionChatClient, ask_model
from trace_gym.tau2.users import LLMUser as Tau2LLMUser
from trace_gym.tau2.users import OfflineUser
from trace_gym.tau2.users import ReplayUser as Tau2ReplayUser
from trace_gym.toolsandbox.users import LLMUser as SandboxLLMUser
from trace_gym.toolsandbox.users import ReplayUser as SandboxReplayUser
from trace_gym.toolsandbox.users import ScriptedUser as SandboxScriptedUser


def test_a_turn_reads_as_its_chat_message():
    turn = UserTurn("hello")
    assert dict(turn) == {"role": "user", "content": "hello", "tool_calls": None} == turn
    assert turn.get("tool_calls") is None and not turn.end
    call = UserTurn(None, [{"name": "toggle_data", "arguments": {}}])
    assert call["tool_calls"] == [{"name": "toggle_data", "arguments": {}}] and call.tool_calls == ({"name": "toggle_data", "arguments": {}},)
    call["tool_calls"][0]["name"] = "changed"  # the view is a copy: the turn does not change
    assert call.tool_calls[0]["name"] == "toggle_data"
    assert UserTurn(None, []).get("tool_calls") is None and UserTurn(end=True) != UserTurn("x")
    assert UserTurn("bye", end=True) != UserTurn("bye") and UserTurn("bye", end=True) == {"role": "user", "content": "bye", "tool_calls": None}


def test_replay_turns_then_final():
    r = ReplayTurns([UserTurn("a"), UserTurn("b")], UserTurn(STOP, end=True))
    assert [r.respond([]).content for _ in range(4)] == ["a", "b", STOP, STOP]
    r.reset(None)
    assert r.respond([]).content == "a"


def test_flip_roles_shows_the_users_side():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}, {"role": "tool", "content": "r"},
            {"role": "user", "name": "env_feedback", "content": "bad action"}, {"role": "assistant", "content": "done"}]
    assert flip_roles(msgs) == [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "done"}]


def test_ask_model_turns_any_failure_into_a_user_error():
    ok = FunctionChatClient(lambda m: "fine")
    assert ask_model(ok, [{"role": "user", "content": "x"}], tools=[], seed=5).text == "fine"
    assert ok.requests[0]["tools"] is None and ok.requests[0]["seed"] == 5
    with pytest.raises(UserError, match="model failed: LLMError: .*ZeroDivisionError"):
        ask_model(FunctionChatClient(lambda m: 1 / 0), [])


def test_every_family_implements_the_seam():
    client = FunctionChatClient(lambda m: "ok")
    users = [OfflineUser(), Tau2ReplayUser([]), Tau2LLMUser(client), SandboxScriptedUser(), SandboxReplayUser([]),
             SandboxLLMUser(client), CapabilityScriptedUser(rules=[]), SimulatedUser(client, "You want a refund.")]
    assert all(isinstance(u, UserSimulator) for u in users)


def test_capability_users_answer_with_turns():
    convo = [{"role": "user", "content": "I want a refund."}, {"role": "assistant", "content": "Please CONFIRM the refund."}]
    scripted = CapabilityScriptedUser(rules=[{"when_any": ["confirm"], "say": "Yes.", "end": True}], max_turns=3)
    assert scripted.respond(convo) == UserTurn("Yes.", end=True) and scripted.respond(convo).end
    scripted.reset()
    assert scripted.turns == 0
    sim = SimulatedUser(FunctionChatClient(lambda m: f"Sure. {STOP}"), "You want a refund.")
    turn = sim.respond(convo)
    assert turn.content == "Sure." and turn.end
    seen = FunctionChatClient(lambda m: ChatReply("again?"))
    assert not SimulatedUser(seen, "be brief").respond(convo).end
    assert [m["role"] for m in seen.requests[0]["messages"]] == ["system", "assistant", "user"]
    failing = SimulatedUser(FunctionChatClient(lambda m: 1 / 0), "x").respond(convo)
    assert failing.end and failing.content == "(user simulator failed: LLMError)"
