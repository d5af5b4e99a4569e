"""The telecom (dual-control) capabilities in the taxonomy and the offline labeler."""

from __future__ import annotations

import json

from trace_gym.analysis.labelers import GoldLabeler, LabelingItem
from trace_gym.analysis.labels import LabelValue
from trace_gym.analysis.taxonomy import TAXONOMY, TELECOM_CAPABILITIES, by_name
from trace_gym.synthesis.synthesize import starter_specs_dir

WRITES = frozenset({"enable_roaming", "refuel_data", "send_payment_request", "suspend_line"})
NA, PRESENT, LACKING = LabelValue.NA, LabelValue.PRESENT, LabelValue.LACKING


def _call(i, name, args):
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def _result(i, content):
    return {"role": "tool", "tool_call_id": f"c{i}", "name": "x", "content": content}


def _say(text):
    return {"role": "assistant", "content": text}


def _label(messages, gold):
    run = GoldLabeler().label([LabelingItem("t", messages, 0.0, "s", gold, WRITES)], list(TAXONOMY), run=0, seed=0)
    assert not run.unlabeled
    return {lab.capability: lab.value for lab in run.labels}


def test_taxonomy_names_the_telecom_capabilities_and_their_starters():
    assert [c.name for c in TELECOM_CAPABILITIES] == ["device-troubleshooting", "account-device-coordination",
                                                      "billing-policy-compliance"]
    assert TAXONOMY[-len(TELECOM_CAPABILITIES):] == TELECOM_CAPABILITIES
    ids = {p.stem for p in starter_specs_dir().glob("*.yaml")}
    for cap in TELECOM_CAPABILITIES:
        assert cap.starter_env in ids and cap.starter_env.startswith("cap-telecom-")
    assert by_name("account-device-coordination").starter_env == "cap-telecom-roaming"


def test_device_actions_asked_for_or_not():
    gold = {"actions": [], "user_actions": [{"name": "toggle_airplane_mode", "arguments": {}}]}
    user = {"role": "user", "content": "No data."}
    good = _label([user, _say("Please toggle airplane mode off."), {"role": "user", "content": "Done"}], gold)
    bad = _label([user, _say("Please restart your phone.")], gold)
    assert good["device-troubleshooting"] == PRESENT and bad["device-troubleshooting"] == LACKING
    assert good["account-device-coordination"] == NA  # no account change needed
    assert _label([user, _say("Hi")], {"actions": []})["device-troubleshooting"] == NA


def test_both_sides_are_needed_for_coordination():
    gold = {"actions": [{"name": "enable_roaming", "arguments": {"customer_id": "C1", "line_id": "L1"}}],
            "user_actions": [{"name": "toggle_roaming", "arguments": {}}]}
    user = {"role": "user", "content": "I'm abroad, no data."}
    enable = [_call(1, "enable_roaming", {"customer_id": "C1", "line_id": "L1"}), _result(1, "Roaming enabled successfully")]
    both = _label([user, *enable, _say("Now please toggle roaming on your phone.")], gold)
    account_only = _label([user, *enable, _say("All set.")], gold)
    device_only = _label([user, _say("Please toggle roaming on your phone.")], gold)
    assert both["account-device-coordination"] == PRESENT
    assert account_only["account-device-coordination"] == LACKING and device_only["account-device-coordination"] == LACKING


def test_billing_writes_follow_the_gold():
    gold = {"actions": [{"name": "refuel_data", "arguments": {"customer_id": "C1", "line_id": "L1", "gb_amount": 2.0}}]}
    user = {"role": "user", "content": "Add data."}
    right = _label([user, _call(1, "refuel_data", {"customer_id": "C1", "line_id": "L1", "gb_amount": 2}), _result(1, "{}")], gold)
    wrong = _label([user, _call(1, "refuel_data", {"customer_id": "C1", "line_id": "L1", "gb_amount": 3.0}), _result(1, "{}")], gold)
    refused_task = _label([user, _call(1, "send_payment_request", {"customer_id": "C1", "bill_id": "B1"}), _result(1, "ok")],
                          {"actions": []})
    assert right["billing-policy-compliance"] == PRESENT and wrong["billing-policy-compliance"] == LACKING
    assert refused_task["billing-policy-compliance"] == LACKING
    assert _label([user, _say("Hello")], {"actions": []})["billing-policy-compliance"] == NA
