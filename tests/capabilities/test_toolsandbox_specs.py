"""Capability environments over ToolSandbox's world (``domain: toolsandbox``).

Every ``envs/cap-ts-*.yaml`` spec: Gymnasium's env checker, the reward kit, a reference that
scores 1, ToolSandbox's own tools and system prompt, determinism, partial credit that grows
with the work done, no action that raises, rejected calls that change nothing, load-time
errors that name the field, and the task source.
"""

from __future__ import annotations

import copy
import json

import gymnasium as gym
import pytest
import yaml
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trace_gym  # noqa: F401  (registers the ids)
from trace_gym.capabilities import CapabilityEnv
from trace_gym.capabilities.scenario import UnsolvableScenarioError
from trace_gym.capabilities.spec import SpecError, parse_spec
from trace_gym.capabilities.templating import TemplateError
from trace_gym.core.toolcalls import format_tool_call
from trace_gym.testing import check_reward, hostile_actions, run_actions, text_actions, tool_call_actions

from .conftest import ENVS_DIR

TS_SPECS = sorted(ENVS_DIR.glob("cap-ts-*.yaml"))
TS_IDS = [f"trace/{p.stem}-v0" for p in TS_SPECS]
BEHAVIOURS = {"cap-ts-state-dependency", "cap-ts-canonicalization", "cap-ts-insufficient-information",
              "cap-ts-multiple-user-turn", "cap-ts-multiple-tool-call"}


def call(name: str, **args) -> str:
    return format_tool_call(name, args, "hermes")


@pytest.fixture
def env_of(toolsandbox_data):
    made = []

    def make(stem: str, **kw) -> CapabilityEnv:
        env = CapabilityEnv(ENVS_DIR / f"{stem}.yaml", **kw)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


def test_one_spec_per_toolsandbox_behaviour_is_registered():
    assert BEHAVIOURS <= {p.stem for p in TS_SPECS}
    for env_id in TS_IDS:
        assert env_id in gym.registry


@pytest.mark.parametrize("env_id", TS_IDS)
def test_check_env_check_reward_and_reference_scores_one(toolsandbox_data, env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped)
    env.close()
    report = check_reward(env_id, seeds=10).summary()
    assert report["probes"]["reference"]["mean"] == 1.0
    assert report["probes"]["do_nothing"]["max"] < 0.5
    assert "unauthorized_write" in report["probes"]


@pytest.mark.parametrize("path", TS_SPECS, ids=lambda p: p.stem)
def test_tools_schemas_and_prompt_are_toolsandboxs(toolsandbox_data, path):
    from trace_gym.toolsandbox.scenarios import load_scenarios
    from trace_gym.toolsandbox.toolbox import ToolBox
    from trace_gym.toolsandbox.world import World

    env = CapabilityEnv(path)
    names = env.cap_spec.tool_names
    expected = {s["function"]["name"]: s for s in ToolBox(World.from_tables({}), names).schemas()}
    for case in env.cap_spec.cases:  # each case offers its own tools (default: the spec's), in the spec's order
        _, info = env.reset(seed=_seed_for(env, case["name"]), options={"hint": False, "case": case["name"]})
        offered = [t["function"]["name"] for t in info["tools"]]
        assert 2 <= len(offered) <= 4  # a small model must be able to act on it, as on ToolSandbox's own scenarios
        assert offered == [n for n in names if n in case.get("tools", names)]
        for schema in info["tools"]:
            assert schema == expected[schema["function"]["name"]]
    system = info["messages"][0]["content"]
    prompts = {s.agent_system_prompt for s in load_scenarios().values()}
    assert system in prompts  # ToolSandbox's own framing, nothing appended without a hint
    assert len(system) + len(info["messages"][1]["content"]) < 1500
    assert not any(k in info for k in ("reference", "rewards", "slots"))


