"""The ToolSandbox world, tools and message-bus engine."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.corpora import corpus_dir
from trace_gym.data import toolsandbox_data_dir
from trace_gym.toolsandbox.world import REFERENCE_NOW, World, counter_ids


@pytest.fixture(scope="module")
def data():
    root = toolsandbox_data_dir()
    from trace_gym.toolsandbox.scenarios import load_scenarios

    return root, load_scenarios()


def _sandbox(data, name):
    from trace_gym.toolsandbox.engine import Sandbox

    return Sandbox.start(data[1][name], agent_tools={n: n for n in json.load(open(data[0] / "tools.json"))["discovery_order"]})


def _answer(sb, tool, /, **args):
    return sb.agent_calls([(f"c{len(sb.messages)}", tool, args)])[-1]


# ---------------------------------------------------------------------------- world
def test_world_writes_land_in_one_snapshot_per_message():
    w = World({"CONTACT": [(0, []), (5, [{"person_id": "a", "name": "A"}])]})
    assert w.write_index == 6
    w.add("CONTACT", [{"person_id": "b", "name": "B"}])
    w.add("CONTACT", [{"person_id": "c", "name": "C"}])
    snaps = w.snapshots()["CONTACT"]
    assert [s["sandbox_message_index"] for s in snaps] == [0, 5, 6]
    assert [r["person_id"] for r in snaps[-1]["rows"]] == ["a", "b", "c"]
    assert w.state_at("CONTACT", 5) == [{"person_id": "a", "name": "A", "phone_number": None, "relationship": None, "is_self": None}]
    assert w.state_at("CONTACT", 3) == []


def test_world_copy_is_independent_but_shares_ids():
    w = World(new_id=counter_ids())
    c = w.copy()
    c.add("REMINDER", [{"reminder_id": c.new_id(), "content": "x", "latitude": 1}])
    assert w.rows("REMINDER") == []
    assert c.rows("REMINDER")[0]["latitude"] == 1.0 and isinstance(c.rows("REMINDER")[0]["latitude"], float)
    assert w.new_id() == str(uuid.uuid5(uuid.NAMESPACE_URL, "toolsandbox-conformance/1"))


def test_world_rejects_unknown_columns_and_databases():
    w = World()
    with pytest.raises(Exception, match="unknown column"):
        w.add("CONTACT", [{"nope": 1}])
    with pytest.raises(Exception, match="unknown database"):
        World({"FOO": []})


def test_world_from_scenario_snapshots(data):
    from trace_gym.toolsandbox.engine import world_index

    s = data[1]["turn_on_wifi_low_battery_mode"]
    idx = world_index(s.sandbox_rows())
    assert idx == s.first_user_sandbox_message_index - 1
    w = World.from_scenario({db: s.world_rows(db) for db in ("SETTING", "CONTACT", "MESSAGING", "REMINDER")}, idx)
    setting = w.snapshots()["SETTING"]
    assert [x["sandbox_message_index"] for x in setting] == [0, idx]
    assert setting[0]["rows"][0]["low_battery_mode"] is False and setting[1]["rows"][0]["low_battery_mode"] is True


# ---------------------------------------------------------------------------- tools
def test_preconditions_and_error_lines(data):
    sb = _sandbox(data, "turn_on_wifi_low_battery_mode")  # low battery, everything off
    assert _answer(sb, "set_wifi_status", on=True)["content"] == "PermissionError: Wifi cannot be turned on in low battery mode"
    r = _answer(sb, "send_message_with_phone_number", phone_number="+12453344098", content="hi")
    assert r["tool_call_exception"] == "ConnectionError: Cellular service is not enabled" and r["tool_trace"] is None
    assert _answer(sb, "get_current_location")["content"] == "PermissionError: Location service is not enabled."
    assert _answer(sb, "search_stock", query="Apple")["content"] == "ConnectionError: Wifi is not enabled"
    assert _answer(sb, "set_low_battery_mode_status", on=True)["content"] == "ValueError: low_battery_mode already enabled"
    before = sb.world.rows("SETTING")
    _answer(sb, "set_low_battery_mode_status", on=False)
    assert _answer(sb, "set_wifi_status", on=True)["content"] == "None"
    assert _answer(sb, "get_wifi_status")["content"] == "True"
    assert sb.world.rows("SETTING") != before


def test_argument_binding_and_type_errors(data):
    sb = _sandbox(data, "wifi_off")
    assert _answer(sb, "remove_reminder")["content"] == "TypeError: missing a required argument: 'reminder_id'"
    assert _answer(sb, "get_wifi_status", x=1)["content"] == "TypeError: got an unexpected keyword argument 'x'"
    assert _answer(sb, "set_wifi_status", on="no")["content"] == (
        "TypeError: Parameter 'on' is of type '<class 'str'>', but expected '<class 'bool'>'."
    )
    assert _answer(sb, "search_reminder", reminder_timestamp_lowerbound=5)["content"] == (
        "ValueError: Parameter 'reminder_timestamp_lowerbound' is smaller than its valid range minimum of 315529200.0."
    )
    assert _answer(sb, "search_contacts")["content"].startswith("ValueError: No search criteria are given.")
    assert _answer(sb, "add_contact", name="X", phone_number="12345")["content"] == (
        "phonenumbers.phonenumberutil.NumberParseException: (0) Missing or invalid default region."
    )
    assert _answer(sb, "modify_contact", person_id="nope", name="Y")["content"] == (
        "polars.exceptions.NoDataError: No db entry matching person_id='nope' found"
    )


def test_contacts_fuzzy_search_ids_and_traces(data):
    sb = _sandbox(data, "wifi_off")
    found = eval(_answer(sb, "search_contacts", name="Fredrik")["content"])  # repr of a list of dicts
    assert [c["name"] for c in found] == ["Fredrik Thordendal"]
    row = _answer(sb, "add_contact", name="Kirk Hammett", phone_number="+15550001111")
    assert row["content"] == repr(str(uuid.uuid5(uuid.NAMESPACE_URL, "toolsandbox-conformance/0")))
    assert row["tool_trace"][0]["arguments"] == {"name": "Kirk Hammett", "phone_number": "+15550001111", "relationship": None, "is_self": False}
    # NOT_GIVEN defaults are not traced
    row = _answer(sb, "search_contacts", name="Kirk")
    assert row["tool_trace"][0]["arguments"] == {"name": "Kirk"}
    assert _answer(sb, "add_contact", name="Me", phone_number="+15550002222", is_self=True)["content"] == (
        "polars.exceptions.DuplicateError: Self entry already exists. Cannot add another one."
    )


def test_utilities_are_utc_and_clock_is_frozen(data):
    sb = _sandbox(data, "wifi_off")
    assert _answer(sb, "get_current_timestamp")["content"] == repr(REFERENCE_NOW)
    info = eval(_answer(sb, "timestamp_to_datetime_info", timestamp=REFERENCE_NOW)["content"])
    assert info == {"year": 2025, "month": 6, "day": 4, "hour": 9, "minute": 0, "second": 0, "isoweekday": 3}
    assert _answer(sb, "datetime_info_to_timestamp", year=2025, month=6, day=4, hour=9, minute=0, second=0)["content"] == repr(REFERENCE_NOW)
    assert _answer(sb, "shift_timestamp", timestamp=REFERENCE_NOW, days=1)["content"] == repr(REFERENCE_NOW + 86400)
    assert eval(_answer(sb, "timestamp_diff", timestamp_0=REFERENCE_NOW, timestamp_1=REFERENCE_NOW - 1)["content"]) == {"days": -1, "seconds": 86399}
    assert _answer(sb, "search_holiday", holiday_name="Christmas Day")["content"] == "1766620800.0"
    assert _answer(sb, "unit_conversion", amount=20.0, from_unit="celsius", to_unit="fahrenheit")["content"] == "67.99999999999993"
    assert _answer(sb, "unit_conversion", amount=1, from_unit="Meter", to_unit="Second")["tool_call_exception"].startswith("pint.errors.")


def test_rapidapi_knowledge_base(data):
    sb = _sandbox(data, "wifi_off")
    assert _answer(sb, "search_lat_lon", latitude=37.334606, longitude=-122.009102)["content"] == (
        "'Apple Park 1 Apple Park Way Cupertino, CA 95014 United States'"
    )
    assert _answer(sb, "search_lat_lon", latitude=38.0, longitude=-122.0)["content"] == "None"
    assert _answer(sb, "search_weather_around_lat_lon", days=0, latitude=37.23686, longitude=-112.19147)["content"] == "None"
    assert _answer(sb, "convert_currency", amount=2048, from_currency_code="USD", to_currency_code="CNY")["content"] == "14540.8"
    assert _answer(sb, "convert_currency", amount=1, from_currency_code="XXQ", to_currency_code="USD")["content"] == (
        "ValueError: XXQ is not a known 3 letter ISO 4217 currency code"
    )
    assert _answer(sb, "search_weather_around_lat_lon", latitude=1.0)["content"] == (
        "ValueError: Latitude and Longitude must be either both provided, or both not provided"
    )


def test_knowledge_base_model_reproduces_the_recorded_answers(data):
    """Without the recorded answers, the model alone gives every canned response of tools.json."""
    import dataclasses

    from trace_gym.toolsandbox.catalog import load_catalog
    from trace_gym.toolsandbox.engine import Sandbox
    from trace_gym.toolsandbox.tools import KnowledgeBase

    cat = load_catalog()
    model_only = dataclasses.replace(cat, kb=KnowledgeBase(cat.kb.data))
    canned = json.load(open(data[0] / "tools.json"))["rapidapi"]["canned_responses_by_scenario"]
    assert len(canned) == 26
    for name, calls in canned.items():
        sb = Sandbox.start(data[1]["wifi_off"], cat=model_only, agent_tools={n: n for n in cat.specs})  # base world
        for c in calls:
            row = _answer(sb, c["tool_name"], **c["arguments"])
            assert row["tool_trace"][0]["result"] == c["result"], (name, c["tool_name"])


def test_recorded_answers_take_precedence(data):
    import dataclasses

    from trace_gym.toolsandbox.catalog import load_catalog
    from trace_gym.toolsandbox.engine import Sandbox
    from trace_gym.toolsandbox.tools import KnowledgeBase
    from trace_gym.toolsandbox.tools.rapidapi import _canned_key

    cat = load_catalog()
    kb = KnowledgeBase(cat.kb.data, {_canned_key("search_stock", {"query": "Pear"}): {"symbol": "PEAR"}})
    sb = Sandbox.start(data[1]["wifi_off"], cat=dataclasses.replace(cat, kb=kb), agent_tools={n: n for n in cat.specs})
    assert _answer(sb, "search_stock", query="Pear")["content"] == "{'symbol': 'PEAR'}"
    assert _answer(sb, "search_stock", query="Banana")["content"] == "None"
    sb.agent_calls([("w", "set_wifi_status", {"on": False})])
    assert _answer(sb, "search_stock", query="Pear")["content"] == "ConnectionError: Wifi is not enabled"


# ---------------------------------------------------------------------------- engine
def test_call_rows_and_answers(data):
    sb = _sandbox(data, "wifi_off")
    rows = sb.agent_calls([("call_0", "set_wifi_status", {"on": False})])
    call, answer = sb.messages[-2], rows[0]
    assert call["content"] == "call_0_parameters = {'on': False}\ncall_0_response = set_wifi_status(**call_0_parameters)\nprint(repr(call_0_response))"
    assert (call["sender"], call["recipient"], call["visible_to"]) == ("AGENT", "EXECUTION_ENVIRONMENT", ["AGENT", "EXECUTION_ENVIRONMENT"])
    assert answer["tool_trace"] == [{"tool_name": "set_wifi_status", "arguments": {"on": False}, "result": None}]
    assert sb.db_snapshots()["SETTING"][-1]["sandbox_message_index"] == answer["sandbox_message_index"]
    ends = sb.end_conversation()
    assert [r["conversation_active"] for r in ends] == [False, False] and not sb.active
    assert ends[0]["openai_tool_call_id"] == "end_0"


def test_parallel_calls_keep_the_failing_order(data):
    sb = _sandbox(data, "turn_on_wifi_low_battery_mode")
    rows = sb.agent_calls([("call_0", "set_low_battery_mode_status", {"on": False}), ("call_1", "set_wifi_status", {"on": True})])
    assert [r["openai_tool_call_id"] for r in rows] == ["call_1", "call_0"]
    assert rows[0]["tool_call_exception"] == "PermissionError: Wifi cannot be turned on in low battery mode"
    assert sb.world.setting("low_battery_mode") is False and sb.world.setting("wifi") is False
    # an order-independent batch keeps the requested order
    rows = sb.agent_calls([("a", "get_wifi_status", {}), ("b", "get_cellular_service_status", {})])
    assert [r["openai_tool_call_id"] for r in rows] == ["a", "b"]


def test_disallowed_tool_aborts_without_rows(data):
    from trace_gym.toolsandbox.engine import EpisodeAborted, Sandbox

    sb = Sandbox.start(data[1]["wifi_off"])
    n = len(sb.messages)
    with pytest.raises(EpisodeAborted) as exc:
        sb.agent_calls([("call_0", "set_wifi_status", {"on": False}), ("call_1", "get_current_timestamp", {})])
    assert exc.value.type_name == "KeyError" and "get_current_timestamp" in exc.value.message
    assert len(sb.messages) == n and sb.world.setting("wifi") is True


def test_replay_stops_at_the_message_cap(data):
    from trace_gym.toolsandbox.engine import replay

    steps = []
    for i in range(40):
        steps += [{"role": "agent", "type": "message", "content": f"question {i}"},
                  {"role": "user", "type": "message", "content": f"answer {i}"}]
    res = replay(data[1]["wifi_off"], steps)
    assert res.sandbox.new_count == 30
    assert res.unused_agent_steps == 25 and res.unused_user_steps == 25
    assert res.messages[-1]["conversation_active"] is True


def test_replay_reproduces_recorded_oracles(data):
    from trace_gym.toolsandbox.conformance import check_record

    path = corpus_dir("toolsandbox") / "multiple_tool_call_scenarios.jsonl"
    records = [json.loads(line) for line in open(path)]
    checked = 0
    for r in records:
        if r["kind"] in ("oracle", "parallel_calls", "extra_write_early"):
            assert check_record(r, data[1]) == [], r["id"]
            checked += 1
    assert checked > 50
