"""The ToolSandbox behaviours in the taxonomy and the offline labeler, on played ToolSandbox episodes."""

from __future__ import annotations

import json

import pytest

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.analysis.aggregate import Thresholds
from trace_gym.analysis.labelers import GoldLabeler, LabelingItem
from trace_gym.analysis.labels import LabelValue
from trace_gym.analysis.pipeline import items_from_trajectories, run_analysis
from trace_gym.analysis.taxonomy import (
    GENERAL_CAPABILITIES,
    TAXONOMY,
    TELECOM_CAPABILITIES,
    TOOLSANDBOX_CAPABILITIES,
    by_name,
)
from trace_gym.core import format_tool_call
from trace_gym.policies.scripted import ScriptedPolicy
from trace_gym.rollout import TrajectoryStore, collect
from trace_gym.synthesis.synthesize import starter_specs_dir

ENV_ID = "trace/toolsandbox-v0"
TS = [c.name for c in TOOLSANDBOX_CAPABILITIES]
LOW_BATTERY = {  # scenario -> the setting it asks for (low-battery mode must be turned off first)
    "turn_on_wifi_low_battery_mode": "set_wifi_status",
    "turn_on_wifi_low_battery_mode_implicit": "set_wifi_status",
    "turn_on_cellular_low_battery_mode": "set_cellular_service_status",
    "turn_on_cellular_low_battery_mode_implicit": "set_cellular_service_status",
    "turn_on_location_low_battery_mode": "set_location_service_status",
    "turn_on_location_low_battery_mode_implicit": "set_location_service_status",
}


def _agent(prerequisite: bool, policy_id: str) -> ScriptedPolicy:
    """Plays each low-battery scenario by its opening message: with or without turning low-battery mode off first."""
    import gymnasium as gym

    env = gym.make(ENV_ID).unwrapped
    plans = {}
    for name, setter in LOW_BATTERY.items():
        opening = env._all[name].first_user_messages[0]
        steps = [format_tool_call(setter, {"on": True}), "Done, it is on now."]
        if prerequisite:
            steps.insert(0, format_tool_call("set_low_battery_mode_status", {"on": False}))
        plans[opening] = steps

    def act(messages, tools):
        opening = next(m["content"] for m in messages if m["role"] == "user")
        done = sum(1 for m in messages if m["role"] == "assistant")
        plan = plans[opening]
        return plan[done] if done < len(plan) else "Done."

    return ScriptedPolicy(act, policy_id=policy_id)


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    path = tmp_path_factory.mktemp("ts") / "trajectories.jsonl"
    store = TrajectoryStore(path)
    for prerequisite, pid in ((True, "good"), (False, "flawed")):
        for name in LOW_BATTERY:
            collect(ENV_ID, _agent(prerequisite, pid), [0], store=store, options={"scenario": name})
    return path


def test_taxonomy_names_the_toolsandbox_behaviours_and_their_starters():
    assert TS == ["state-dependency", "canonicalization", "insufficient-information", "multiple-user-turn",
                  "multiple-tool-call"]
    assert TAXONOMY == GENERAL_CAPABILITIES + TOOLSANDBOX_CAPABILITIES + TELECOM_CAPABILITIES
    ids = {p.stem for p in starter_specs_dir().glob("*.yaml")}
    for cap in TOOLSANDBOX_CAPABILITIES:
        assert cap.starter_env in ids, cap
    assert by_name("state-dependency").starter_env == "cap-ts-state-dependency"


def test_analyze_selects_what_the_flawed_agent_lacks(played, tmp_path):
    trajs = list(TrajectoryStore(played).load())
    good = [t for t in trajs if t.policy_id == "good"]
    flawed = [t for t in trajs if t.policy_id == "flawed"]
    # similarity is continuous: a success is a similarity of at least 0.5 here
    assert all(t.reward > 0.8 for t in good) and all(t.reward < 0.5 for t in flawed)
    items = items_from_trajectories(trajs)
    assert all("STATE_DEPENDENCY" in i.gold["categories"] for i in items)  # asked of the task source
    result, doc = run_analysis(played, tmp_path / "analysis", GoldLabeler(), list(TAXONOMY), items=items,
                               thresholds=Thresholds(k=1, success=0.5))
    assert "state-dependency" in result.selected
    assert not set(result.selected) & {"insufficient-information", "multiple-user-turn", "canonicalization"}
    labels = json.loads((tmp_path / "analysis" / "labels" / "run_00.json").read_text())["run"]["labels"]
    flawed_ids = {i.trajectory_id for i, t in zip(items, trajs, strict=True) if t.policy_id == "flawed"}
    lacking = [lab for lab in labels if lab["capability"] == "state-dependency" and lab["trajectory_id"] in flawed_ids]
    assert lacking and all(lab["value"] == "LACKING" for lab in lacking)
    assert "prerequisite" in lacking[0]["evidence"][0]["reason"] and "_status" in lacking[0]["evidence"][0]["call"]