@pytest.mark.parametrize("path", TS_SPECS, ids=lambda p: p.stem)
def test_same_seed_same_world_and_episode(toolsandbox_data, path):
    def run(seed):
        env = CapabilityEnv(path)
        obs, info = env.reset(seed=seed)
        world = json.dumps(env._backend.initial_db(), sort_keys=True)
        r, final, transcript = run_actions(env, seed, env.reference_actions())
        return obs, world, r, json.dumps(transcript, sort_keys=True), final["reward_info"]

    assert run(11) == run(11)
    assert run(11)[1] != run(12)[1]  # another seed, another world


def test_the_world_is_drawn_from_the_knobs(env_of):
    import random

    from trace_gym.capabilities.synthdb.toolsandbox import generate_toolsandbox_world

    small = generate_toolsandbox_world(random.Random(3), contacts=2)
    big = generate_toolsandbox_world(random.Random(3), contacts=12, similar_names=3, low_battery=100)
    assert len(small["contacts"]) == 3 and len(big["contacts"]) == 16
    assert sum(c["is_self"] for c in big["contacts"]) == 1
    device = big["settings"]["device"]
    assert device["low_battery_mode"] and not (device["cellular"] or device["wifi"] or device["location_service"])
    firsts = [c["name"].split()[0] for c in big["contacts"][1:]]
    assert len(set(firsts)) < len(firsts)  # near-miss names share a first name
    with pytest.raises(ValueError, match="contacts"):
        generate_toolsandbox_world(random.Random(0), contacts=1000)
    env = env_of("cap-ts-state-dependency", difficulty={"low_battery_percent": 100})
    for seed in range(3):
        env.reset(seed=seed)
        assert env.scenario.name == "low_battery_mode" and env._backend.initial_db()["settings"]["device"]["low_battery_mode"]


# ------------------------------------------------------------------ partial credit
def _score(env, seed, actions, case):
    r, info, _ = run_actions(env, seed, actions, {"case": case, "hint": False})
    return r


def _seed_for(env, case):
    for seed in range(40):
        try:
            env.reset(seed=seed, options={"case": case})
            return seed
        except (UnsolvableScenarioError, TemplateError):  # this seed's world does not have the case's situation
            continue
    raise AssertionError(f"no seed binds {case}")


def test_state_dependency_credit_grows_with_the_work_done(env_of):
    env = env_of("cap-ts-state-dependency")
    seed = _seed_for(env, "cellular_off")
    friend, note = env.scenario.slots["friend"], env.scenario.slots["note"]
    send = call("send_message_with_phone_number", phone_number=friend["phone_number"], content=note["text"])
    cell_on = call("set_cellular_service_status", on=True)
    nothing = _score(env, seed, [], "cellular_off")
    only_setting = _score(env, seed, [cell_on], "cellular_off")
    tried_first = _score(env, seed, [send, cell_on, send, "Sent. Anything else?"], "cellular_off")
    wrong_text = _score(env, seed, [cell_on, call("send_message_with_phone_number", phone_number=friend["phone_number"],
                                                      content="zzz qqq"), "Sent. Anything else?"], "cellular_off")
    full = _score(env, seed, env.reference_actions(), "cellular_off")
    assert nothing == 0.0 < only_setting < wrong_text < tried_first < full == 1.0
    # the failed send (cellular off) changed nothing
    env.reset(seed=seed, options={"case": "cellular_off"})
    before = env.state_fingerprint()
    _, _, _, _, info = env.step(send)
    assert info.get("tool_errors") and env.state_fingerprint() == before
    assert "Cellular service is not enabled" in info["messages"][-1]["content"]


def test_low_battery_mode_must_go_first(env_of):
    env = env_of("cap-ts-state-dependency")
    seed = _seed_for(env, "low_battery_mode")
    env.reset(seed=seed, options={"case": "low_battery_mode"})
    _, _, _, _, info = env.step(call("set_cellular_service_status", on=True))
    assert "low battery mode" in info["messages"][-1]["content"]
    full = _score(env, seed, env.reference_actions(), "low_battery_mode")
    ref = env.reference_actions()
    half = _score(env, seed, ref[:2], "low_battery_mode")
    assert 0.0 < half < full == 1.0


