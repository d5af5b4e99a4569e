"""CapabilityEnv: tools identical to the target, hints, knobs, user side, unsolvable seeds, backends."""

from __future__ import annotations

import copy
import json

import gymnasium as gym
import pytest
import yaml

import trace_gym  # noqa: F401
from trace_gym.capabilities import CapabilityEnv, UnsolvableScenarioError
from trace_gym.capabilities.env import _get_spec
from trace_gym.capabilities.specfile import read_spec_document
from trace_gym.core.toolcalls import format_tool_call

from .conftest import ENVS_DIR, SPEC_FILES

REFUND = ENVS_DIR / "cap-refund-policy.yaml"


@pytest.fixture
def refund_doc():
    return yaml.safe_load(REFUND.read_text())


def _play(env, actions, seed, **opts):
    env.reset(seed=seed, options=opts or None)
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        if term or trunc:
            return r, info
    raise AssertionError("episode did not end")


def test_every_spec_is_registered(tau2_data):
    ids = {i for i, _ in trace_gym.list_envs()}
    for p in SPEC_FILES:
        assert f"trace/{p.stem}-v0" in ids


# τ²-bench specs here; ToolSandbox specs: tests/capabilities/test_toolsandbox_specs.py
@pytest.mark.parametrize("path", [p for p in SPEC_FILES if read_spec_document(p).get("domain") in ("retail", "airline")],
                         ids=lambda p: p.stem)
def test_exposed_tools_have_the_targets_exact_schemas(tau2_data, path):
    env = CapabilityEnv(path)
    _, info = env.reset(seed=0)
    recorded = json.loads((tau2_data / "tau2" / "domains" / env.cap_spec.domain / "tools.json").read_text())
    by_name = {r["name"]: r["openai_schema"] for r in recorded}
    assert [t["function"]["name"] for t in info["tools"]] == env.cap_spec.tool_names
    for schema in info["tools"]:
        assert schema == by_name[schema["function"]["name"]]
    policy = (tau2_data / "tau2" / "domains" / env.cap_spec.domain / "policy.md").read_text()
    assert info["messages"][0]["content"].startswith(policy)
    assert not any(k in info for k in ("reference", "rewards", "slots"))  # never a gold answer


def test_hint_forced_and_prompt_without_hint(tau2_data):
    env = CapabilityEnv(REFUND)
    _, with_hint = env.reset(seed=4, options={"hint": True})
    _, without = env.reset(seed=4, options={"hint": False})
    assert with_hint["hint_shown"] is True and without["hint_shown"] is False
    assert "## Hint" in with_hint["messages"][0]["content"]
    assert "## Hint" not in without["messages"][0]["content"]
    assert with_hint["prompt_messages_without_hint"] == without["prompt_messages_without_hint"] == without["messages"][:2]
    assert with_hint["messages"][1:] == without["messages"][1:]


def test_hint_fraction_extremes(tau2_data):
    never = CapabilityEnv(REFUND, hint_fraction=0.0)
    always = CapabilityEnv(REFUND, hint_fraction=1.0)
    assert not any(never.reset(seed=s)[1]["hint_shown"] for s in range(10))
    assert all(always.reset(seed=s)[1]["hint_shown"] for s in range(10))
    with pytest.raises(ValueError, match="hint_fraction"):
        CapabilityEnv(REFUND, hint_fraction=2.0)


def test_difficulty_knobs_change_the_episode(tau2_data):
    small = CapabilityEnv(REFUND, difficulty={"users": 1, "ineligible_fraction": 1.0})
    for s in range(5):
        _, info = small.reset(seed=s)
        assert info["case"] == "refuse_not_delivered" and info["difficulty"]["users"] == 1
        assert len(small._backend.initial_db()["users"]) == 1
    easy = CapabilityEnv(REFUND, difficulty={"ineligible_fraction": 0.0})
    assert all(easy.reset(seed=s)[1]["case"] != "refuse_not_delivered" for s in range(8))
    with pytest.raises(ValueError, match="must be a number in"):
        CapabilityEnv(REFUND, difficulty={"users": 100})
    assert CapabilityEnv(REFUND, difficulty={"max_steps": 13}).max_steps == 13


