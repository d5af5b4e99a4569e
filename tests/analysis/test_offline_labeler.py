import json

import pytest

from trace_gym.analysis.labelers import GoldLabeler, LabelingItem
from trace_gym.analysis.labels import LabelValue
from trace_gym.analysis.taxonomy import GENERAL_CAPABILITIES as TAXONOMY  # τ²-style golds: the general ones

WRITES = frozenset({"return_delivered_order_items", "cancel_pending_order", "modify_user_address"})
GOLD = {"actions": [
    {"name": "get_order_details", "arguments": {"order_id": "#W1"}},
    {"name": "return_delivered_order_items", "arguments": {"order_id": "#W1", "item_ids": ["i1", "i2"], "payment_method_id": "pm_card"}},
    {"name": "modify_user_address", "arguments": {"user_id": "u1", "city": "Austin"}},
], "communicate_info": ["42.5"]}


def call(i, name, args):
    return {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def result(i, content):
    return {"role": "tool", "tool_call_id": f"c{i}", "name": "x", "content": content}


def say(text):
    return {"role": "assistant", "content": text}


def user(text):
    return {"role": "user", "content": text}


def labels(messages, gold=GOLD, reward=0.0):
    run = GoldLabeler().label([LabelingItem("t", messages, reward, "1", gold, WRITES)], list(TAXONOMY), run=0, seed=0)
    assert not run.unlabeled
    return {lab.capability: lab for lab in run.labels}


def test_gold_following_trajectory_is_present_everywhere_needed():
    msgs = [user("return please"), call(0, "get_order_details", {"order_id": "#W1"}), result(0, "{}"),
            say("I will return i1, i2 to your card and move you to Austin; the refund is 42.5. Confirm?"), user("yes"),
            call(1, "return_delivered_order_items", {"order_id": "#W1", "item_ids": ["i2", "i1"], "payment_method_id": "pm_card"}),
            result(1, "{}"), say("Also confirm the address change?"), user("yes"),
            call(2, "modify_user_address", {"user_id": "u1", "city": "Austin"}), result(2, "{}")]
    got = labels(msgs, reward=1.0)
    assert {k: v.value for k, v in got.items()} == {
        "precondition-verification": LabelValue.PRESENT, "multi-step-completion": LabelValue.PRESENT,
        "tool-call-precision": LabelValue.PRESENT, "structured-selection": LabelValue.PRESENT,
        "refund-policy-compliance": LabelValue.PRESENT, "information-communication": LabelValue.PRESENT,
        "confirmation-before-write": LabelValue.PRESENT,
    }


def test_each_departure_is_lacking_with_evidence():
    msgs = [user("return please"),
            call(0, "return_delivered_order_items", {"order_id": "#W9", "item_ids": ["i1", "i2"], "payment_method_id": "gift_card_1"}),
            result(0, "{}"),
            call(1, "cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"}), result(1, "{}")]
    got = labels(msgs)
    lack = {k for k, v in got.items() if v.value is LabelValue.LACKING}
    assert lack == {"precondition-verification", "multi-step-completion", "structured-selection",
                    "refund-policy-compliance", "information-communication", "confirmation-before-write"}
    ev = got["structured-selection"].evidence[0]
    assert ev.turn == 1 and "#W9" in ev.call
    assert "cancel_pending_order" in got["precondition-verification"].evidence[0].call
    assert got["tool-call-precision"].value is LabelValue.PRESENT  # the non-id arguments were right


def test_wrong_arguments_and_failed_calls_are_imprecise():
    msgs = [user("x"), say("ok?"), user("yes"),
            call(0, "modify_user_address", {"user_id": "u1", "city": "Dallas"}), result(0, "{}")]
    assert labels(msgs)["tool-call-precision"].value is LabelValue.LACKING
    msgs = [user("x"), say("ok?"), user("yes"),
            call(0, "modify_user_address", {"user_id": "u1"}), result(0, "Error: missing city")]
    got = labels(msgs)
    assert got["tool-call-precision"].value is LabelValue.LACKING
    assert got["tool-call-precision"].evidence[0].reason == "the call failed"


def test_refusal_task():
    gold = {"actions": [{"name": "get_order_details", "arguments": {"order_id": "#W1"}}], "communicate_info": []}
    refused = labels([user("cancel"), say("Sorry, that order cannot be cancelled.")], gold)
    assert refused["precondition-verification"].value is LabelValue.PRESENT
    assert refused["multi-step-completion"].value is LabelValue.NA
    wrote = labels([user("cancel"), call(0, "cancel_pending_order", {"order_id": "#W1", "reason": "x"}), result(0, "{}")], gold)
    assert wrote["precondition-verification"].value is LabelValue.LACKING
    assert "must be refused" in wrote["precondition-verification"].evidence[0].reason


def test_deterministic_and_needs_gold():
    msgs = [user("x"), call(0, "cancel_pending_order", {"order_id": "#W1"}), result(0, "{}")]
    a = GoldLabeler().label([LabelingItem("t", msgs, 0.0, "1", GOLD, WRITES)], list(TAXONOMY), run=0, seed=0)
    b = GoldLabeler().label([LabelingItem("t", msgs, 0.0, "1", GOLD, WRITES)], list(TAXONOMY), run=0, seed=0)
    assert a.to_dict() == b.to_dict()
    with pytest.raises(ValueError, match="no gold"):
        GoldLabeler().label([LabelingItem("t", msgs, 0.0)], list(TAXONOMY), run=0, seed=0)
