"""The step's fast paths give exactly what the general code gives.

* :func:`trace_gym.core.boundedjson.loads` runs the JSON scanner directly when the document
  fills the text: same value as ``json.loads``, and the same error (type and message) otherwise;
* :func:`parse_action` takes a bare JSON object straight to the JSON grammar: the same result
  as the full path (which a leading space forces);
* the call records encode arguments with a C encoder built once: the same text as
  ``json.dumps(..., ensure_ascii=False)``, and the same error for what JSON cannot hold.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.core.boundedjson import JSONLimitError
from trace_gym.core.boundedjson import loads as bounded_loads
from trace_gym.core.toolcalls import ParsedAction, _encode_args, parse_action

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                       max_leaves=20)
_noise = st.sampled_from(["", " ", "\n", "x", "}", "]", ",", "\ufeff", '"', "{", "[1", "\\", "1e999999", "9" * 5000])


def _outcome(fn, text):
    try:
        return ("ok", fn(text))
    except json.JSONDecodeError as exc:
        return ("decode", exc.msg, exc.pos)
    except (JSONLimitError, ValueError) as exc:
        return ("limit", str(exc))


def _reference_loads(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # a number too long to convert: boundedjson reports it as a limit
        raise JSONLimitError(str(exc)) from None


@given(_values, _noise, _noise, st.booleans())
def test_bounded_loads_is_json_loads(value, before, after, compact):
    text = json.dumps(value, separators=(",", ":") if compact else None, ensure_ascii=compact)
    for t in (text, before + text, text + after, before + text + after, text[: len(text) // 2]):
        assert _outcome(bounded_loads, t) == _outcome(_reference_loads, t)


@given(_values, _noise)
def test_a_bare_json_action_parses_as_the_full_grammar_does(arguments, noise):
    for obj in ({"name": "tool_x", "arguments": arguments}, {"name": "tool_x", "arguments": arguments, "id": "1"},
                {"type": "function", "function": {"name": "f", "parameters": arguments}},
                {"name": "", "arguments": arguments}, {"arguments": arguments}, {"name": "t", "arguments": arguments, "x": 1}):
        text = json.dumps(obj)
        for action in (text, text[:-1] + noise + "}", "{" + noise + text[1:]):
            if not action.startswith("{") or not action.endswith("}"):
                continue
            fast = parse_action(action)
            assert fast == parse_action(" " + action)  # a leading space takes the full path
            assert isinstance(fast, ParsedAction)


def test_the_bare_json_shortcut_leaves_reasoning_and_blocks_to_the_full_grammar():
    call = '{"name": "a", "arguments": {}}'
    assert parse_action("{<think>x</think>}").error == parse_action("{}").error  # the reasoning is removed first
    assert parse_action("{" + "<tool_call>" + call + "</tool_call>}").calls == [("a", {})]


@given(_values)
def test_call_records_encode_arguments_as_json_dumps(value):
    assert _encode_args(value) == json.dumps(value, ensure_ascii=False)


def test_call_records_report_what_json_cannot_hold_as_json_dumps_does():
    cyclic: dict = {}
    cyclic["self"] = cyclic
    for bad in (cyclic, {"x": object()}, {"x": {1, 2}}):
        with pytest.raises(Exception) as want:
            json.dumps(bad, ensure_ascii=False)
        with pytest.raises(type(want.value)) as got:
            _encode_args(bad)
        assert str(got.value) == str(want.value)
    assert _encode_args({"ok": [1.5, float("nan"), None, "é"]}) == json.dumps({"ok": [1.5, float("nan"), None, "é"]}, ensure_ascii=False)
    assert _encode_args({1: 2, None: 3, 2.5: True}) == json.dumps({1: 2, None: 3, 2.5: True}, ensure_ascii=False)
