import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.core import Message, MessageError, ToolCall, validate_conversation

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=8,
)


@given(
    content=st.none() | st.text(),
    args=st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=4),
)
def test_assistant_round_trip(content, args):
    m = Message.assistant(content, [ToolCall("call_0", "f", args)])
    d = m.to_dict()
    assert Message.from_dict(d) == m
    assert Message.from_json(m.to_json()) == m
    # the wire form is the OpenAI one: arguments are a JSON string
    assert json.loads(d["tool_calls"][0]["function"]["arguments"]) == args


def test_openai_dicts_round_trip_exactly():
    convo = [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
        {"role": "tool", "content": "42", "tool_call_id": "c1", "name": "f"},
        {"role": "assistant", "content": "done"},
    ]
    parsed = validate_conversation(convo)
    assert [m.to_dict() for m in parsed] == convo


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"role": "robot", "content": "x"}, "unknown role"),
        ({"content": "x"}, "without a role"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": "x", "tool_call_id": "a"}, "only valid on tool"),
        ({"role": "user", "content": 3}, "content must be"),
        ({"role": "user", "content": "x", "extra": 1}, "unknown message fields"),
        ({"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "[1]"}}]}, "JSON object"),
        ({"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{"}}]}, "malformed"),
    ],
)
def test_malformed_messages_are_rejected_with_reason(bad, match):
    with pytest.raises(MessageError, match=match):
        Message.from_dict(bad)


def test_tool_result_must_answer_a_pending_call():
    with pytest.raises(MessageError, match="unknown or already answered"):
        validate_conversation([{"role": "tool", "content": "x", "tool_call_id": "nope"}])