def test_case_option_and_unknown_case(tau2_data):
    env = CapabilityEnv(REFUND)
    assert env.reset(seed=0, options={"case": "return_to_original"})[1]["case"] == "return_to_original"
    with pytest.raises(ValueError, match="unknown case"):
        env.reset(seed=0, options={"case": "nope"})


def test_unsolvable_spec_is_rejected_at_reset_with_the_seed(tau2_data, refund_doc):
    doc = copy.deepcopy(refund_doc)
    doc["cases"][0]["slots"]["order"]["where"]["status"] = "lost in the mail"
    env = CapabilityEnv(doc)
    with pytest.raises(UnsolvableScenarioError, match=r"seed 11: case 'return_to_original': slot 'order' has no candidate"):
        env.reset(seed=11, options={"case": "return_to_original"})


def test_reference_that_cannot_succeed_is_rejected_at_reset(tau2_data, refund_doc):
    doc = copy.deepcopy(refund_doc)
    doc["cases"][0]["reference"][3]["args"]["payment_method_id"] = "credit_card_0000000"
    env = CapabilityEnv(doc)
    with pytest.raises(UnsolvableScenarioError, match=r"seed 3: .*reference call return_delivered_order_items failed"):
        env.reset(seed=3, options={"case": "return_to_original"})
    # without the dry run the task starts, and the reference no longer scores 1
    env = CapabilityEnv(doc, verify_reference=False)
    env.reset(seed=3, options={"case": "return_to_original"})
    r, _ = _play(env, env.reference_actions() + ["Okay."] * 10, 3, case="return_to_original")
    assert r < 1.0


def test_reference_scores_one(tau2_data):
    for path in SPEC_FILES:
        env = CapabilityEnv(path)
        for seed in range(3):
            env.reset(seed=seed)
            r, info = _play(env, env.reference_actions(), seed)
            assert r == 1.0, (path.stem, seed, info["reward_info"])


def test_a_fork_replays_the_reference_to_the_same_final_database(tau2_data):
    changed = 0
    # dual control (telecom): the user's own phone calls change the state too, and they are not in the
    # agent's reference, so replaying the reference alone cannot reach the episode's final state
    for path in [p for p in SPEC_FILES if read_spec_document(p).get("domain") != "telecom"]:
        env = CapabilityEnv(path)
        env.reset(seed=5)
        fork = env._backend.fork()
        assert fork.initial_db() is env._backend.initial_db()  # shared, not copied
        _play(env, env.reference_actions(), 5)
        for step in env.scenario.reference:
            if "call" in step:
                assert not fork.call(step["call"], step.get("args", {})).error, (path.stem, step)
        assert fork.current_db() == env._backend.current_db(), path.stem
        assert fork.fingerprint() == env.state_fingerprint()
        changed += fork.current_db() != fork.initial_db()
    assert changed  # some reference solutions write


def test_a_missing_database_file_is_an_error_naming_it(tau2_data, tmp_path, monkeypatch):
    from trace_gym.data import DataDirError, tau2_domain_dir

    folder = tmp_path / "tau2" / "domains" / "retail"
    folder.mkdir(parents=True)
    for name in ("tools.json", "policy.md"):  # everything but the database
        (folder / name).write_bytes((tau2_domain_dir("retail") / name).read_bytes())
    monkeypatch.setenv("TAU2_DATA_DIR", str(tmp_path))
    with pytest.raises(DataDirError, match=r"retail/db\.json"):
        CapabilityEnv(REFUND)


def test_wrong_write_is_partial_credit_and_gate_zeroes_collateral(tau2_data):
    env = CapabilityEnv(REFUND)
    env.reset(seed=0, options={"case": "return_to_original"})
    ref = env.reference_actions()
    # skip the confirmation: the return still counts, the ordering component does not
    r, info = _play(env, [ref[0], ref[1], ref[3], ref[4]], 0, case="return_to_original")
    assert 0.0 < r < 1.0 and info["reward_info"]["components"]["confirmed_first"] == 0.0
    bad = env.unauthorized_actions()[0]
    r, info = _play(env, ref[:3] + [bad] + ref[3:], 0, case="return_to_original")
    assert r == 0.0 and info["reward_info"]["components"]["no_unrequested_writes"] == 0.0


