"""ScriptedPolicy, script files, the batch helper and policy specs."""

from __future__ import annotations

import json

import pytest

from trace_gym.policies import (
    Policy,
    PolicyError,
    ScriptedPolicy,
    ScriptExhausted,
    act_batch,
    parse_actions,
    policy_from_spec,
)
from trace_gym.policies.openai_compat import OpenAICompatPolicy


def test_scripted_list_replays_and_resets():
    p = ScriptedPolicy(["a", "b"])
    assert isinstance(p, Policy)
    assert [p.act([], []), p.act([], [])] == ["a", "b"]
    with pytest.raises(ScriptExhausted, match="ran out after 2 actions"):
        p.act([], [])
    assert p.exhausted
    p.reset(3)
    assert not p.exhausted and p.act([], []) == "a"


def test_scripted_callable():
    calls = []

    def fn(messages, tools):
        calls.append(len(messages))
        return None if len(calls) > 2 else f"turn {len(calls)}"

    p = ScriptedPolicy(fn)
    assert p.act([{"role": "user", "content": "x"}], []) == "turn 1"
    assert p.act([], []) == "turn 2"
    with pytest.raises(ScriptExhausted, match="returned None after 2 actions"):
        p.act([], [])
    with pytest.raises(PolicyError, match="not str"):
        ScriptedPolicy(lambda m, t: 42).act([], [])


def test_scripted_rejects_non_strings():
    with pytest.raises(TypeError, match="item 1"):
        ScriptedPolicy(["ok", 3])  # type: ignore[list-item]


def test_parse_actions_formats():
    assert parse_actions("hello\n\nread_note(key='a')\n") == ["hello", "read_note(key='a')"]
    multi = ["<tool_call>\n{\"name\": \"x\", \"arguments\": {}}\n</tool_call>", "bye"]
    assert parse_actions(json.dumps(multi)) == multi
    # A JSON call list on a line is one action, not a script list.
    line = '[{"name": "a", "arguments": {}}]'
    assert parse_actions(line) == [line]
    assert parse_actions("[not json\nsecond") == ["[not json", "second"]


def test_scripted_from_file(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("one\ntwo\n")
    p = ScriptedPolicy.from_file(f)
    assert p.policy_id == "scripted:s.txt" and p.act([], []) == "one"
    with pytest.raises(FileNotFoundError, match="action script not found"):
        ScriptedPolicy.from_file(tmp_path / "missing.txt")


def test_act_batch_helper():
    p = ScriptedPolicy(["a", "b", "c"])
    assert act_batch(p, [([], []), ([], [])]) == ["a", "b"]
    assert act_batch(p, []) == []

    class Bad:
        policy_id = "bad"

        def act(self, m, t):
            return "x"

        def act_batch(self, reqs):
            return ["x"]

    with pytest.raises(PolicyError, match="1 actions for 2 requests"):
        act_batch(Bad(), [([], []), ([], [])])


def test_policy_from_spec(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("hi\n")
    assert isinstance(policy_from_spec(f"scripted:{f}"), ScriptedPolicy)
    p = policy_from_spec("openai:http://127.0.0.1:9/v1#my-model", max_new_tokens=7, greedy=True, seed=None)
    assert isinstance(p, OpenAICompatPolicy)
    assert p.url == "http://127.0.0.1:9/v1/chat/completions" and p.model == "my-model"
    assert p.max_tokens == 7 and p.temperature == 0.0 and p.policy_id == "openai:my-model"
    for bad in ["nope", "scripted:", "hf:", "openai:http://x", "openai:#m", "smollm2:extra"]:
        with pytest.raises(ValueError):
            policy_from_spec(bad)
    with pytest.raises(FileNotFoundError):
        policy_from_spec(f"scripted:{tmp_path / 'missing'}")
