"""The step fast paths give exactly the results of the plain code paths.

* cached texts of database records (:meth:`BaseDb.model_text`) equal a fresh
  ``to_json_str`` of the tool's value, before and after writes, across episodes;
* ``ParsedAction.openai_tool_calls`` equals ``ToolCall.to_dict`` for every call;
* ``info["messages"]`` handed out by a step is never changed by later steps.
"""

from __future__ import annotations

import copy
import json

import pytest

from trace_gym.core.toolcalls import parse_action
from trace_gym.tau2.engine import Tau2Environment
from trace_gym.tau2.env import Tau2Env
from trace_gym.tau2.toolkit import Model, to_json_str

pytestmark = pytest.mark.usefixtures("tau2_data")  # skip cleanly without the τ²-bench data


def _plain_text(env: Tau2Environment, name: str, args: dict) -> str:
    """The uncached result text: tau2's ``to_json_str`` of the raw value (state unchanged for reads)."""
    return to_json_str(env.make_tool_call(name, args))


def test_cached_record_text_matches_and_follows_writes():
    env = Tau2Environment("retail")
    user_id = "yusuf_rossi_9620"
    first = env.get_response("get_user_details", {"user_id": user_id})
    assert not first.error
    assert first.content == _plain_text(env, "get_user_details", {"user_id": user_id})
    assert env.get_response("get_user_details", {"user_id": user_id}).content == first.content  # cache hit
    new_address = {"address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX", "country": "USA",
                   "zip": "78701"}
    written = env.get_response("modify_user_address", {"user_id": user_id, **new_address})
    assert not written.error and "1 Main St" in written.content
    after = env.get_response("get_user_details", {"user_id": user_id})
    assert after.content == written.content != first.content
    assert after.content == _plain_text(env, "get_user_details", {"user_id": user_id})
    # another episode on the same base data still sees the original record
    other = Tau2Environment("retail")
    assert other.get_response("get_user_details", {"user_id": user_id}).content == first.content


def test_cached_texts_equal_plain_texts_for_read_tools():
    env = Tau2Environment("airline")
    calls = [
        ("get_user_details", {"user_id": "mia_li_3668"}),
        ("get_reservation_details", {"reservation_id": "NO6JO3"}),
        ("search_direct_flight", {"origin": "JFK", "destination": "SFO", "date": "2024-05-16"}),
        ("search_onestop_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-16"}),
        ("list_all_airports", {}),
    ]
    for name, args in calls:
        for _ in range(2):  # the second time from the cache
            res = env.get_response(name, args)
            assert not res.error, res.content
            assert res.content == _plain_text(env, name, args), name


def test_list_of_models_joins_like_json_dumps():
    env = Tau2Environment("mock")
    users = list(env.db.users.values())
    value = [Model(u) for u in users] + [Model({"fresh": 1.5, "n": [1, True, None]})]
    assert env._result_text(value) == to_json_str(value) == json.dumps([v.data for v in value], default=str)
    assert env._result_text([]) == to_json_str([])
    mixed = [Model(users[0]), 3]
    assert env._result_text(mixed) == to_json_str(mixed)


def test_record_text_cache_only_for_base_records():
    env = Tau2Environment("mock")
    base = env.db._base
    record = next(iter(env.db.users.values()))
    assert base.model_text(record) == json.dumps(record, default=str)
    assert base.model_text(copy.deepcopy(record)) is None  # an equal but different object is not trusted


@pytest.mark.parametrize("action", [
    '{"name": "get_user_details", "arguments": {"user_id": "ü_1", "n": [1, 2.5, null]}}',
    '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {"x": "y"}}</tool_call>',
    'get_order_details(order_id="#W1")\nfind_user_id_by_email(email="a@b.c")',
])
def test_openai_tool_calls_match_tool_call_dicts(action):
    parsed = parse_action(action)
    assert parsed.calls and parsed.error is None
    for start in (0, 7):
        assert parsed.openai_tool_calls(start=start) == [c.to_dict() for c in parsed.tool_calls(start=start)]


def test_fast_paths_keep_reasoning_and_fence_handling():
    assert parse_action("<think>x</think>hello").content == "hello"
    assert parse_action("plan</think>hello").content == "hello"
    fenced = parse_action('```json\n{"name": "a", "arguments": {"k": 1}}\n```')
    assert fenced.calls == [("a", {"k": 1})]
    assert parse_action("say ``` this").content == "say ``` this"


def test_step_messages_are_snapshots():
    env = Tau2Env("retail", max_steps=1000, max_errors=1000)
    _, info = env.reset(seed=0)
    kept = [info["messages"]]
    frozen = [copy.deepcopy(info["messages"])]
    for action in ['{"name": "get_user_details", "arguments": {"user_id": "yusuf_rossi_9620"}}',
                   "Could you tell me your user id, please?", '{"name": "broken", "arguments": {',
                   '{"name": "calculate", "arguments": {"expression": "1 + 1"}}']:
        _, _, term, trunc, info = env.step(action)
        kept.append(info["messages"])
        frozen.append(copy.deepcopy(info["messages"]))
        if term or trunc:
            break
    assert kept == frozen


@pytest.mark.parametrize("action", ["get_users(x={1, 2})", 'get_users(x=b"ab")', "get_users(x=1j)", "get_users(x=...)"])
def test_python_call_with_non_json_literal_is_a_format_error(action):
    parsed = parse_action(action)
    assert parsed.error is not None and "must be a literal" in parsed.error and not parsed.calls
    env = Tau2Env("mock")
    env.reset(seed=0)
    before = env.state_fingerprint()
    obs, _, _, _, info = env.step(action)
    assert info["action_error"] == parsed.error and "not executed" in obs
    assert env.state_fingerprint() == before


def test_private_record_texts_follow_every_change():
    env = Tau2Environment("retail")
    user_id = "yusuf_rossi_9620"
    address = {"address1": "1 Main St", "address2": "", "city": "Austin", "state": "TX", "country": "USA", "zip": "78701"}
    for city in ["Austin", "Boston", "Chicago"]:
        written = env.get_response("modify_user_address", {"user_id": user_id, **address, "city": city})
        assert not written.error and city in written.content
        for _ in range(2):
            read = env.get_response("get_user_details", {"user_id": user_id})
            assert read.content == written.content == _plain_text(env, "get_user_details", {"user_id": user_id})
        failed = env.get_response("modify_user_address", {"user_id": user_id, **address, "zip": 5})  # rejected
        assert failed.error
        assert env.get_response("get_user_details", {"user_id": user_id}).content == written.content
    assert env.db._base.model_text(env.db.users[user_id]) is None  # a changed record is not served from the cache