def test_transfer_ends_the_episode_and_user_gives_up_after_max_turns(tau2_data):
    env = CapabilityEnv(ENVS_DIR / "cap-precondition-verification.yaml")
    env.reset(seed=0)
    _, _, term, _, info = env.step(format_tool_call("transfer_to_human_agents", {"summary": "help"}))
    assert term and info["termination_reason"] == "transfer"
    env.reset(seed=0)
    steps = 0
    term = False
    while not term and steps < 20:
        _, r, term, trunc, info = env.step("Okay.")
        steps += 1
    assert term and steps == 8 and info["termination_reason"] == "user_stop" and r == 0.0


def test_step_limit_truncates(tau2_data):
    env = CapabilityEnv(REFUND, max_steps=2)
    env.reset(seed=0)
    env.step(format_tool_call("list_all_product_types", {}))
    _, r, term, trunc, info = env.step(format_tool_call("list_all_product_types", {}))
    assert trunc and not term and "reward_info" in info


def test_unexposed_tool_is_rejected_without_running(tau2_data):
    env = CapabilityEnv(ENVS_DIR / "cap-precondition-verification.yaml")
    env.reset(seed=2)
    before = env.state_fingerprint()
    obs, *_ , info = env.step(format_tool_call("book_reservation", {"user_id": "x"}))
    assert "unknown tool 'book_reservation'" in obs and env.state_fingerprint() == before


def test_simulated_user_plays_when_given(tau2_data, refund_doc):
    doc = copy.deepcopy(refund_doc)
    doc["user"]["simulator"] = {"instructions": "You are {user.name.first_name}; you want to return an item."}

    class Echo:
        policy_id = "echo"

        def __init__(self):
            self.seen = []

        def act(self, messages, tools):
            self.seen.append(messages)
            return "Thanks, bye ###STOP###"

    sim = Echo()
    env = CapabilityEnv(doc, user_simulator=sim)
    env.reset(seed=1)
    _, _, term, _, info = env.step("Hello, how can I help?")
    assert term and info["messages"][-1]["content"] == "Thanks, bye"
    first = sim.seen[0]
    assert first[0]["role"] == "system" and first[0]["content"].startswith("You are ")
    assert first[-1] == {"role": "user", "content": "Hello, how can I help?"}


def test_gym_make_and_spec_cache(tau2_data):
    env = gym.make("trace/cap-tool-call-precision-v0", difficulty={"payment_fraction": 1.0})
    _, info = env.reset(seed=3)
    assert info["case"] == "switch_to_gift_card"
    assert _get_spec(REFUND) is _get_spec(REFUND)


def test_near_miss_distractors_are_consistent_copies(tau2_data):
    env = CapabilityEnv(REFUND, difficulty={"near_miss_orders": 3})
    env.reset(seed=2, options={"case": "return_to_original"})
    db = env._backend.initial_db()
    target = env.scenario.slots["order"]
    twins = [o for o in db["orders"].values() if o["items"] == target["items"] and o["order_id"] != target["order_id"]]
    assert len(twins) >= 3 and all(o["status"] == "processed" for o in twins[-3:])
    owner = db["users"][target["user_id"]]
    assert all(o["order_id"] in owner["orders"] for o in twins)
    none = CapabilityEnv(REFUND, difficulty={"near_miss_orders": 0})
    none.reset(seed=2, options={"case": "return_to_original"})
    assert len(none._backend.initial_db()["orders"]) == len(db["orders"]) - 3


def test_bad_distractor_field_is_an_unsolvable_scenario(tau2_data, refund_doc):
    doc = copy.deepcopy(refund_doc)
    doc["cases"][0]["distractors"][0]["set"] = {"items.9.price": 1}
    env = CapabilityEnv(doc)
    with pytest.raises(UnsolvableScenarioError, match="seed 1: .*distractor field 'items.9.price'"):
        env.reset(seed=1, options={"case": "return_to_original"})


def test_per_episode_difficulty_option(tau2_data):
    env = CapabilityEnv(REFUND)
    _, info = env.reset(seed=0, options={"difficulty": {"hint_fraction": 1.0, "max_steps": 14, "ineligible_fraction": 1.0}})
    assert info["hint_shown"] and info["case"] == "refuse_not_delivered" and env.max_steps == 14
    _, info = env.reset(seed=0)
    assert env.max_steps == 30 and info["difficulty"]["hint_fraction"] == 0.3
    with pytest.raises(ValueError, match="must be a number in"):
        env.reset(seed=0, options={"difficulty": {"max_steps": 1}})
