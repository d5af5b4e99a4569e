"""The offline ToolSandbox user: plays the scenario's user side from its task, deterministically."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.core import format_tool_call
from trace_gym.core.users import UserSimulator
from trace_gym.toolsandbox.offline_user import OfflineUser, read_task

ENV_ID = "trace/toolsandbox-v0"
ASK = "Sure, I can help. What exactly would you like me to do, and what details do you have?"
DONE = "All done. Is there anything else I can help you with?"


@pytest.fixture(scope="module")
def env():
    return gym.make(ENV_ID).unwrapped


def _good_agent(env, name: str) -> tuple[float, list[str], dict]:
    """Asks what the user wants, makes the gold calls of the scenario's milestones, reports, repeats the last call."""
    gold = env.task_source.gold(name)
    env.reset(seed=0, options={"scenario": name})
    _, reward, term, trunc, info = env.step(ASK)
    for a in gold.actions if not term else ():
        _, reward, term, trunc, info = env.step(format_tool_call(a["name"], a["arguments"]))
        if term:
            break
    for i in range(4):
        if term or trunc:
            break
        _, reward, term, trunc, info = env.step(DONE)
        if not term and i == 0 and gold.actions:
            a = gold.actions[-1]
            _, reward, term, trunc, info = env.step(format_tool_call(a["name"], a["arguments"]))
    users = [m["content"] for m in info["messages"] if m["role"] == "user"]
    return reward, users, info


def _multi_turn(env) -> list[str]:
    src = env.task_source
    return [n for n in src.task_ids() if "MULTIPLE_USER_TURN" in env._all[n].categories]


def test_is_the_default_and_implements_the_seam(env):
    assert isinstance(env.user, OfflineUser) and isinstance(OfflineUser(), UserSimulator)
    with pytest.raises(ValueError, match="user"):
        gym.make(ENV_ID, user="nobody")
    with pytest.raises(ValueError, match="before reset"):
        OfflineUser().respond([])


def test_good_agent_gets_several_user_turns_and_credit_on_multi_turn_scenarios(env):
    names = _multi_turn(env)
    assert len(names) >= 20
    results = {n: _good_agent(env, n) for n in names}
    # every multi-user-turn scenario now gets at least a second user message
    assert all(len(users) >= 2 for _, users, _ in results.values())
    assert all(info["termination_reason"] == "user_ended" for _, _, info in results.values())
    assert sum(1 for r, _, _ in results.values() if r > 0) >= len(names) * 2 // 3
    assert sum(r for r, _, _ in results.values()) / len(names) > 0.2
    # a follow-up request ("…, then tomorrow in Fahrenheit") comes once the first part is answered
    _, users, _ = results["find_temperature_f_with_location_and_time_diff_multiple_user_turn"]
    assert users == ["What's the lowest temperature in Grand Canyon today", "And tomorrow in Fahrenheit?"]
    _, users, _ = results["update_contact_relationship_with_relationship_twice_multiple_user_turn"]
    assert len(users) == 3 and "back to my friends" in users[-1]


def test_answers_questions_with_what_the_task_gives_only(env):
    env.reset(options={"scenario": "add_reminder_content_and_date_and_time_multiple_user_turn"})
    obs, _, term, _, _ = env.step("When should I remind you?")
    assert "3/22/2024 5PM" in obs and not term
    obs, _, term, _, _ = env.step("What should the reminder say?")
    assert "buy chocolate milk" in obs and not term
    obs, _, term, _, _ = env.step("What is the phone number of your dentist?")
    assert "don't know" in obs and not re.search(r"\+\d", obs)
    env.reset(options={"scenario": "remove_contact_by_phone_multiple_user_turn"})
    obs, _, _, _, _ = env.step("Which contact would you like to delete?")
    assert "+12453344098" in obs
    env.reset(options={"scenario": "send_message_with_contact_content_cellular_off_multiple_user_turn"})
    obs, _, _, _, _ = env.step("Who should I send it to, and what should the message say?")
    assert "Fredrik Thordendal" in obs and "How's the new album coming along" in obs


def test_confirms_corrects_and_nudges_then_ends(env):
    env.reset(options={"scenario": "turn_on_wifi_low_battery_mode"})
    obs, _, term, _, _ = env.step("Wifi needs low battery mode off. Shall I turn low battery mode off?")
    assert obs.strip().endswith("Yes, please go ahead.") and not term
    env.reset(options={"scenario": "remove_contact_by_phone_multiple_user_turn"})
    obs, _, _, _, _ = env.step("Delete the contact with number +19999999999. Is that correct?")
    assert "No, the number is +12453344098" in obs
    # giving up: the user says what it still wants (once here), then ends; with nothing to add it ends at once
    env.reset(options={"scenario": "modify_contact_with_message_recency_multiple_user_turn"})
    replies = []
    for _ in range(5):
        obs, _, term, _, info = env.step("Sorry, I cannot do that.")
        if term:
            break
        replies.append(obs)
    assert term and info["termination_reason"] == "user_ended" and len(replies) == 1
    assert "+10293847563" in replies[0]
    env.reset(options={"scenario": "wifi_off"})
    _, _, term, _, info = env.step("Sorry, I cannot do that.")
    assert term and info["termination_reason"] == "user_ended"


def test_secrets_are_never_told(env):
    src = env.task_source
    questions = ["What is it?", "What should it be?", "Who is it?", "What's the phone number?", "When is it?",
                 "What does the message say?", "Where is it?", "Sorry, I can't find it.", "Can you tell me the answer?"]
    checked = 0
    for name in src.task_ids():
        task = env._all[name].user_simulator_task
        m = re.search(r"(?:It should (?:be|say) |Christmas Day is )([^.]+?)\.\s*Do not leak", task)
        if not m:
            continue
        secret = m.group(1).strip()
        user = OfflineUser()
        user.reset(env._all[name])
        bus = [{"sender": "AGENT", "recipient": "USER", "content": q} for q in questions]
        for i in range(len(bus)):
            turn = user.respond(bus[: i + 1])
            assert secret not in (turn.content or ""), (name, turn)
        checked += 1
    assert checked >= 8


def test_ends_when_done_and_after_a_bounded_number_of_turns(env):
    env.reset(options={"scenario": "wifi_off"})
    env.step(format_tool_call("set_wifi_status", {"on": False}))
    _, reward, term, _, info = env.step("Wifi is turned off")
    assert term and reward == 1.0 and info["termination_reason"] == "user_ended"
    env2 = gym.make(ENV_ID, user=OfflineUser(max_turns=3)).unwrapped
    env2.reset(options={"scenario": "add_reminder_content_and_date_and_time_multiple_user_turn"})
    steps = 0
    while steps < 10:
        steps += 1
        _, _, term, trunc, info = env2.step("When should I remind you?")
        if term or trunc:
            break
    assert term and info["termination_reason"] == "user_ended" and steps == 4  # three answers, then the end


def test_deterministic(env):
    a = [_good_agent(env, n)[1:] for n in _multi_turn(env)[:6]]
    b = [_good_agent(env, n)[1:] for n in _multi_turn(env)[:6]]
    assert [(u, i["reward_info"]) for u, i in a] == [(u, i["reward_info"]) for u, i in b]
    k = read_task("Ask User B to find the content of your (User A's) oldest message. It should be Hi. "
                  "Do not leak this information. You do not have any more information.")
    assert k.steps == ("Find the content of my oldest message.",) and "Hi" not in str(k.facts)
