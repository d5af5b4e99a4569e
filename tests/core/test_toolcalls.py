import json
import keyword

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.core import format_tool_call, parse_action

names = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))
scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=20)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(min_size=1, max_size=5), c, max_size=3), max_leaves=6)
kw = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda k: not keyword.iskeyword(k))


@given(names, st.dictionaries(kw, values, max_size=4), st.sampled_from(["hermes", "json", "python"]))
def test_format_then_parse_round_trips(name, args, style):
    parsed = parse_action(format_tool_call(name, args, style))
    assert parsed.error is None
    assert parsed.calls == [(name, args)]


def test_hermes_blocks_several_calls_in_order_and_preamble_is_kept():
    a = 'Let me check.\n<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>\n<tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call>'
    p = parse_action(a)
    assert p.calls == [("a", {"x": 1}), ("b", {"y": 2})]
    assert p.content == "Let me check."


def test_json_object_list_and_openai_shape():
    assert parse_action('{"name": "f", "arguments": {"a": 1}}').calls == [("f", {"a": 1})]
    assert parse_action('[{"name": "f"}, {"name": "g", "parameters": {"b": 2}}]').calls == [("f", {}), ("g", {"b": 2})]
    assert parse_action('{"type": "function", "function": {"name": "f", "arguments": "{}"}}').calls == [("f", {})]
    assert parse_action('```json\n{"name": "f", "arguments": {}}\n```').calls == [("f", {})]


def test_python_syntax_with_json_literals_and_several_lines():
    p = parse_action("get_user(user_id='u1', active=true)\nlist_orders(limit=None); ping()")
    assert p.calls == [("get_user", {"user_id": "u1", "active": True}), ("list_orders", {"limit": None}), ("ping", {})]


def test_reasoning_is_removed():
    p = parse_action("<think>maybe call f</think>Hello there")
    assert p.content == "Hello there" and not p.calls
    p = parse_action('thinking...</think><tool_call>{"name": "f", "arguments": {}}</tool_call>')
    assert p.calls == [("f", {})]


@pytest.mark.parametrize(
    "action, fragment",
    [
        ("", "empty action"),
        ("   \n", "empty action"),
        ('<tool_call>{"name": "f"', "unbalanced"),
        ("<tool_call>{bad json}</tool_call>", "invalid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'no string "name"'),
        ('{"name": "f", "arguments": {"a": 1}', "not valid JSON"),
        ('{"name": "f", "arguments": [1]}', "must be a JSON object"),
        ('{"name": "f", "arguments": "{oops"}', "not valid JSON"),
        ('{"name": "f", "x": 1}', "unexpected keys"),
        ("f(1, 2)", "by keyword"),
        ("f(a=open('x'))", "must be a literal"),
        ("f(a='x'", "not valid call syntax"),
    ],
)
def test_malformed_calls_are_errors_that_say_what_to_do(action, fragment):
    p = parse_action(action)
    assert p.error is not None and fragment in p.error
    assert p.calls == []


@pytest.mark.parametrize("text", ["Hello! How can I help?", "Your order (#W123) is on its way.", "The total is 3 + 4 = 7", "ok"])
def test_plain_text_is_a_message(text):
    p = parse_action(text)
    assert p.error is None and not p.calls and p.content == text


@given(st.text())
def test_parse_never_raises(text):
    p = parse_action(text)
    assert (p.error is None) or not p.calls
    json.dumps(p.calls)  # arguments are always JSON-serialisable
