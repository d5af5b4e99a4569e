"""Unit tests of the ToolSandbox scorer: column kinds, constraint kinds, matching, turn count, errors."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import numpy as np
import pytest

from tests.corpora import corpus_dir
from trace_gym.toolsandbox.evaluation import (
    EvaluationInputError,
    Trajectory,
    aborted_result,
    constraint_similarity,
    evaluate,
    first_user_index,
    turn_count,
)
from trace_gym.toolsandbox.extractors import extract_candidates, surface_forms
from trace_gym.toolsandbox.scenarios import (
    ColumnSimilarity,
    Constraint,
    Extractor,
    ExtractorOutput,
    FrozenDict,
    freeze,
    load_scenarios,
)
from trace_gym.toolsandbox.similarity import column_similarity, is_close, rouge_l, table_similarity

# --------------------------------------------------------------------------- helpers


def msg(sender: str, recipient: str, content: Any = "", trace: Any = None, visible: Any = "auto") -> dict[str, Any]:
    return {
        "sender": sender,
        "recipient": recipient,
        "content": content,
        "openai_tool_call_id": None,
        "openai_function_name": None,
        "conversation_active": True,
        "tool_call_exception": None,
        "tool_trace": trace,
        "visible_to": [sender, recipient] if visible == "auto" else visible,
    }


def bus(*rows: dict[str, Any]) -> list[dict[str, Any]]:
    """A bus: a system row, a seeded first user message (null visible_to), then ``rows``."""
    head = [msg("SYSTEM", "AGENT", "be helpful", visible=None), msg("USER", "AGENT", "hi", visible=None)]
    return [{"sandbox_message_index": i, **r} for i, r in enumerate(head + list(rows))]


def contact(pid: str, name: str, phone: str, rel: str | None = None, is_self: bool = False) -> dict[str, Any]:
    return {"person_id": pid, "name": name, "phone_number": phone, "relationship": rel, "is_self": is_self}


SETTING = {
    "device_id": "d",
    "cellular": True,
    "wifi": True,
    "location_service": True,
    "low_battery_mode": False,
    "latitude": 1.0,
    "longitude": 2.0,
}
BASE_CONTACTS = [contact("p1", "Ann", "+1", "friend"), contact("p2", "Bob", "+2")]


def snapshots(contacts_by_index: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "SETTING": [{"sandbox_message_index": 0, "rows": [SETTING]}],
        "CONTACT": [{"sandbox_message_index": k, "rows": v} for k, v in sorted(contacts_by_index.items())],
        "MESSAGING": [{"sandbox_message_index": 0, "rows": []}],
        "REMINDER": [{"sandbox_message_index": 0, "rows": []}],
    }


def constraint(database: str, similarity: str, rows: list[dict[str, Any]], kinds: dict[str, Any], reference=None, **kw):
    specs = {c: (k if isinstance(k, ColumnSimilarity) else ColumnSimilarity(k)) for c, k in kinds.items()}
    dtypes = {"relationship": "String", "name": "String", "phone_number": "String", "is_self": "Boolean"}
    return Constraint(
        database=database,
        similarity=similarity,
        reference=reference,
        target_columns=tuple(rows[0]) if rows else (),
        target_dtypes=freeze({c: dtypes.get(c, "String") for c in (rows[0] if rows else {})}),
        target_rows=freeze(rows),
        column_similarity=FrozenDict(specs),
        **kw,
    )


def record(record_id: str) -> dict[str, Any]:
    for path in sorted(corpus_dir("toolsandbox").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if f'"id": "{record_id}"' in line[:300]:
                return json.loads(line)
    pytest.fail(f"record {record_id} is not in the public corpus")


# --------------------------------------------------------------------------- column similarities


def test_exact_treats_null_as_its_own_value() -> None:
    spec = ColumnSimilarity("exact")
    assert column_similarity(spec, "c", "a", "a") == 1.0
    assert column_similarity(spec, "c", None, "a") == 0.0
    assert column_similarity(spec, "c", None, None) == 1.0
    assert column_similarity(spec, "c", "", None) == 0.0
    assert column_similarity(spec, "c", 2048.0, 2048) == 1.0


def test_contains_is_literal_and_case_sensitive() -> None:
    spec = ColumnSimilarity("contains")
    assert column_similarity(spec, "content", "x = send_message_with_phone_number(**p)", "send_message") == 1.0
    assert column_similarity(spec, "content", "Send_Message", "send_message") == 0.0
    assert column_similarity(spec, "content", "a.b", "a*b") == 0.0
    assert column_similarity(spec, "content", None, "x") == 0.0


def test_close_uses_only_the_columns_own_tolerance() -> None:
    spec = ColumnSimilarity("close", FrozenDict({"latitude": 0.001}))
    assert column_similarity(spec, "latitude", 37.3351, 37.3346) == 1.0
    assert column_similarity(spec, "latitude", 37.337, 37.3346) == 0.0
    assert column_similarity(spec, "longitude", 1.0001, 1.0) == 0.0  # no entry for this column: equality
    assert column_similarity(spec, "longitude", 1.0, 1.0) == 1.0


def test_one_is_always_one() -> None:
    assert column_similarity(ColumnSimilarity("one"), "x", None, "anything") == 1.0


def test_tool_trace_matching_rules() -> None:
    trace = [{"tool_name": "set_wifi_status", "arguments": {"on": True, "extra": 1}, "result": None}]
    spec = ColumnSimilarity("tool_trace")
    assert column_similarity(spec, "tool_trace", trace, [{"tool_name": "set_wifi_status", "arguments": {"on": True}}])
    assert column_similarity(spec, "tool_trace", trace, {"tool_name": "set_wifi_status", "arguments": {"on": 1}}) == 1
    assert column_similarity(spec, "tool_trace", trace, [{"tool_name": "set_wifi_status", "arguments": {}}]) == 1
    assert (
        column_similarity(spec, "tool_trace", trace, [{"tool_name": "set_wifi_status", "arguments": {"on": False}}])
        == 0
    )
    assert column_similarity(spec, "tool_trace", trace, [{"tool_name": "x", "arguments": {}}]) == 0
    assert (
        column_similarity(spec, "tool_trace", trace, [{"tool_name": "set_wifi_status", "arguments": {"gone": None}}])
        == 0
    )
    assert column_similarity(spec, "tool_trace", None, [{"tool_name": "set_wifi_status", "arguments": {}}]) == 0
    alternatives = [{"tool_name": "x", "arguments": {}}, {"tool_name": "set_wifi_status", "arguments": {"on": True}}]
    assert column_similarity(spec, "tool_trace", trace, alternatives) == 1
    near = [{"tool_name": "f", "arguments": {"latitude": 37.0, "name": "a"}, "result": 1}]
    tol = ColumnSimilarity("tool_trace", FrozenDict({"latitude": 0.5}))
    assert column_similarity(tol, "tool_trace", near, [{"tool_name": "f", "arguments": {"latitude": 37.4}}]) == 1
    assert column_similarity(tol, "tool_trace", near, [{"tool_name": "f", "arguments": {"latitude": 37.6}}]) == 0
    inf = ColumnSimilarity("tool_trace", FrozenDict({"latitude": math.inf}))
    assert column_similarity(inf, "tool_trace", near, [{"tool_name": "f", "arguments": {"latitude": -90.0}}]) == 1
    assert column_similarity(inf, "tool_trace", near, [{"tool_name": "f", "arguments": {"name": "b"}}]) == 0


def test_is_close_follows_python_equality() -> None:
    assert is_close(True, 1, None) and is_close(None, None, None) and is_close(2048, 2048.0, None)
    assert is_close(1.0, 1.4, 0.5) and not is_close("1.0", 1.0, 0.5)


def test_rouge_l_uses_rouge_score_with_stemming_in_float32() -> None:
    assert rouge_l("Wifi is turned off", "Wifi is turned off.") == 1.0
    reply = "Sure! Wifi appears to be switched off Anything else?"
    assert rouge_l("Wifi is turned off", reply) == pytest.approx(2 * (2 / 9) * (2 / 4) / (2 / 9 + 2 / 4), abs=1e-7)
    assert rouge_l("one two three four five", "one two six seven eight") == 0.4000000059604645
    assert rouge_l("anything", "") == 0.0
    assert rouge_l("x", "y") == 0.0


# --------------------------------------------------------------------------- tables


def test_table_similarity_is_a_geometric_mean_over_an_optimal_assignment() -> None:
    kinds = {"name": ColumnSimilarity("exact"), "relationship": ColumnSimilarity("rouge_l")}
    rows = [{"name": "Ann", "relationship": "best friend"}, {"name": "Bob", "relationship": "brother"}]
    targets = [{"name": "Bob", "relationship": "brother"}, {"name": "Ann", "relationship": "friend"}]
    r = rouge_l("friend", "best friend")
    expected = math.exp(-((float(-np.log(np.float32(r))) / 2) + 0.0) / 2)
    assert table_similarity(rows, {"name", "relationship"}, targets, kinds) == pytest.approx(expected, abs=1e-12)
    assert table_similarity(rows[:1], {"name", "relationship"}, targets, kinds) == 0.0  # row counts differ
    assert table_similarity(rows, {"name"}, targets, kinds) == 0.0  # a target column is missing
    assert table_similarity(rows, {"name", "relationship"}, [targets[0], targets[0]], kinds) == 0.0  # a zero


# --------------------------------------------------------------------------- constraint kinds


def test_addition_compares_only_the_new_rows_with_null_replacement() -> None:
    new = contact("p3", "Cy", "+3")  # relationship null
    traj = Trajectory(bus(msg("AGENT", "USER", "done")), snapshots({0: BASE_CONTACTS, 2: BASE_CONTACTS + [new]}))
    kinds = {"name": "exact", "phone_number": "exact", "relationship": "exact"}
    null_target = constraint(
        "CONTACT", "addition", [{"name": "Cy", "phone_number": "+3", "relationship": None}], kinds, -1
    )
    empty_target = constraint(
        "CONTACT", "addition", [{"name": "Cy", "phone_number": "+3", "relationship": ""}], kinds, -1
    )
    assert constraint_similarity(null_target, traj, 2, 1) == 1.0
    assert constraint_similarity(empty_target, traj, 2, 1) == 1.0  # the documented quirk
    assert constraint_similarity(null_target, traj, 1, 1) == 0.0  # nothing added yet


def test_addition_is_zero_when_a_reference_row_disappeared_or_two_rows_appeared() -> None:
    new = contact("p3", "Cy", "+3")
    kinds = {"name": "exact"}
    target = constraint("CONTACT", "addition", [{"name": "Cy"}], kinds, -1)
    lost = Trajectory(bus(msg("AGENT", "USER")), snapshots({0: BASE_CONTACTS, 2: BASE_CONTACTS[:1] + [new]}))
    assert constraint_similarity(target, lost, 2, 1) == 0.0
    two = Trajectory(bus(msg("AGENT", "USER")), snapshots({0: BASE_CONTACTS, 2: BASE_CONTACTS + [new, new]}))
    assert constraint_similarity(target, two, 2, 1) == 0.0


def test_removal_and_update() -> None:
    kinds = {"name": "exact", "relationship": "rouge_l"}
    removed = Trajectory(bus(msg("AGENT", "USER")), snapshots({0: BASE_CONTACTS, 2: BASE_CONTACTS[1:]}))
    gone = constraint("CONTACT", "removal", [{"name": "Ann", "relationship": "friend"}], kinds, -1)
    assert constraint_similarity(gone, removed, 2, 1) == 1.0
    assert constraint_similarity(gone, removed, 1, 1) == 0.0
    modified = [BASE_CONTACTS[1], contact("p1", "Ann", "+1", "sister")]  # remove + append, as modify_contact does
    updated = Trajectory(bus(msg("AGENT", "USER")), snapshots({0: BASE_CONTACTS, 2: modified}))
    change = constraint("CONTACT", "update", [{"name": "Ann", "relationship": "sister"}], kinds, -1)
    assert constraint_similarity(change, updated, 2, 1) == 1.0
    assert constraint_similarity(change, removed, 2, 1) == 0.0  # row count changed


def test_guardrail_is_ordered_equality() -> None:
    reordered = Trajectory(bus(msg("AGENT", "USER")), snapshots({0: BASE_CONTACTS, 2: BASE_CONTACTS[::-1]}))
    guard = constraint("CONTACT", "guardrail", [], {}, -1)
    assert constraint_similarity(guard, reordered, 1, 1) == 1.0
    assert constraint_similarity(guard, reordered, 2, 1) == 0.0


def test_sandbox_snapshot_scores_the_single_message_at_the_index() -> None:
    traj = Trajectory(bus(msg("AGENT", "USER", "Wifi is turned off")), snapshots({0: BASE_CONTACTS}))
    reply = constraint(
        "SANDBOX",
        "snapshot",
        [{"sender": "AGENT", "recipient": "USER", "content": "Wifi is turned off"}],
        {"sender": "exact", "recipient": "exact", "content": "rouge_l"},
    )
    assert constraint_similarity(reply, traj, 2, None) == 1.0
    assert constraint_similarity(reply, traj, 1, None) == 0.0


WEATHER = Extractor(
    "search_weather_around_lat_lon_temperature_extractor",
    (ExtractorOutput("temperature", ("result", "current_temperature"), "float"),),
    "float_surface_forms",
)
AMOUNT = Extractor(
    "current_temperature_extractor", (ExtractorOutput("amount", ("result", "current_temperature"), "float"),), None
)


def _weather_bus(reply: str, conversion: list | None = None) -> list[dict[str, Any]]:
    trace = [{"tool_name": "search_weather_around_lat_lon", "arguments": {}, "result": {"current_temperature": 20.456}}]
    return bus(
        msg("AGENT", "EXECUTION_ENVIRONMENT", "call"),
        msg("EXECUTION_ENVIRONMENT", "AGENT", "{...}", trace=trace),
        msg("EXECUTION_ENVIRONMENT", "AGENT", "0", trace=conversion),
        msg("AGENT", "USER", reply),
    )


def test_tool_trace_dependant_fills_content_with_surface_forms() -> None:
    kinds = {"sender": "exact", "recipient": "exact", "content": "rouge_l"}
    target = [{"sender": "AGENT", "recipient": "USER", "content": "It is {temperature} degrees"}]
    c = constraint("SANDBOX", "tool_trace_dependant", target, kinds, 0, fill_to="content", extractor=WEATHER)
    for reply, expected in (("It is 20.5 degrees", 1.0), ("It is 20.46 degrees", 1.0), ("It is 20 degrees", 1.0)):
        traj = Trajectory(_weather_bus(reply), snapshots({0: BASE_CONTACTS}))
        assert constraint_similarity(c, traj, 5, 3) == expected, reply
    traj = Trajectory(_weather_bus("It is 31 degrees"), snapshots({0: BASE_CONTACTS}))
    assert 0.0 < constraint_similarity(c, traj, 5, 3) < 1.0
    assert constraint_similarity(c, traj, 5, 2) == 0.0  # the reference row has no trace
    broken = [{"sender": "AGENT", "recipient": "USER", "content": "It is {temp} degrees"}]
    bad = constraint("SANDBOX", "tool_trace_dependant", broken, kinds, 0, fill_to="content", extractor=WEATHER)
    traj = Trajectory(_weather_bus("It is {temp} degrees"), snapshots({0: BASE_CONTACTS}))
    assert constraint_similarity(bad, traj, 5, 3) == 0.0  # format error zeroes the constraint


def test_tool_trace_dependant_fills_golden_arguments() -> None:
    golden = [{"tool_name": "unit_conversion", "arguments": {"from_unit": "celsius"}}]
    c = constraint(
        "SANDBOX",
        "tool_trace_dependant",
        [{"sender": "EXECUTION_ENVIRONMENT", "recipient": "AGENT", "tool_trace": golden}],
        {"sender": "exact", "recipient": "exact", "tool_trace": "tool_trace"},
        0,
        fill_to="tool_trace",
        extractor=AMOUNT,
    )
    for amount, expected in ((20.456, 1.0), (21.0, 0.0)):
        call = [{"tool_name": "unit_conversion", "arguments": {"amount": amount, "from_unit": "celsius"}, "result": 1}]
        traj = Trajectory(_weather_bus("x", conversion=call), snapshots({0: BASE_CONTACTS}))
        assert constraint_similarity(c, traj, 4, 3) == expected


def test_extractors_yield_nothing_on_missing_paths_or_failed_casts() -> None:
    assert extract_candidates(WEATHER, {"result": {"current_temperature": 20.0}}) == [
        {"temperature": "20"},
        {"temperature": "20.0"},
        {"temperature": "20.00"},
        {"temperature": "20.000"},
    ]
    assert extract_candidates(WEATHER, {"result": {}}) == []
    assert extract_candidates(WEATHER, {"result": None}) == []
    assert extract_candidates(WEATHER, {"result": {"current_temperature": "hot"}}) == []
    assert extract_candidates(WEATHER, {"result": [1, 2]}) == []
    days = Extractor("days_extractor", (ExtractorOutput("days", ("result", "days"), "int"),), None)
    assert extract_candidates(days, {"result": {"days": 12.9}}) == [{"days": 12}]
    latlon = Extractor(
        "lat_lon_dict_extractor",
        (
            ExtractorOutput("latitude", ("result", "latitude"), None),
            ExtractorOutput("longitude", ("result", "longitude"), None),
        ),
        None,
    )
    assert extract_candidates(latlon, {"result": {"latitude": 1.5, "longitude": -2}}) == [
        {"latitude": 1.5, "longitude": -2}
    ]
    assert extract_candidates(latlon, {"result": {"latitude": 1.5}}) == []
    assert surface_forms(2.5) == ["2", "2.5", "2.50", "2.500"] and surface_forms(3) == ["3"]


# --------------------------------------------------------------------------- turn count and first index


def test_turn_count_skips_system_seeded_few_shot_and_user_execution_rows() -> None:
    rows = bus(
        msg("USER", "AGENT", "few-shot", visible=["USER"]),
        msg("AGENT", "EXECUTION_ENVIRONMENT", "call"),
        msg("EXECUTION_ENVIRONMENT", "AGENT", "True"),
        msg("AGENT", "USER", "done"),
        msg("USER", "EXECUTION_ENVIRONMENT", "end"),
        msg("EXECUTION_ENVIRONMENT", "USER", "None"),
    )
    assert turn_count(rows) == 3
    assert first_user_index(rows) == 1
    few_shot_first = [rows[0], rows[2], rows[1]]
    assert first_user_index(few_shot_first) == 2


# --------------------------------------------------------------------------- worked examples (EVALUATION.md §10)


def _score(record_id: str):
    rec = record(record_id)
    return evaluate(load_scenarios()[rec["scenario"]], rec["messages"], rec["db_snapshots"]), rec


def test_wifi_off_paraphrase() -> None:
    result, _ = _score("wifi_off/paraphrase")
    assert result.similarity == pytest.approx(0.8376, abs=1e-4)
    assert result.milestone_mapping[0] == (17, 1.0)
    assert result.milestone_mapping[1][0] == 18 and result.milestone_mapping[1][1] == pytest.approx(0.6751, abs=1e-4)
    assert result.per_milestone_scores[0] == 1.0


def test_wifi_off_reorder_maps_both_milestones_to_one_index() -> None:
    result, _ = _score("wifi_off/reorder")
    assert result.similarity == 0.5
    assert result.milestone_mapping[0][0] == result.milestone_mapping[1][0]
    assert result.milestone_mapping[1][1] == 0.0


def test_dropped_cellular_call() -> None:
    result, _ = _score("send_message_with_contact_content_cellular_off/drop_call")
    assert result.similarity == 0.5
    assert [round(s, 6) for s in result.per_milestone_scores.values()] == [0.0, 1.0, 0.0, 1.0]


def test_extra_writes_late_and_early() -> None:
    late, _ = _score("update_contact_relationship_with_relationship_twice_multiple_user_turn/extra_write")
    assert late.similarity == 1.0
    early, _ = _score("add_contact_with_name_and_phone_number/extra_write_early")
    assert early.similarity == 0.5 and early.per_milestone_scores[0] == 0.0


def test_minefield_call_zeroes_the_episode() -> None:
    scenarios = load_scenarios()
    hits = 0
    path = corpus_dir("toolsandbox") / "insufficient_information_scenarios.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["kind"] not in ("minefield_call", "oracle") or rec["result"]["exception"]:
            continue
        result = evaluate(scenarios[rec["scenario"]], rec["messages"], rec["db_snapshots"])
        if result.minefield_similarity > 0:
            hits += 1
            assert result.similarity == 0.0
        else:
            assert result.similarity == result.milestone_similarity
    assert hits > 0


def test_no_milestones_means_one_and_no_minefields_means_zero() -> None:
    scenarios = load_scenarios()
    empty = next(s for s in scenarios.values() if not s.milestones and s.minefields)
    rows = [{"sandbox_message_index": i, **r} for i, r in enumerate(empty.sandbox_rows())]
    rows = [{k: r[k] for k in r} for r in rows]
    world = {
        db: [{"sandbox_message_index": 0, "rows": empty.world_rows(db)}]
        for db in ("SETTING", "CONTACT", "MESSAGING", "REMINDER")
    }
    result = evaluate(empty, rows, world)
    assert result.milestone_similarity == 1.0 and result.milestone_mapping == {}
    assert result.minefield_similarity == 0.0 and result.similarity == 1.0
    assert result.turn_count == 0


def test_aborted_episodes_score_zero_with_max_turns() -> None:
    scenario = load_scenarios()["wifi_off"]
    result = aborted_result(scenario, {"type": "KeyError", "message": "'x'", "phase": "play"})
    assert (result.similarity, result.turn_count, dict(result.milestone_mapping)) == (0.0, 30, {})
    assert result.to_dict()["exception"]["type"] == "KeyError"


# --------------------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda m, d: m.__setitem__(slice(None), []), "messages: expected a non-empty list"),
        (
            lambda m, d: m[3].__setitem__("sandbox_message_index", 7),
            r"messages\[3\]\.sandbox_message_index: expected 3",
        ),
        (lambda m, d: m[2].pop("visible_to"), r"messages\[2\]: missing columns \['visible_to'\]"),
        (lambda m, d: m[2].__setitem__("tool_trace", "oops"), r"messages\[2\]\.tool_trace: expected null or a list"),
        (lambda m, d: d.pop("CONTACT"), "db_snapshots: missing database 'CONTACT'"),
        (lambda m, d: d.__setitem__("FOO", []), r"db_snapshots: unknown databases \['FOO'\]"),
        (lambda m, d: d["CONTACT"][-1]["rows"][0].pop("name"), r"db_snapshots\.CONTACT\[1\]\.rows\[0\]: columns"),
        (
            lambda m, d: d["SETTING"][0].__setitem__("sandbox_message_index", "0"),
            r"SETTING\[0\]\.sandbox_message_index",
        ),
    ],
)
def test_malformed_inputs_raise_clear_errors_and_change_nothing(mutate, expected: str) -> None:
    scenarios = load_scenarios()
    rec = record("wifi_off/oracle")
    messages, dbs = copy.deepcopy(rec["messages"]), copy.deepcopy(rec["db_snapshots"])
    mutate(messages, dbs)
    before = copy.deepcopy((messages, dbs))
    with pytest.raises(EvaluationInputError, match=expected):
        evaluate(scenarios["wifi_off"], messages, dbs)
    assert (messages, dbs) == before


def test_evaluate_does_not_modify_its_inputs() -> None:
    rec = record("add_contact_with_name_and_phone_number/extra_write_early")
    messages, dbs = copy.deepcopy(rec["messages"]), copy.deepcopy(rec["db_snapshots"])
    evaluate(load_scenarios()[rec["scenario"]], messages, dbs)
    assert messages == rec["messages"] and dbs == rec["db_snapshots"]
