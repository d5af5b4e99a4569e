"""Reward components on hand-built episode logs: values, partial credit, gates."""

from __future__ import annotations

import pytest

from trace_gym.capabilities.rewards import EpisodeLog, evaluate_rewards

DB0 = {"orders": {"#W1": {"status": "delivered"}, "#W2": {"status": "pending"}}, "users": {"u": {"zip": "1"}}}


def _log(events, final=None):
    import copy

    return EpisodeLog(events=events, initial_db=copy.deepcopy(DB0), final_db=final if final is not None else copy.deepcopy(DB0))


def call(name, error=False, **args):
    return {"kind": "call", "name": name, "args": args, "error": error}


def say(text):
    return {"kind": "agent", "text": text}


def user(text):
    return {"kind": "user", "text": text}


def test_required_call_exact_and_partial():
    events = [call("modify", order_id="#W1", zip="99", city="X")]
    exact = {"type": "required_call", "tool": "modify", "args": {"order_id": "#W1", "zip": "12", "city": "X"}}
    r, info = evaluate_rewards([exact], _log(events))
    assert r == 0.0
    r, info = evaluate_rewards([{**exact, "partial": True}], _log(events))
    assert r == pytest.approx(2 / 3)
    # failed calls do not count
    r, _ = evaluate_rewards([{"type": "required_call", "tool": "modify"}], _log([call("modify", error=True)]))
    assert r == 0.0


def test_forbidden_call_and_gates_multiply():
    rewards = [
        {"name": "asked", "type": "communicated", "any_of": ["order #w1"]},
        {"name": "no_cancel", "type": "forbidden_call", "tool": "cancel", "gate": True},
    ]
    r, info = evaluate_rewards(rewards, _log([say("About order #W1..."), call("cancel", order_id="#W2")]))
    assert r == 0.0 and info["components"] == {"asked": 1.0, "no_cancel": 0.0} and info["gates"] == ["no_cancel"]
    r, _ = evaluate_rewards(rewards, _log([say("About order #W1..."), call("cancel", error=True)]))
    assert r == 1.0
    r, _ = evaluate_rewards([rewards[0], {**rewards[1], "count_errors": True}], _log([say("order #W1"), call("cancel", error=True)]))
    assert r == 0.0


def test_db_no_mutation_and_no_collateral():
    final = {"orders": {"#W1": {"status": "return requested"}, "#W2": {"status": "pending"}}, "users": {"u": {"zip": "1"}}}
    log = _log([], final)
    rewards = [
        {"name": "state", "type": "db", "path": ["orders", "#W1", "status"], "match": "return requested"},
        {"name": "unchanged", "type": "no_mutation"},
        {"name": "only_w1", "type": "no_collateral", "allow": [["orders", "#W1"]]},
        {"name": "only_w2", "type": "no_collateral", "allow": [["orders", "#W2"]]},
        {"name": "missing", "type": "db", "path": "orders.#W9.status", "match": "x"},
    ]
    _, info = evaluate_rewards(rewards, log)
    assert info["components"] == {"state": 1.0, "unchanged": 0.0, "only_w1": 1.0, "only_w2": 0.0, "missing": 0.0}


def test_refusal_needs_words_and_no_change():
    rewards = [{"name": "refused", "type": "refusal"}]
    assert evaluate_rewards(rewards, _log([say("Sorry, that order cannot be returned.")]))[0] == 1.0
    assert evaluate_rewards(rewards, _log([say("Sure!")]))[0] == 0.0
    changed = {"orders": {"#W1": {"status": "x"}, "#W2": {"status": "pending"}}, "users": {"u": {"zip": "1"}}}
    assert evaluate_rewards(rewards, _log([say("Sorry, I cannot.")], changed))[0] == 0.0


def test_communicated_normalises_numbers_and_all_of_is_partial():
    r, _ = evaluate_rewards([{"type": "communicated", "all_of": ["1380.79", "gift card", "tracking"]}],
                            _log([say("You get $1,380.79 back on your Gift  Card.")]))
    assert r == pytest.approx(2 / 3)


def test_ordering_first_occurrences_and_if_missing():
    rule = {"type": "ordering", "first": {"user_says_any": ["yes"]}, "then": {"call": "cancel", "args": {"order_id": "#W2"}}}
    ok = [say("Confirm?"), user("Yes please"), call("cancel", order_id="#W2")]
    bad = [call("cancel", order_id="#W2"), user("yes")]
    assert evaluate_rewards([rule], _log(ok))[0] == 1.0
    assert evaluate_rewards([rule], _log(bad))[0] == 0.0
    assert evaluate_rewards([rule], _log([user("yes")]))[0] == 0.0
    assert evaluate_rewards([{**rule, "if_missing": 1.0}], _log([user("yes")]))[0] == 1.0


def test_weights_average_non_gate_components():
    rewards = [{"name": "a", "type": "no_mutation", "weight": 3}, {"name": "b", "type": "communicated", "any_of": ["zzz"]}]
    r, info = evaluate_rewards(rewards, _log([say("hi")]))
    assert r == pytest.approx(0.75) and info["weights"] == {"a": 3.0, "b": 1.0} and info["reward"] == r