def test_location_dependency_credit_grows_with_the_settings_fixed(env_of):
    env = env_of("cap-ts-location-dependency")
    seed = _seed_for(env, "low_battery_mode")
    ref = env.reference_actions()
    env.reset(seed=seed, options={"case": "low_battery_mode"})
    _, _, _, _, info = env.step(call("get_current_location"))
    assert "Location service is not enabled" in info["messages"][-1]["content"]
    scores = [_score(env, seed, ref[:k], "low_battery_mode") for k in range(len(ref) + 1)]
    assert scores == sorted(scores) and scores[0] == 0.0 < scores[1] and scores[-1] == 1.0


def test_canonicalization_rewards_the_timestamp_within_a_minute(env_of):
    env = env_of("cap-ts-canonicalization")
    seed = _seed_for(env, "tomorrow")
    s = env.scenario.slots
    ts, text = s["when"]["timestamp"], s["note"]["text"]
    scores = [_score(env, seed, [call("add_reminder", content=text, reminder_timestamp=t), "Added. Anything else?"], "tomorrow")
              for t in (ts + 7200, ts + 30, ts)]
    assert 0.0 < scores[0] < scores[1] == scores[2]
    assert _score(env, seed, env.reference_actions(), "tomorrow") == 1.0
    # a reminder set for now (the spoken time never converted) is worth nothing
    now = s["clock"]["timestamp"]
    assert _score(env, seed, [call("add_reminder", content=text, reminder_timestamp=now)] + env.reference_actions(), "tomorrow") == 0.0


def test_multiple_user_turns_details_come_only_when_asked(env_of):
    env = env_of("cap-ts-multiple-user-turn")
    seed = _seed_for(env, "raw_phone_number")
    s = env.scenario.slots
    env.reset(seed=seed, options={"case": "raw_phone_number"})
    obs, *_ = env.step("Sure.")
    assert s["num"]["display"] not in obs and s["note"]["text"] not in obs
    obs, *_ = env.step("Who should I send it to?")
    assert s["num"]["display"] in obs
    asked_only = _score(env, seed, ["Who should I send it to?", "What should the message say?"], "raw_phone_number")
    raw = call("send_message_with_phone_number", phone_number=s["num"]["display"], content=s["note"]["text"])
    raw_try = _score(env, seed, ["Who should I send it to?", "What should the message say?", raw], "raw_phone_number")
    spaced = call("send_message_with_phone_number", phone_number="+1 " + s["num"]["display"], content=s["note"]["text"])
    canonical = _score(env, seed, ["Who should I send it to?", "What should the message say?", spaced, "Sent."], "raw_phone_number")
    assert 0.0 < asked_only == raw_try < canonical == 1.0  # the tool refuses "(415) 555-0134"; "+1 (415) 555-0134" is the number


def test_insufficient_information_refusal_pays_only_where_no_tool_can_help(env_of):
    env = env_of("cap-ts-insufficient-information")
    refuse = "Sorry, I cannot do that: I don't have a tool for it."
    for case in ("no_messaging_tool", "no_reminder_tool"):
        seed = _seed_for(env, case)
        assert _score(env, seed, [refuse], case) == 1.0
        assert 0.0 < _score(env, seed, ["Sorry, I can't."], case) < 1.0
        assert _score(env, seed, ["Done, it is taken care of."], case) == 0.0
        probe = env.unauthorized_actions()
        assert _score(env, seed, probe + [refuse], case) == 0.0  # a change to the world voids the refusal
    for case in ("look_up_number", "last_message"):
        seed = _seed_for(env, case)
        assert _score(env, seed, [refuse], case) == 0.0
        assert _score(env, seed, env.reference_actions(), case) == 1.0


def test_multiple_tool_calls_credit_each_lookup(env_of):
    env = env_of("cap-ts-multiple-tool-call")
    seed = _seed_for(env, "forward_last_message")
    ref = env.reference_actions()
    partial = [_score(env, seed, ref[:k], "forward_last_message") for k in range(4)]
    assert partial == sorted(partial) and partial[0] == 0.0 < partial[3] < 1.0
    assert _score(env, seed, ref, "forward_last_message") == 1.0


