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


# --------------------------------------------------------------------------- hostile input
import re  # noqa: E402
import time  # noqa: E402

from hypothesis import HealthCheck, settings  # noqa: E402

from trace_gym.core.toolcalls import MAX_CALL_SYNTAX_CHARS, MAX_CALLS, MAX_DEPTH, _unfence, strip_reasoning  # noqa: E402
from trace_gym.testing import HOSTILE_SHAPES, hostile_action, hostile_actions  # noqa: E402

_FAST = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _well_formed(p):
    assert (p.error is None) != (p.error is not None and not p.calls)
    if p.error is not None:
        assert isinstance(p.error, str) and p.error
    json.dumps(p.calls)
    json.dumps(p.openai_tool_calls())
    return p


@_FAST
@given(hostile_actions(["get_user_details", "f"], max_size=3_000))
def test_hostile_actions_of_every_shape_parse_without_raising(action):
    _well_formed(parse_action(action))


@_FAST
@given(st.sampled_from(sorted(HOSTILE_SHAPES)), st.integers(0, 3_000), st.text(max_size=30), st.text(max_size=30))
def test_hostile_actions_wrapped_in_any_text_parse_without_raising(shape, n, before, after):
    _well_formed(parse_action(before + hostile_action(shape, n, "f") + after))


_JSON_NESTING = ["nested_json_args", "nested_json_objects", "nested_json_block", "nested_args_string", "nested_json_unclosed"]


@_FAST
@given(st.sampled_from(_JSON_NESTING), st.integers(MAX_DEPTH + 1, 20_000))
def test_json_nested_past_the_limit_is_an_action_error_that_says_so(shape, n):
    p = parse_action(hostile_action(shape, n, "f"))
    assert p.calls == [] and p.error is not None
    assert f"at most {MAX_DEPTH} levels" in p.error


@_FAST
@given(st.integers(0, MAX_DEPTH - 3))
def test_json_nested_within_the_limit_still_parses(n):
    value = []
    for _ in range(n):
        value = [value]
    for shape in ("nested_json_args", "nested_json_block"):
        p = parse_action(hostile_action(shape, n + 1, "f"))  # {"a": n+1 lists} nests n+3 levels with the call
        assert p.error is None and p.calls == [("f", {"a": value})]


@_FAST
@given(st.sampled_from(["nested_calls", "nested_brackets_call", "unary_chain", "binop_chain", "attribute_chain",
                        "subscript_chain", "not_chain"]), st.integers(MAX_DEPTH + 1, 20_000))
def test_deep_python_call_expressions_are_action_errors(shape, n):
    p = parse_action(hostile_action(shape, n, "f"))
    assert p.calls == [] and p.error is not None


def test_python_values_nested_past_the_limit_say_so_and_long_call_syntax_is_refused():
    p = parse_action(hostile_action("nested_brackets_call", MAX_DEPTH + 5, "f"))
    assert p.error is not None and "nested more than" in p.error
    p = parse_action("f(a='" + "x" * MAX_CALL_SYNTAX_CHARS + "')")
    assert p.error is not None and "limited to" in p.error and "JSON" in p.error
    long_json = json.dumps({"name": "f", "arguments": {"a": "x" * MAX_CALL_SYNTAX_CHARS}})
    assert parse_action(long_json).calls == [("f", {"a": "x" * MAX_CALL_SYNTAX_CHARS})]


@pytest.mark.parametrize("shape", ["many_blocks", "many_json_calls", "many_python_calls"])
def test_at_most_max_calls_in_one_action(shape):
    assert len(parse_action(hostile_action(shape, MAX_CALLS, "f")).calls) == MAX_CALLS
    p = parse_action(hostile_action(shape, MAX_CALLS + 1, "f"))
    assert p.calls == [] and f"more than {MAX_CALLS} tool calls" in p.error


def test_a_number_too_long_to_convert_is_an_action_error():
    p = parse_action(hostile_action("huge_number", 10_000, "f"))
    assert p.calls == [] and "digits" in p.error


_TAG_SOUP = st.lists(st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "</think>", "x", " ", '{"name": "f"}', "\n"]),
                     max_size=60).map("".join)


def _old_strip(text):  # the regular-expression definition the linear scan replaced
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    return text.split("</think>")[-1] if "</think>" in text else text


@_FAST
@given(_TAG_SOUP)
def test_reasoning_removal_is_the_regular_expression_definition(text):
    assert strip_reasoning(text) == _old_strip(text)


