"""Domain file loading (clear errors for corrupted files) and the cached hash serialisation."""

from __future__ import annotations

import json
import random

import pytest

from trace_gym.tau2.data import TaskFileError, load_policy, load_splits, load_tasks, merge_update
from trace_gym.tau2.db import BaseDb, DbState
from trace_gym.tau2.hashing import canonical_sha256, tau2_hash

GOOD_TASK = {
    "id": "t1",
    "user_scenario": {"instructions": "do it"},
    "evaluation_criteria": {"actions": [{"action_id": "a", "name": "get_users", "arguments": {}}], "reward_basis": ["DB"]},
}


def _write_domain(tmp_path, tasks) -> None:
    folder = tmp_path / "tau2" / "domains" / "mock"
    folder.mkdir(parents=True)
    (folder / "tasks.json").write_text(json.dumps(tasks))
    (folder / "split_tasks.json").write_text(json.dumps({"base": [t.get("id") for t in tasks if isinstance(t, dict)]}))
    (folder / "policy.md").write_text("policy")


def test_good_tasks_load_and_split(tmp_path):
    _write_domain(tmp_path, [GOOD_TASK])
    assert [t["id"] for t in load_tasks("mock", tmp_path, split="base")] == ["t1"]
    assert load_splits("mock", tmp_path) == {"base": ["t1"]}
    with pytest.raises(ValueError, match="Invalid task split name"):
        load_tasks("mock", tmp_path, split="nope")
    assert load_policy("mock", data_dir=tmp_path) == "policy"
    with pytest.raises(ValueError, match="does not support solo mode"):
        load_policy("mock", solo_mode=True, data_dir=tmp_path)


@pytest.mark.parametrize(
    "mutate,field",
    [
        (lambda t: t.pop("id"), "id"),
        (lambda t: t["evaluation_criteria"]["actions"][0].update(name=3), "evaluation_criteria.actions[0].name"),
        (lambda t: t["evaluation_criteria"].update(reward_basis=["DB", "MAGIC"]), "evaluation_criteria.reward_basis"),
        (lambda t: t.update(initial_state={"initialization_actions": [{"env_type": "x", "func_name": "f"}]}),
         "initial_state.initialization_actions[0].env_type"),
        (lambda t: t.update(initial_state={"message_history": [{"role": "robot"}]}), "initial_state.message_history[0].role"),
        (lambda t: t.update(user_scenario=None), "user_scenario"),
    ],
)
def test_corrupted_task_errors_name_file_task_and_field(tmp_path, mutate, field):
    task = json.loads(json.dumps(GOOD_TASK))
    mutate(task)
    _write_domain(tmp_path, [task])
    with pytest.raises(TaskFileError) as info:
        load_tasks("mock", tmp_path)
    msg = str(info.value)
    assert "tasks.json" in msg and field in msg


def test_invalid_json_names_the_file(tmp_path):
    _write_domain(tmp_path, [])
    (tmp_path / "tau2" / "domains" / "mock" / "tasks.json").write_text("[{")
    with pytest.raises(TaskFileError, match="tasks.json: invalid JSON"):
        load_tasks("mock", tmp_path)


def test_merge_update_is_recursive_for_dicts_only():
    base = {"a": {"x": 1, "y": [1]}, "b": 1}
    assert merge_update(base, {"a": {"y": [2], "z": 3}, "c": 4}) == {"a": {"x": 1, "y": [2], "z": 3}, "b": 1, "c": 4}


def test_incremental_hash_equals_full_serialisation_under_random_edits():
    rng = random.Random(7)
    base_data = {
        "users": {f"u{i}": {"name": f"n{i}", "n": i, "f": i / 3, "tags": ["a", i]} for i in range(40)},
        "lines": [{"id": i, "on": bool(i % 2), "s": "é" * (i % 3)} for i in range(15)],
        "meta": {"version": 1.0},
    }
    state = DbState(BaseDb(json.loads(json.dumps(base_data)), "TestDB"))
    for step in range(300):
        op = rng.randrange(6)
        state.begin()
        if op == 0 and state.users:
            state.own("users", rng.choice(sorted(state.users)))["n"] = rng.random()
        elif op == 1:
            state.put("users", f"new{rng.randrange(10)}", {"name": "x"})
        elif op == 2 and state.users:
            state.remove("users", rng.choice(sorted(state.users)))
        elif op == 3:
            state.own("lines", rng.randrange(len(state.lines)))["on"] = rng.random() < 0.5
        elif op == 4:
            state.put("lines", None, {"id": 100 + step})
        else:
            state.own("meta")["version"] = step
        if rng.random() < 0.3:
            state.rollback()
        else:
            state.commit()
        if step % 10 == 0:
            plain = state.to_dict()
            assert state.hash("tau2") == tau2_hash(plain)
            assert state.hash("canonical") == canonical_sha256(plain)
    assert base_data == json.loads(json.dumps(state._base.data))  # the base never changes


def test_rollback_restores_exact_state():
    state = DbState(BaseDb({"users": {"a": {"n": 1}}, "lines": [{"x": 1}]}, "TestDB"))
    before = (state.hash("tau2"), state.version)
    state.begin()
    state.own("users", "a")["n"] = 2
    state.put("users", "b", {"n": 3})
    state.put("lines", None, {"x": 2})
    state.rollback()
    assert state.to_dict() == {"users": {"a": {"n": 1}}, "lines": [{"x": 1}]}
    assert (state.hash("tau2"), state.version) == before
    assert state.is_shared("users", "a")


def test_same_content_agrees_with_hashes():
    rng = random.Random(3)
    base = BaseDb({"users": {f"u{i}": {"n": i} for i in range(20)}, "lines": [{"x": i} for i in range(5)]}, "TestDB")
    for _ in range(200):
        a, b = DbState(base), DbState(base)
        for state in (a, b):
            for _ in range(rng.randrange(3)):
                op = rng.randrange(4)
                present = [k for k in ("u0", "u1", "u2") if k in state.users]
                if op == 0 and present:
                    state.own("users", rng.choice(present))["n"] = rng.choice([0, 1, 1.0, True, "1"])
                elif op == 1:
                    state.put("users", f"v{rng.randrange(2)}", {"n": rng.randrange(2)})
                elif op == 2 and present:
                    state.remove("users", rng.choice(present))
                else:
                    state.own("lines", rng.randrange(2))["x"] = rng.randrange(2)
        assert a.same_content(b) == (a.hash("tau2") == b.hash("tau2")) == b.same_content(a)