def test_the_chains_span_contacts_reminders_and_dates(env_of):
    env = env_of("cap-ts-multiple-tool-call")
    for case in ("update_number", "delete_reminder", "days_until_holiday"):
        seed = _seed_for(env, case)
        ref = env.reference_actions()
        partial = [_score(env, seed, ref[:k], case) for k in range(len(ref) + 1)]
        assert partial == sorted(partial) and partial[0] == 0.0 < partial[-2] and partial[-1] == 1.0, (case, partial)


def test_a_tool_of_another_case_is_not_offered_and_changes_nothing(env_of):
    env = env_of("cap-ts-multiple-tool-call")
    seed = _seed_for(env, "delete_reminder")
    _, info = env.reset(seed=seed, options={"case": "delete_reminder"})
    assert [t["function"]["name"] for t in info["tools"]] == ["search_reminder", "remove_reminder"]
    before = env.state_fingerprint()
    obs, r, term, trunc, info = env.step(call("modify_contact", person_id="x", phone_number="+14155550134"))
    assert env.state_fingerprint() == before and not term and "modify_contact" in obs
    assert info.get("tool_errors"), info


def test_holidays_are_the_days_search_holiday_and_timestamp_diff_give():
    import datetime as dt
    import random

    from trace_gym.capabilities.synthdb.toolsandbox import generate_toolsandbox_world
    from trace_gym.toolsandbox.tools.holidays import find_holiday

    for seed in range(30):
        world = generate_toolsandbox_world(random.Random(seed))
        now = world["clock"]["now"]["timestamp"]
        assert world["holidays"], seed
        for h in world["holidays"]:
            day = find_holiday(h["name"], h["year"])
            assert dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp() == h["timestamp"] > now
            assert h["days"] == dt.timedelta(seconds=h["timestamp"] - now).days  # timestamp_diff's days
    a, b = generate_toolsandbox_world(random.Random(3)), generate_toolsandbox_world(random.Random(3), reminders=3)
    assert a == b  # computed from the clock alone


# ------------------------------------------------------------------ no action raises, rejected calls change nothing
@pytest.mark.parametrize("stem", [p.stem for p in TS_SPECS])
def test_no_action_raises_and_rejected_calls_change_nothing(env_of, stem):
    env = env_of(stem)
    _, info = env.reset(seed=0)
    tools = info["tools"]
    names = [t["function"]["name"] for t in tools]
    actions = st.one_of(tool_call_actions(tools), text_actions(), hostile_actions(names, max_size=500))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.integers(0, 50), st.lists(actions, min_size=1, max_size=4))
    def check(seed, steps):
        env.reset(seed=seed)
        for action in steps:
            before, seen = env.state_fingerprint(), len(env.messages)
            obs, r, term, trunc, info = env.step(action)
            assert isinstance(obs, str) and 0.0 <= r <= 1.0
            calls = [m for m in info["messages"][seen:] if m["role"] == "assistant" and m.get("tool_calls")]
            rejected = bool(calls) and len(info.get("tool_errors", [])) == len(calls[0]["tool_calls"])
            if "action_error" in info or rejected:
                assert env.state_fingerprint() == before, "a rejected action changed the world"
            if term or trunc:
                break

    check()


# ------------------------------------------------------------------ bad specs are rejected at load, naming the field
def _doc(stem="cap-ts-state-dependency"):
    return yaml.safe_load((ENVS_DIR / f"{stem}.yaml").read_text())


def _rejected(doc) -> SpecError:
    with pytest.raises(SpecError) as err:
        parse_spec(doc, "broken.yaml")
    return err.value


def test_a_tool_the_world_does_not_have_is_rejected(toolsandbox_data):
    doc = _doc()
    doc["tools"].append("teleport_user")
    err = _rejected(doc)
    assert err.where == "tools[4]" and "teleport_user" in err.problem and "toolsandbox" in err.problem
    doc = _doc()
    doc["cases"][0]["reference"].insert(0, {"call": "get_wifi_status", "args": {}})  # a real tool, not exposed
    assert _rejected(doc).where == "cases[0].reference[0].call"