@_FAST
@given(_TAG_SOUP)
def test_tool_call_blocks_are_the_regular_expression_definition(text):
    text = _old_strip(text)
    if "<tool_call>" not in text and "</tool_call>" not in text:
        return
    bodies = [b.strip() for b in re.findall(r"<tool_call>(.*?)</tool_call>", text, flags=re.DOTALL)]
    rest = re.sub(r"<tool_call>(.*?)</tool_call>", "", text, flags=re.DOTALL)
    p = parse_action(text)
    valid = all(b == '{"name": "f"}' for b in bodies) and "<tool_call>" not in rest and "</tool_call>" not in rest
    assert (p.error is None) == valid
    if valid:
        assert p.calls == [("f", {})] * len(bodies) and p.content == (rest.strip() or None)


@_FAST
@given(st.lists(st.sampled_from(["`", "```", "json", "x", " ", "\n", "{}", "-"]), max_size=20).map("".join))
def test_code_fences_are_the_regular_expression_definition(text):
    text = text.strip()
    m = re.match(r"^```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```$", text, flags=re.DOTALL)
    assert _unfence(text) == (m.group(1).strip() if m else text)


# Shapes that were quadratic (tag and fence scans), recursive (JSON, Python's parser) or both.
_WORST = {
    "open_tags": lambda n: "<tool_call>" * (n // 11),
    "think_tags": lambda n: "<think>" * (n // 7),
    "think_blocks": lambda n: "<think>x</think>" * (n // 16),
    "unclosed_think_then_block": lambda n: "<think>" * (n // 7) + '<tool_call>{"name": "f"}</tool_call>',
    "nested_json_call": lambda n: '{"name": "f", "arguments": ' + "[" * n,
    "nested_json_in_block": lambda n: '<tool_call>{"name": "f", "arguments": {"a": ' + "[" * (n // 2) + "]" * (n // 2) + "}}</tool_call>",
    "escaped_quotes": lambda n: '{"name": "f", "arguments": {"a": "' + '\\"[' * (n // 3) + '"}}',
    "backslash_quotes": lambda n: '["' + '\\"' * (n // 2),
    "python_call_prefix": lambda n: "f(a=" * (n // 4),
    "fence_spaces": lambda n: "```" + " " * n + "x",
    "many_blocks": lambda n: '<tool_call>{"name": "f"}</tool_call>' * (n // 36),
}


def _best_of(fn, text, repeat=3):
    """The least process CPU time of ``repeat`` calls (other processes on the machine barely disturb it)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn(text)
        best = min(best, time.process_time() - t0)
    return best


@pytest.mark.parametrize("shape", sorted(_WORST))
def test_a_one_megabyte_adversarial_action_parses_in_linear_time(shape):
    """A guard against quadratic behaviour, robust to a loaded machine: in CPU time, the 1 MB action may take at
    most 30 times as long as the same shape at 1/8 of the size (linear: 8x; quadratic: 64x), plus one second."""
    build = _WORST[shape]
    big, small = build(1_000_000), build(125_000)
    assert len(big) >= 900_000
    _well_formed(parse_action(big))
    t_small, t_big = _best_of(parse_action, small), _best_of(parse_action, big)
    assert t_big <= 30 * t_small + 1.0, f"{shape}: {t_big:.3f}s at 1 MB against {t_small:.3f}s at 125 KB"


def test_recorded_tool_calls_with_deeply_nested_arguments_are_message_errors():
    from trace_gym.core.messages import MessageError, ToolCall

    for raw in ("[" * 5_000, "[" * 100 + "]" * 100, '{"a": ' + "9" * 10_000 + "}"):
        with pytest.raises(MessageError):
            ToolCall.from_dict({"id": "c", "type": "function", "function": {"name": "f", "arguments": raw}})


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n', max_size=8),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=4), c, max_size=3),
    max_leaves=20,
)


def _depth(v) -> int:
    if isinstance(v, list):
        return 1 + max(map(_depth, v), default=0)
    if isinstance(v, dict):
        return 1 + max(map(_depth, v.values()), default=0)
    return 0


@_FAST
@given(_JSON_VALUES, st.booleans())
def test_nesting_depth_is_exact_on_json_with_brackets_and_escapes_in_strings(value, ascii_only):
    from trace_gym.core.boundedjson import nesting_depth

    assert nesting_depth(json.dumps(value, ensure_ascii=ascii_only)) == _depth(value)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.lists(st.sampled_from(["</tool_call>", "<tool_call>", "a", '"', "\\"]), max_size=5).map("".join), max_size=3))
def test_string_arguments_holding_tool_call_tags_round_trip(arguments):
    action = format_tool_call("lookup", arguments)
    parsed = parse_action(action)
    assert parsed.error is None
    assert parsed.calls == [("lookup", arguments)]
