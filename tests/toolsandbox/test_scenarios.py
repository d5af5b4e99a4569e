"""Loading ToolSandbox scenarios and tools into typed, immutable objects."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from collections import Counter
from pathlib import Path

import pytest

from tests.corpora import complete_copy
from trace_gym.toolsandbox.catalog import load_catalog
from trace_gym.toolsandbox.scenarios import (
    DATABASES,
    FrozenDict,
    Guardrail,
    Scenario,
    ScenarioError,
    automatic_guardrails,
    freeze,
    load_scenario,
    load_scenarios,
    parse_scenario,
    thaw,
)


@pytest.fixture(scope="module")
def data_dir(root: Path) -> Path:
    return root


@pytest.fixture(scope="module")
def scenarios(data_dir: Path) -> dict[str, Scenario]:
    return dict(load_scenarios())


@pytest.fixture(scope="module")
def raw_lines(data_dir: Path) -> list[str]:
    return (data_dir / "scenarios" / "base_scenarios.jsonl").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def manifest() -> dict:
    """The export's manifest.json (counts per source and category): recorded beside the corpora, not shipped."""
    return json.loads((complete_copy("toolsandbox") / "manifest.json").read_text(encoding="utf-8"))


def test_counts_match_the_manifest(scenarios: dict[str, Scenario], manifest: dict) -> None:
    assert len(scenarios) == manifest["scenario_count"] == 129
    assert Counter(s.source for s in scenarios.values()) == manifest["scenarios_per_source"]
    categories = Counter(c for s in scenarios.values() for c in s.categories)
    assert dict(categories) == manifest["scenarios_per_category"]
    assert sum(len(s.milestones) for s in scenarios.values()) == manifest["milestone_count"]
    assert sum(len(s.minefields) for s in scenarios.values()) == manifest["minefield_count"]
    assert sum(1 for s in scenarios.values() if not s.milestones) == 26


def test_scenario_fields_are_typed(scenarios: dict[str, Scenario]) -> None:
    s = scenarios["wifi_off"]
    assert s.max_messages == 30
    assert s.agent_tools and all(isinstance(t, str) for t in s.agent_tools)
    assert s.sandbox[s.first_user_sandbox_message_index]["sender"] == "USER"
    assert [m.index for m in s.milestones] == list(range(len(s.milestones)))
    c = s.milestones[0].constraints[0]
    assert c.database == "SETTING" and c.similarity == "snapshot" and c.reference is None
    assert c.column_similarity["wifi"].kind == "exact"
    assert s.milestone_edges == ((0, 1),)
    ttd = [c for sc in scenarios.values() for m in sc.milestones for c in m.constraints if c.extractor is not None]
    assert len(ttd) == 52
    assert {c.extractor.name for c in ttd} == {
        "search_weather_around_lat_lon_temperature_extractor",
        "result_to_timestamp0_extractor",
        "result_to_timestamp1_extractor",
        "days_extractor",
        "lat_lon_dict_extractor",
        "current_temperature_extractor",
        "result_to_temperature_extractor",
        "result_to_reminder_timestamp_lowerbound_extractor",
        "min_temperature_amount_extractor",
        "min_temperature_extractor",
    }
    assert all(c.fill_to in ("content", "tool_trace") for c in ttd)


def test_objects_are_immutable_and_picklable(scenarios: dict[str, Scenario]) -> None:
    s = scenarios["wifi_off"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.world["SETTING"][0]["wifi"] = False  # type: ignore[index]
    assert isinstance(s.world["SETTING"], tuple)
    assert pickle.loads(pickle.dumps(s)) == s
    assert hash(s.milestones[0]) == hash(pickle.loads(pickle.dumps(s.milestones[0])))


def test_world_and_sandbox_copies_are_fresh(scenarios: dict[str, Scenario]) -> None:
    s = scenarios["wifi_off"]
    rows = s.world_rows("SETTING")
    rows[0]["wifi"] = "changed"
    assert s.world_rows("SETTING")[0]["wifi"] is True
    bus = s.sandbox_rows()
    bus.pop()
    assert len(s.sandbox_rows()) == len(s.sandbox)


def test_freeze_thaw_round_trip() -> None:
    data = {"a": [1, {"b": None, "c": [True, 2.5]}], "d": "x"}
    frozen = freeze(data)
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], tuple)
    assert thaw(frozen) == data
    again = freeze(copy.deepcopy(data))
    assert frozen == again and hash(frozen) == hash(again)


def test_exported_guardrails_follow_the_rule(scenarios: dict[str, Scenario]) -> None:
    checked = 0
    for s in scenarios.values():
        for nodes, edges in ((s.milestones, s.milestone_edges), (s.minefields, s.minefield_edges)):
            for node, rule in zip(nodes, automatic_guardrails(nodes, edges), strict=True):
                assert set(node.guardrails) == set(rule), (s.name, node.index)
                checked += len(rule)
    assert checked > 100


def test_guardrail_rule_uses_the_last_node_for_reference_minus_one(raw_lines: list[str]) -> None:
    obj = json.loads(raw_lines[0])  # cellular_off: m0 SETTING snapshot, m1 SANDBOX reply
    obj = copy.deepcopy(obj)
    # make m0 reference the initial world: Ref(0) = {-1}, looked up as nodes[-1] = m1 (SANDBOX only)
    obj["milestones"][0]["constraints"][0]["reference_milestone_node_index"] = -1
    obj["milestones"][0]["constraints"][0]["similarity"] = "update"
    for m in obj["milestones"]:
        del m["guardrails"]
    s = parse_scenario(obj)
    got = {(g.database, g.reference) for g in s.milestones[0].guardrails}
    assert got == {(db, -1) for db in ("CONTACT", "MESSAGING", "REMINDER")}
    assert {(g.database, g.reference) for g in s.milestones[1].guardrails} == {
        (db, 0) for db in ("CONTACT", "MESSAGING", "REMINDER")
    }