def _call(i, name, args):
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _result(i, content):
    return {"role": "tool", "tool_call_id": f"c{i}", "name": "x", "content": content}


def _label(messages, gold, writes=frozenset({"add_reminder", "remove_contact", "set_wifi_status"})):
    run = GoldLabeler().label([LabelingItem("t", messages, 0.0, "s", gold, writes)], list(TAXONOMY), run=0, seed=0)
    assert not run.unlabeled
    return {lab.capability: lab.value for lab in run.labels}


def test_rules_for_each_behaviour():
    user = {"role": "user", "content": "Remind me to buy milk"}
    ask = {"role": "assistant", "content": "When should I remind you?"}
    answer = {"role": "user", "content": "tomorrow 5PM"}
    gold = {"actions": [{"name": "get_current_timestamp", "arguments": {}},
                        {"name": "add_reminder", "arguments": {"content": "Buy milk", "reminder_timestamp": 1749142800.0}}],
            "communicate_info": [], "categories": ["CANONICALIZATION", "MULTIPLE_TOOL_CALL", "MULTIPLE_USER_TURN"]}
    good = [user, ask, answer, _call(0, "get_current_timestamp", {}), _result(0, "1749027600.0"),
            _call(1, "add_reminder", {"content": "Buy milk", "reminder_timestamp": 1749142800}), _result(1, "r1"),
            {"role": "assistant", "content": "Done."}]
    got = _label(good, gold)
    assert {k: got[k] for k in TS} == {"state-dependency": LabelValue.NA, "canonicalization": LabelValue.PRESENT,
                                       "insufficient-information": LabelValue.NA,
                                       "multiple-user-turn": LabelValue.PRESENT, "multiple-tool-call": LabelValue.PRESENT}
    # an invented timestamp, a skipped look-up, no question to the user
    bad = [user, _call(1, "add_reminder", {"content": "Buy milk", "reminder_timestamp": 1749000000}), _result(1, "r1"),
           {"role": "assistant", "content": "Done."}]
    got = _label(bad, gold)
    assert {k: got[k] for k in ("canonicalization", "multiple-user-turn", "multiple-tool-call")} == {
        "canonicalization": LabelValue.LACKING, "multiple-user-turn": LabelValue.LACKING,
        "multiple-tool-call": LabelValue.LACKING}
    # insufficient information: saying so without writing is right; writing or claiming success is not
    gold = {"actions": [], "communicate_info": [], "categories": ["INSUFFICIENT_INFORMATION"]}
    refuse = [user, {"role": "assistant", "content": "Sorry, I can't remove contacts with the tools I have."}]
    assert _label(refuse, gold)["insufficient-information"] is LabelValue.PRESENT
    wrote = [user, _call(0, "remove_contact", {"person_id": "p"}), _result(0, "None"),
             {"role": "assistant", "content": "Removed."}]
    assert _label(wrote, gold)["insufficient-information"] is LabelValue.LACKING
    # state dependency: a failed call never retried after fixing the setting
    gold = {"actions": [], "communicate_info": [], "categories": ["STATE_DEPENDENCY"]}
    failed = [user, _call(0, "set_wifi_status", {"on": True}),
              _result(0, "PermissionError: Wifi cannot be turned on in low battery mode"),
              {"role": "assistant", "content": "Done."}]
    assert _label(failed, gold)["state-dependency"] is LabelValue.LACKING
    fixed = failed[:3] + [_call(1, "set_low_battery_mode_status", {"on": False}), _result(1, "None"),
                          _call(2, "set_wifi_status", {"on": True}), _result(2, "None")]
    assert _label(fixed, gold)["state-dependency"] is LabelValue.PRESENT


def test_toolsandbox_behaviours_are_na_on_other_benchmarks():
    gold = {"actions": [{"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}}], "communicate_info": []}
    msgs = [{"role": "user", "content": "cancel"}, _call(0, "cancel_pending_order", {"order_id": "#W1"}), _result(0, "{}")]
    got = _label(msgs, gold, frozenset({"cancel_pending_order"}))
    assert all(got[k] is LabelValue.NA for k in TS)
