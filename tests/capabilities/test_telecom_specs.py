"""Capability environments over τ²-bench telecom (``domain: telecom``): dual control.

Every ``envs/cap-telecom-*.yaml`` spec: Gymnasium's env checker, the reward kit, a reference that
scores 1 on every sampled seed, the benchmark's own tools and policy, determinism; the seeded world
(canonical form, synced, deterministic); the scripted user operating the phone with the engine's
user tools (the device state changes and the reward sees it); wrong solutions scoring below 1; and
load-time errors that name the field in one line.
"""

from __future__ import annotations

import copy
import json
import random

import gymnasium as gym
import pytest
import yaml
from gymnasium.utils.env_checker import check_env

import trace_gym  # noqa: F401  (registers the ids)
from trace_gym.capabilities import CapabilityEnv
from trace_gym.capabilities.spec import SpecError, parse_spec
from trace_gym.capabilities.synthdb.telecom import ISSUES, generate_telecom_world, split_world
from trace_gym.core.toolcalls import format_tool_call
from trace_gym.testing import check_reward, run_actions

from .conftest import ENVS_DIR

TELECOM_SPECS = sorted(ENVS_DIR.glob("cap-telecom-*.yaml"))
TELECOM_IDS = [f"trace/{p.stem}-v0" for p in TELECOM_SPECS]
MOBILE, ROAMING, BILLING = (ENVS_DIR / f"cap-telecom-{n}.yaml" for n in ("mobile-data", "roaming", "plan-billing"))


def call(name: str, **args) -> str:
    return format_tool_call(name, args, "hermes")