def test_missing_guardrails_are_filled_by_the_rule(raw_lines: list[str], scenarios: dict[str, Scenario]) -> None:
    for line in raw_lines[:20]:
        obj = json.loads(line)
        for m in obj["milestones"] + obj["minefields"]:
            del m["guardrails"]
        s = parse_scenario(obj)
        ref = scenarios[s.name]
        for a, b in zip(s.milestones + s.minefields, ref.milestones + ref.minefields, strict=True):
            assert set(a.guardrails) == set(b.guardrails)
    assert all(isinstance(g, Guardrail) for g in s.milestones[-1].guardrails) if s.milestones else True


def test_load_scenario_by_name(data_dir: Path) -> None:
    assert load_scenario("wifi_off").name == "wifi_off"
    with pytest.raises(KeyError, match="wifi_of"):
        load_scenario("wifi_of")


def test_tools_catalog(data_dir: Path, scenarios: dict[str, Scenario]) -> None:
    tools = load_catalog()
    assert len(tools.specs) == 34
    assert set(tools.discovery_order) == set(tools.specs)
    spec = tools["add_contact"]
    assert spec.schema["function"]["name"] == "add_contact"
    assert spec.param("is_self").default is False and spec.param("is_self").recorded_in_trace is True
    assert "CONTACT" in spec.writes
    assert len(tools.rapidapi["scenarios_offering_rapidapi_tools"]) == 34
    for s in scenarios.values():
        assert set(s.agent_tools) <= set(tools.specs), s.name


# --------------------------------------------------------------------------- clear errors


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "base_scenarios.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _mutated(raw_lines: list[str], change) -> str:
    obj = json.loads(raw_lines[0])
    change(obj)
    return json.dumps(obj)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda o: o.pop("milestones"), r"base_scenarios.jsonl:2: scenario 'cellular_off': milestones: missing"),
        (
            lambda o: o["milestones"][1]["constraints"][0].__setitem__("database", "FOO"),
            r"milestones\[1\]\.constraints\[0\]\.database: unknown database 'FOO'",
        ),
        (
            lambda o: o["milestones"][0]["constraints"][0].__setitem__("reference_milestone_node_index", 7),
            r"milestones\[0\]\.constraints\[0\]\.reference_milestone_node_index: 7 is out of range",
        ),
        (
            lambda o: o["milestones"][0]["constraints"][0].__setitem__("reference_milestone_node_index", 1),
            r"reference_milestone_node_index: 1 is not an ancestor of node 0",
        ),
        (
            lambda o: o["milestones"][0]["constraints"][0].__setitem__("similarity", "fuzzy"),
            r"constraints\[0\]\.similarity: unknown similarity 'fuzzy'",
        ),
        (
            lambda o: o["milestones"][0]["constraints"][0]["column_similarity"]["cellular"].__setitem__("kind", "x"),
            r"column_similarity\.cellular\.kind: unknown column similarity 'x'",
        ),
        (lambda o: o.__setitem__("milestone_edges", [[0, 1], [1, 0]]), r"milestone_edges: the graph has a cycle"),
        (lambda o: o.__setitem__("milestone_edges", [[0, 5]]), r"milestone_edges\[0\]: edge \[0, 5\]"),
        (lambda o: o.__setitem__("max_messages", "thirty"), r"max_messages: expected an integer, got str"),
        (
            lambda o: o["milestones"][0]["constraints"][0].__setitem__("target_rows", [{"wifi": True}]),
            r"target_rows\[0\]: columns \['wifi'\] differ from target_columns \['cellular'\]",
        ),
        (lambda o: o["milestones"][0].__setitem__("constraints", []), r"milestones\[0\]\.constraints: empty"),
    ],
)
def test_malformed_scenarios_name_file_line_scenario_and_field(
    tmp_path: Path, raw_lines: list[str], change, expected: str
) -> None:
    path = _write(tmp_path, [raw_lines[1], _mutated(raw_lines, change)])
    with pytest.raises(ScenarioError, match=expected):
        load_scenarios(path)


def test_invalid_json_and_duplicates_and_missing_file(tmp_path: Path, raw_lines: list[str]) -> None:
    with pytest.raises(ScenarioError, match=r"base_scenarios.jsonl:1: invalid JSON"):
        load_scenarios(_write(tmp_path, ["{not json"]))
    dup = tmp_path / "dup"
    dup.mkdir()
    with pytest.raises(ScenarioError, match=r":2: scenario 'cellular_off': name: duplicate"):
        load_scenarios(_write(dup, [raw_lines[0], raw_lines[0]]))
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenarios(tmp_path / "nope.jsonl")
    with pytest.raises(ScenarioError, match="no such file"):
        load_catalog(tmp_path / "tools.json")


def test_malformed_tools_json(tmp_path: Path, data_dir: Path) -> None:
    obj = json.loads((data_dir / "tools.json").read_text(encoding="utf-8"))
    obj["tools"][0]["defaults"]["is_self"]["recorded_in_trace"] = "yes"
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    with pytest.raises(
        ScenarioError, match=r"tools.json: tools\['add_contact'\]\.defaults\.is_self\.recorded_in_trace"
    ):
        load_catalog(path)


def test_databases_constant() -> None:
    assert DATABASES == ("SANDBOX", "SETTING", "CONTACT", "MESSAGING", "REMINDER")