def test_a_case_offers_only_tools_of_its_spec_and_uses_only_those():
    doc = _doc("cap-ts-multiple-tool-call")
    doc["cases"][0]["tools"] = ["search_contacts", "get_wifi_status"]  # a real tool the spec does not list
    err = _rejected(doc)
    assert err.where == "cases[0].tools[1]" and "get_wifi_status" in err.problem
    doc = _doc("cap-ts-multiple-tool-call")
    doc["cases"][0]["tools"] = ["search_contacts", "search_messages"]  # its reference sends a message
    err = _rejected(doc)
    assert err.where.startswith("cases[0].") and "send_message_with_phone_number" in err.problem, err


@pytest.mark.parametrize("change, where", [
    (lambda d: d["db"].update(contacts=500), "db.contacts"),
    (lambda d: d["db"].update(cellular_off=101), "db.cellular_off"),
    (lambda d: d["db"].update(pets=3), "db.pets"),
    (lambda d: d["difficulty"]["contacts"].update(max=900), "difficulty.contacts"),
    (lambda d: d["difficulty"]["low_battery_percent"].update(default=150), "difficulty.low_battery_percent"),
])
def test_a_knob_or_size_out_of_range_is_rejected(toolsandbox_data, change, where):
    doc = _doc()
    change(doc)
    err = _rejected(doc)
    assert err.where == where, err


@pytest.mark.parametrize("slot, where, words", [
    ({"from": "contacts", "where": {"nickname": "Bo"}}, "cases[0].slots.friend.where.nickname", "field"),
    ({"from": "contacts", "where": {"relationship": "nemesis"}}, "cases[0].slots.friend.where.relationship", "never be filled"),
    ({"from": "contacts", "where": {"name": "Nobody At All"}}, "cases[0].slots.friend", "can be filled"),
    ({"from": "pets"}, "cases[0].slots.friend.from", "pets"),
])
def test_a_slot_that_cannot_be_filled_is_rejected(toolsandbox_data, slot, where, words):
    doc = _doc()
    doc["cases"][0]["slots"]["friend"] = slot
    err = _rejected(doc)
    assert err.where == where and words in str(err), err


def test_a_placeholder_naming_a_missing_field_is_rejected(toolsandbox_data):
    doc = _doc()
    doc["cases"][0]["opening"] = "Text {friend.nickname} please."
    err = _rejected(doc)
    assert err.where == "cases[0]" and "nickname" in err.problem


def test_distractors_are_refused_for_the_toolsandbox_world(toolsandbox_data):
    doc = _doc()
    doc["cases"][0]["distractors"] = [{"like": "friend", "table": "users"}]
    assert _rejected(doc).where == "cases[0].distractors[0].table"


def test_the_shipped_specs_load_cleanly(toolsandbox_data):
    for path in TS_SPECS:
        doc = yaml.safe_load(path.read_text())
        assert parse_spec(copy.deepcopy(doc), str(path)).domain == "toolsandbox"


# ------------------------------------------------------------------ task source
def test_task_source_serves_scenario_seeds(env_of):
    env = env_of("cap-ts-multiple-tool-call")
    tasks = env.task_source
    ids = tasks.task_ids("train")[:3]
    for task_id in ids:
        gold = tasks.gold(task_id)
        assert gold.actions
        assert tasks.group(task_id) in {c["name"] for c in env.cap_spec.cases}
        obs_a, _ = env.reset(seed=99, options=tasks.reset_options(task_id))
        obs_b, info = env.reset(seed=int(task_id))
        assert obs_a == obs_b and tasks.task_id_of(info) == task_id


def test_the_schema_and_the_domain_registry_agree():
    from trace_gym.capabilities.domains import DOMAIN_FACTORIES, get_domain
    from trace_gym.capabilities.spec import schema

    assert set(schema()["properties"]["domain"]["anyOf"][0]["enum"]) == set(DOMAIN_FACTORIES)  # plug-ins: the pattern
    with pytest.raises(ValueError, match="unknown capability domain"):
        get_domain("no-such-domain")