def _doc(path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _seed_for(env: CapabilityEnv, case: str) -> int:
    for seed in range(60):
        env.reset(seed=seed)
        if env.scenario.name == case:
            return seed
    raise AssertionError(f"no seed draws {case}")


# ------------------------------------------------------------------ the registered environments
def test_three_telecom_specs_are_registered_with_their_domain():
    from trace_gym.registration import ENTRIES

    assert len(TELECOM_SPECS) >= 3
    entries = {e.id: e for e in ENTRIES}
    for env_id in TELECOM_IDS:
        assert env_id in gym.registry
        assert entries[env_id].domain == "telecom" and entries[env_id].family == "capability"


@pytest.mark.parametrize("env_id", TELECOM_IDS)
def test_check_env_check_reward_and_reference_scores_one(tau2_data, env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped)
    env.close()
    report = check_reward(env_id, seeds=16).summary()
    assert report["probes"]["reference"]["mean"] == 1.0 and report["probes"]["reference"]["n"] == 16
    assert report["probes"]["do_nothing"]["max"] < 0.5
    assert report["probes"]["unauthorized_write"]["max"] < 0.5
    assert len(report["cases"]) >= 3  # every case is drawn on some of the 16 seeds


@pytest.mark.parametrize("path", TELECOM_SPECS, ids=lambda p: p.stem)
def test_tools_are_the_benchmarks_and_the_prompt_is_the_telecom_policy(tau2_data, path):
    from trace_gym.tau2.data import load_policy

    env = CapabilityEnv(path)
    _, info = env.reset(seed=0, options={"hint": False})
    recorded = json.loads((tau2_data / "tau2" / "domains" / "telecom" / "tools.json").read_text())
    by_name = {r["name"]: r["openai_schema"] for r in recorded}
    assert [t["function"]["name"] for t in info["tools"]] == env.cap_spec.tool_names
    for schema in info["tools"]:
        assert schema == by_name[schema["function"]["name"]]
    user_tools = {r["name"] for r in json.loads((tau2_data / "tau2" / "domains" / "telecom" / "user_tools.json").read_text())}
    assert not user_tools & set(env.cap_spec.tool_names)  # the phone is the user's, never the agent's
    assert info["messages"][0]["content"] == load_policy("telecom")
    assert not any(k in info for k in ("reference", "rewards", "slots"))


@pytest.mark.parametrize("path", TELECOM_SPECS, ids=lambda p: p.stem)
def test_same_seed_same_world_and_episode(tau2_data, path):
    def run(seed):
        env = CapabilityEnv(path)
        obs, _ = env.reset(seed=seed)
        world = json.dumps(env._backend.initial_db(), sort_keys=True)
        r, final, transcript = run_actions(env, seed, env.reference_actions())
        return obs, world, r, json.dumps(transcript, sort_keys=True), final["reward_info"], env.state_fingerprint()

    first = run(5)
    assert first == run(5)
    assert first[1] != run(6)[1]  # another seed, another world
    assert first[2] == 1.0


# ------------------------------------------------------------------ the seeded world
def test_world_is_canonical_synced_and_deterministic():
    from trace_gym.tau2.domains.telecom_db import normalise_agent_db, normalise_user_db

    for i, issue in enumerate(ISSUES):
        world = generate_telecom_world(random.Random(i), customers=4, extra_lines=2, **{f"issue_{issue}": 1})
        assert world == generate_telecom_world(random.Random(i), customers=4, extra_lines=2, **{f"issue_{issue}": 1})
        agent, user = split_world(world)
        assert normalise_agent_db(agent) == agent and normalise_user_db(user) == user  # the benchmark's canonical form
        (phone,) = world["phone"]
        assert phone["issue"] == issue and user["surroundings"]["phone_number"] == phone["phone_number"]
        assert len(agent["customers"]) == 4
        line = next(ln for ln in agent["lines"] if ln["line_id"] == phone["line_id"])
        assert line["phone_number"] == phone["phone_number"]
        assert user["surroundings"]["is_abroad"] == issue.startswith("roaming")
    devices = {iss: generate_telecom_world(random.Random(0), **{f"issue_{iss}": 1})["device"] for iss in ISSUES}
    assert devices["airplane_mode"]["airplane_mode"] and devices["airplane_mode"]["network_connection_status"] == "no_service"
    assert not devices["data_off"]["data_enabled"] and devices["data_saver"]["data_saver_mode"]
    assert not devices["roaming_device"]["roaming_enabled"] and devices["roaming_line"]["roaming_enabled"]
    assert generate_telecom_world(random.Random(1))["phone"][0]["issue"] == "none"
    with pytest.raises(ValueError, match="customers"):
        generate_telecom_world(random.Random(0), customers=100)
    with pytest.raises(ValueError, match="unknown telecom world size 'users'"):
        generate_telecom_world(random.Random(0), users=3)


def test_the_engine_finds_the_generated_world_already_synced(tau2_data):
    from trace_gym.capabilities.domains import get_domain

    dom = get_domain("telecom")
    for issue in ISSUES:
        world = generate_telecom_world(random.Random(3), **{f"issue_{issue}": 1})
        backend = dom.backend(world)
        agent, user = split_world(world)
        assert backend._env.canonical_db() == agent and backend._env.canonical_user_db() == user
        assert backend.fork().fingerprint() == backend.fingerprint()


# ------------------------------------------------------------------ dual control
def test_the_users_device_call_changes_the_phone_and_the_reward_sees_it(tau2_data):
    env = CapabilityEnv(MOBILE)
    seed = _seed_for(env, "airplane_mode_on")
    env.reset(seed=seed, options={"case": "airplane_mode_on", "hint": False})
    phone = env.scenario.slots["phone"]
    assert env._backend.state_view()["device"]["airplane_mode"] is True
    env.step(call("get_customer_by_phone", phone_number=phone["phone_number"]))
    obs, *_ = env.step("Please check your network status and tell me what it shows.")
    assert "Airplane Mode: ON" in obs
    before = env.state_fingerprint()
    obs, *_ = env.step("Airplane mode is on. Please toggle airplane mode to turn it off.")
    assert "Airplane Mode is now OFF." in obs and env.state_fingerprint() != before
    device = env._backend.state_view()["device"]
    assert device["airplane_mode"] is False and device["network_connection_status"] == "connected"
    assert [e["name"] for e in env._log.events if e["kind"] == "user_call"] == ["check_network_status", "toggle_airplane_mode"]
    env.step("Please run a speed test.")
    _, reward, term, _, info = env.step("Fixed. Is there anything else I can help you with?")
    assert term and info["reward_info"]["components"]["airplane_off"] == 1.0 and reward == 1.0


def test_the_agent_cannot_operate_the_phone(tau2_data):
    env = CapabilityEnv(MOBILE)
    env.reset(seed=0)
    before = env.state_fingerprint()
    obs, *_ = env.step(call("toggle_airplane_mode"))
    assert "toggle_airplane_mode" in obs and env.state_fingerprint() == before


def test_an_account_change_reaches_the_phone(tau2_data):
    env = CapabilityEnv(ROAMING)
    seed = _seed_for(env, "line_roaming_off")
    env.reset(seed=seed, options={"case": "line_roaming_off"})
    phone = env.scenario.slots["phone"]
    assert env._backend.state_view()["surroundings"]["roaming_allowed"] is False
    env.step(call("enable_roaming", customer_id=phone["customer_id"], line_id=phone["line_id"]))
    view = env._backend.state_view()
    assert view["lines"][phone["line_id"]]["roaming_enabled"] is True and view["surroundings"]["roaming_allowed"] is True
    obs, *_ = env.step("Please run a speed test.")
    assert "Speed Test Result" in obs


# ------------------------------------------------------------------ wrong solutions score below 1
def _without(actions, *drop):
    return [a for a in actions if not any(d in a for d in drop)]


def test_wrong_solutions_score_below_one(tau2_data):
    env = CapabilityEnv(MOBILE)
    seed = _seed_for(env, "mobile_data_off")
    opts = {"case": "mobile_data_off", "hint": False}
    env.reset(seed=seed, options=opts)
    ref = env.reference_actions()
    assert run_actions(env, seed, ref, opts)[0] == 1.0
    wrong_fix = [a.replace("toggle mobile data to turn it on", "toggle airplane mode") for a in ref]
    assert run_actions(env, seed, wrong_fix, opts)[0] == 0.0  # airplane mode on: the gate fails
    no_check = _without(ref, "network status")
    r = run_actions(env, seed, no_check, opts)[0]
    assert 0.5 < r < 1.0  # fixed, but without the diagnosis first

    env = CapabilityEnv(ROAMING)
    seed = _seed_for(env, "both_roaming_off")
    opts = {"case": "both_roaming_off", "hint": False}
    env.reset(seed=seed, options=opts)
    ref = env.reference_actions()
    account_only = _without(ref, "toggle data roaming")
    r, info, _ = run_actions(env, seed, account_only, opts)
    assert r < 1.0 and info["reward_info"]["components"]["phone_roaming_on"] == 0.0
    assert info["reward_info"]["components"]["line_roaming_on"] == 1.0

    env = CapabilityEnv(BILLING)
    seed = _seed_for(env, "refuel_data")
    opts = {"case": "refuel_data", "hint": False}
    env.reset(seed=seed, options=opts)
    phone = env.scenario.slots["phone"]
    ref = env.reference_actions()
    too_much = [call("refuel_data", customer_id=phone["customer_id"], line_id=phone["line_id"], gb_amount=3.0)
                if a.startswith("<tool_call>") and "refuel_data" in a else a for a in ref]
    assert run_actions(env, seed, too_much, opts)[0] == 0.0

    seed = _seed_for(env, "pay_overdue_bill")
    opts = {"case": "pay_overdue_bill", "hint": False}
    env.reset(seed=seed, options=opts)
    ref = env.reference_actions()
    assert run_actions(env, seed, ref, opts)[0] == 1.0
    never_asked = _without(ref, "check your payment requests")
    r, info, _ = run_actions(env, seed, never_asked, opts)
    assert r < 0.5 and info["reward_info"]["components"]["bill_paid"] == 0.0  # the user never paid on the phone


# ------------------------------------------------------------------ bad input: one clear SpecError line
@pytest.mark.parametrize(("edit", "where", "says"), [
    (lambda d: d["tools"].append("cancel_pending_order"), "tools[", "unknown telecom tool 'cancel_pending_order'"),
    (lambda d: d["user"]["rules"][1]["do"][0].update(call="enable_roaming"), "user.rules[1].do[0].call",
     "a user tool of the telecom domain"),
    (lambda d: d["db"].update(users=3), "db.users", "a size of the telecom world"),
    (lambda d: d["db"].update(issue_data_exhausted=10), "db.issue_data_exhausted", "an issue some case serves"),
    (lambda d: d["cases"].append({**copy.deepcopy(d["cases"][0]), "name": "never",
                                  "slots": {"phone": {"from": "phone", "where": {"issue": "no_such_issue"}}}}),
     "cases[3].slots.phone", "a case that binds"),
])
def test_bad_specs_are_one_line_spec_errors(edit, where, says):
    doc = _doc(MOBILE)
    edit(doc)
    with pytest.raises(SpecError) as err:
        parse_spec(doc, "cap-telecom-bad.yaml")
    msg = str(err.value)
    assert "\n" not in msg and "cap-telecom-bad.yaml" in msg and where in msg and says in msg, msg


def test_user_device_calls_only_where_the_domain_has_a_device():
    doc = _doc(ENVS_DIR / "cap-refund-policy.yaml")
    doc["user"]["rules"][0]["do"] = [{"call": "toggle_airplane_mode"}]
    with pytest.raises(SpecError, match=r"user\.rules\[0\]\.do: .*no user-side tools"):
        parse_spec(doc, "x.yaml")


def test_a_spec_copy_with_user_rule_args_loads():
    doc = copy.deepcopy(_doc(MOBILE))
    doc["user"]["rules"].insert(1, {"when_any": ["4g"], "say": "Done:", "do": [{"call": "set_network_mode_preference",
                                                                                 "args": {"mode": "4g_only"}}]})
    assert parse_spec(doc, "x.yaml").domain == "telecom"
