"""The demo's flawed scripted agent: faithful scripts pass, each departure fails (or not) for its known reason."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def retail():
    from trace_gym.demo.flawed import demo_tasks, task_database, write_tools

    env_id = "trace/tau2-retail-v0"
    tasks = demo_tasks(env_id, 3)
    db = task_database(env_id)
    writes = write_tools(env_id, str(tasks[0]["id"]))
    return tasks, db, writes


def _play(task, variant, db, writes):
    from trace_gym.demo.flawed import flawed_policy, flawed_script
    from trace_gym.rollout import collect

    pol = flawed_policy(flawed_script(task, variant, writes, db), variant)
    [t] = collect("trace/tau2-retail-v0", pol, [0], options={"task_id": str(task["id"])}, env_kwargs={"unjudged_nl": "ignore"})
    return t


def _labels(traj):
    from trace_gym.analysis.labelers import GoldLabeler
    from trace_gym.analysis.pipeline import items_from_trajectories
    from trace_gym.analysis.taxonomy import TAXONOMY

    run = GoldLabeler().label(items_from_trajectories([traj]), list(TAXONOMY))
    return {lab.capability: lab.value.value for lab in run.labels}


def test_demo_tasks_allow_every_variant(retail):
    from trace_gym.demo.flawed import VARIANTS, variants_for

    tasks, db, writes = retail
    assert len(tasks) == 3
    for t in tasks:
        assert variants_for(t, writes, db) == list(VARIANTS)


def test_variants_pass_or_fail_for_their_reason(retail):
    tasks, db, writes = retail
    task = tasks[0]
    faithful = _play(task, "faithful", db, writes)
    assert faithful.reward == 1.0 and faithful.termination_reason == "user_stop"
    assert faithful.policy_id == "flawed-scripted:faithful"
    lab = _labels(faithful)
    assert "LACKING" not in lab.values()

    wrong = _play(task, "wrong-payment", db, writes)
    assert wrong.reward == 0.0
    assert _labels(wrong)["refund-policy-compliance"] == "LACKING"

    skip = _play(task, "skips-write", db, writes)
    assert skip.reward == 0.0
    written = {c["function"]["name"] for m in skip.transcript if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    assert not (written & writes) or len(written & writes) < len({a["name"] for a in task["evaluation_criteria"]["actions"]} & writes)

    hasty = _play(task, "no-confirmation", db, writes)
    assert hasty.reward == 1.0  # the DB ends right: a departure the reward does not see
    assert _labels(hasty)["confirmation-before-write"] == "LACKING"


def test_bad_variant_and_impossible_departure_are_errors(retail):
    from trace_gym.demo.flawed import flawed_script

    tasks, db, writes = retail
    with pytest.raises(ValueError, match="unknown variant"):
        flawed_script(tasks[0], "sloppy", writes, db)
    with pytest.raises(ValueError, match="no other payment method"):
        flawed_script(tasks[0], "wrong-payment", writes, {"orders": {}, "users": {}})
