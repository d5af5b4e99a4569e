"""The task-source seam (``trace_gym.core.tasks``) over every registered env, plus each family's specifics."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.core.tasks import (
    Gold,
    NoTaskSourceError,
    TaskSource,
    UnknownSplitError,
    UnknownTaskError,
    find_task_source,
    task_source,
    task_source_for,
)

TRACE_IDS = sorted(i for i in gym.registry if i.startswith("trace/"))
FAMILIES = {"tau2": "trace/tau2-mock-v0", "toolsandbox": "trace/toolsandbox-v0", "capability": "trace/cap-refund-policy-v0"}


def _source(env_id: str) -> TaskSource:
    src = task_source_for(env_id)
    src.splits()  # data is read lazily: make sure it is here
    return src


def _opening(info: dict) -> list:
    return [(m["role"], m.get("content")) for m in info["messages"]]


def test_every_family_is_registered():
    assert set(FAMILIES.values()) <= set(TRACE_IDS)


@pytest.mark.parametrize("env_id", TRACE_IDS)
def test_the_seam_holds_its_contract_on_every_registered_env(env_id):
    src = _source(env_id)
    assert isinstance(src, TaskSource)
    splits = src.splits()
    assert splits and all(isinstance(s, str) for s in splits) and src.default_split() in splits
    ids = src.task_ids()
    assert ids and ids == src.task_ids(src.default_split()) and ids == task_source_for(env_id).task_ids()
    assert all(isinstance(t, str) for t in ids) and len(set(ids)) == len(ids)
    with pytest.raises(UnknownSplitError, match=splits[0]):
        src.task_ids("no-such-split")
    assert isinstance(src.option_key, str) and (src.domain is None or isinstance(src.domain, str))
    assert src.instruction is None or isinstance(src.instruction, str)

    task = ids[0]
    opts = src.reset_options(task)
    assert opts[src.option_key] is not None and src.reset_options(task) == opts and opts is not src.reset_options(task)
    assert isinstance(src.group(task), str) and src.group(task)
    gold = src.gold(task)
    if gold is not None:
        assert isinstance(gold, Gold) and isinstance(gold.write_tools, frozenset)
        assert all(isinstance(a["name"], str) and isinstance(a["arguments"], dict) for a in gold.actions)
        assert all(w in gold.actions and w["name"] in gold.write_tools for w in gold.writes)

    # the options play that task whatever the seed
    env = gym.make(env_id)
    try:
        _, a = env.reset(seed=0, options=dict(opts))
        _, b = env.reset(seed=7, options=dict(opts))
    finally:
        env.close()
    assert src.task_id_of(a, opts) == src.task_id_of(b, opts) == task
    assert _opening(a) == _opening(b)
    if src.instruction:
        assert a["messages"][0]["content"].startswith(src.instruction)

    for bad in ("no such task", "-1", ""):
        for ask in (src.reset_options, src.gold, src.group):
            with pytest.raises(UnknownTaskError):
                ask(bad)


def test_an_env_without_a_task_source_says_so():
    env = gym.make("trace-test/counter-v0")
    assert find_task_source(env) is None
    with pytest.raises(NoTaskSourceError, match="trace-test/counter-v0 has no task source"):
        task_source(env)
    with pytest.raises(NoTaskSourceError):
        task_source_for("trace-test/counter-v0")


# ----------------------------------------------------------------------------- τ²-bench
def test_tau2_splits_default_gold_and_groups(tau2_data):
    from trace_gym.eval.harness import default_tasks
    from trace_gym.tau2.data import load_splits, load_tasks

    mock = task_source_for("trace/tau2-mock-v0")
    assert mock.splits() == ("base",) and mock.default_split() == "base"  # mock has no test split
    assert default_tasks("trace/tau2-mock-v0") == load_splits("mock")["base"]
    retail = task_source_for("trace/tau2-retail-v0")
    assert retail.default_split() == "test" and set(retail.splits()) == {"train", "test", "base"}
    assert retail.task_ids("train") == load_splits("retail")["train"]
    assert retail.domain == "retail" and retail.group("5") == "retail" and retail.option_key == "task_id"
    task = next(t for t in load_tasks("retail") if t["id"] == "5")
    gold = retail.gold("5")
    crit = task["evaluation_criteria"]
    assert [a["name"] for a in gold.actions] == [a["name"] for a in crit["actions"] if a.get("requestor", "assistant") == "assistant"]
    assert gold.details == crit and gold.writes and all(w["name"] in gold.write_tools for w in gold.writes)
    assert "cancel_pending_order" in gold.write_tools and "get_user_details" not in gold.write_tools
    assert retail.instruction and "<policy>" not in retail.instruction


def test_tau2_solo_mode_lists_only_ticket_tasks(tau2_data):
    from trace_gym.tau2.data import load_tasks

    src = task_source_for("trace/tau2-mock-v0", {"solo_mode": True})
    with_ticket = {t["id"] for t in load_tasks("mock") if t.get("ticket")}
    assert set(src.task_ids()) == with_ticket
    without = next(t["id"] for t in load_tasks("mock") if not t.get("ticket"))
    with pytest.raises(UnknownTaskError):
        src.reset_options(without)
    assert src.instruction != task_source_for("trace/tau2-mock-v0").instruction


@given(st.text(max_size=20))
def test_tau2_unknown_ids_are_task_errors(tau2_data, text):
    src = task_source_for("trace/tau2-mock-v0")
    if text in src.task_ids():
        return
    for ask in (src.reset_options, src.gold, src.group):
        with pytest.raises(UnknownTaskError):
            ask(text)


# ----------------------------------------------------------------------------- ToolSandbox
def test_toolsandbox_scenarios_categories_and_milestone_gold():
    from trace_gym.toolsandbox.tasks import REPORT_CATEGORIES

    src = _source("trace/toolsandbox-v0")
    ids = src.task_ids("base")
    assert len(ids) == 129 and src.option_key == "scenario" and src.domain == "toolsandbox"
    assert {src.group(t) for t in ids} <= {c.lower() for c in REPORT_CATEGORIES}
    gold = src.gold("find_days_till_holiday_alt")
    names = [a["name"] for a in gold.actions]
    assert names[:3] == ["get_current_timestamp", "search_holiday", "search_holiday"]
    assert gold.actions[2]["arguments"] == {"holiday_name": "Christmas Day", "year": 2025}
    assert "set_cellular_service_status" in gold.write_tools and "search_holiday" not in gold.write_tools
    pool = task_source_for("trace/toolsandbox-v0", {"scenarios": ["wifi_off", "cellular_off"]})
    assert pool.task_ids() == ["wifi_off", "cellular_off"]


# ----------------------------------------------------------------------------- capability envs
def test_capability_tasks_are_seeds_and_gold_is_the_reference_solution():
    from trace_gym.core.toolcalls import parse_action

    env_id = FAMILIES["capability"]
    src = _source(env_id)
    assert src.splits() == ("train", "test") and src.default_split() == "test"
    assert set(src.task_ids("train")).isdisjoint(src.task_ids("test"))
    env = gym.make(env_id)
    try:
        for task in ("3", "11"):
            obs, info = env.reset(seed=int(task))
            ref = [parse_action(a).calls for a in env.unwrapped.reference_actions()]
            calls = [{"name": n, "arguments": args} for c in ref for n, args in c]
            gold = src.gold(task)
            assert [dict(a) for a in gold.actions] == calls
            assert src.group(task) == info["case"] and src.task_id_of(info) == task
            obs2, info2 = env.reset(seed=99, options=src.reset_options(task))  # another seed, same scenario
            assert obs2 == obs and info2["case"] == info["case"]
            assert src.task_id_of(info2, src.reset_options(task)) == task
    finally:
        env.close()
    assert src.domain == "retail" and gold.write_tools and "get_user_details" not in gold.write_tools


@given(st.one_of(st.integers(min_value=0, max_value=10**12).map(str),
                 st.text(max_size=12).filter(lambda s: not (s.strip().isascii() and s.strip().isdigit()))))
def test_capability_task_ids_are_non_negative_integers(text):
    from trace_gym.capabilities.tasks import OPTION, scenario_seed

    src = task_source_for(FAMILIES["capability"])
    if text.isdigit() and text.isascii():
        assert src.reset_options(text) == {OPTION: int(text)} == {OPTION: scenario_seed(text)}
    else:
        with pytest.raises(UnknownTaskError):
            src.reset_options(text)


@pytest.mark.parametrize("env_id", ["trace/tau2-retail-v0", "trace/tau2-airline-v0", "trace/tau2-telecom-v0", "trace/toolsandbox-v0"])
def test_any_listed_task_plays_with_its_options(env_id):
    src = _source(env_id)
    every = sorted({t for split in src.splits() for t in src.task_ids(split)})
    env = gym.make(env_id)

    @given(st.sampled_from(every), st.integers(0, 2**31 - 1))
    def check(task, seed):
        opts = src.reset_options(task)
        _, info = env.reset(seed=seed, options=opts)
        assert src.task_id_of(info) == task == src.task_id_of(info, opts)
        assert src.group(task)

    try:
        check()
    finally:
        env.close()


def test_a_partial_task_source_is_named_not_ignored():
    class Half:
        option_key = "task_id"

        def task_ids(self, split=None):
            return ["a"]

    class Env:
        unwrapped = None
        task_source = Half()

    env = Env()
    env.unwrapped = env
    with pytest.raises(TypeError, match="lacks domain, instruction, splits"):
        find_task_source(env)
