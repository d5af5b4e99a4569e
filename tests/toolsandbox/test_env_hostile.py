"""Hostile input on ``trace/toolsandbox-v0``: unknown tools and vectorised infos, with generated episodes."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.core import format_tool_call

ENV_ID = "trace/toolsandbox-v0"
SCENARIOS = ["wifi_off", "turn_on_wifi_low_battery_mode", "send_message_with_contact_content_cellular_off",
             "search_reminder_with_recency_upcoming"]
TOOL_NAMES = ["set_wifi_status", "get_current_timestamp", "search_contacts", "send_message_with_phone_number",
              "set_low_battery_mode_status", "set_cellular_service_status", "search_reminder", "no_such_tool", ""]


def _make(**kw):
    return gym.make(ENV_ID, **kw).unwrapped


_junk = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6) | st.floats(allow_nan=False, width=32)
_call = st.builds(format_tool_call, st.sampled_from(TOOL_NAMES),
                  st.dictionaries(st.sampled_from(["on", "name", "phone_number", "content", "x"]), _junk, max_size=2))
ACTIONS = st.one_of(
    _call,
    st.lists(_call, min_size=2, max_size=3).map("".join),
    st.sampled_from(["Done, wifi is off.", "What is the phone number?", "I cannot do that."]),
    st.text(max_size=30),
)


def _signature(value, path=""):
    """``{path: type name}`` of every leaf; node ids (milestone/minefield keys) become ``*``."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = "*" if path.endswith(("milestones", "minefields")) else k
            out.update(_signature(v, f"{path}.{key}"))
        return out
    return {path: type(value).__name__}


_SEEN: dict[str, str] = {}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenario=st.sampled_from(SCENARIOS), mode=st.sampled_from(["error", "abort"]),
       actions=st.lists(ACTIONS, min_size=1, max_size=3))
def test_reward_info_keeps_every_type_across_episodes(root, scenario, mode, actions) -> None:
    env = _make(unknown_tool=mode, max_steps=len(actions))
    env.reset(seed=0, options={"scenario": scenario})
    for action in actions:
        _, reward, term, trunc, info = env.step(action)
        if term or trunc:
            break
    assert term or trunc
    sig = _signature(info["reward_info"])
    for path, kind in sig.items():
        assert _SEEN.setdefault(path, kind) == kind, (path, kind, _SEEN[path])
    assert isinstance(info["reward_info"]["exception"], str) and isinstance(info["reward_info"]["aborted"], bool)
    assert all(v["step"] >= -1 for v in info["reward_info"]["milestones"].values())


@pytest.mark.parametrize("order", ["normal_first", "aborted_first"])
def test_make_vec_stacks_infos_of_episodes_that_end_differently(root, order) -> None:
    normal = lambda: gym.make(ENV_ID, scenario="wifi_off")  # noqa: E731
    aborting = lambda: gym.make(ENV_ID, scenario="wifi_off", unknown_tool="abort")  # noqa: E731
    fns = [normal, aborting] if order == "normal_first" else [aborting, normal]
    venv = gym.vector.SyncVectorEnv(fns)
    venv.reset(seed=[0, 1])
    unknown = format_tool_call("get_current_timestamp", {})
    # both end on the first step: one aborts, the other's user ends the conversation
    actions = ("I cannot do that.", unknown) if order == "normal_first" else (unknown, "I cannot do that.")
    _, rew, term, _, info = venv.step(actions)
    assert term.all() and (rew == 0).all()
    aborted = [False, True] if order == "normal_first" else [True, False]
    assert list(info["reward_info"]["aborted"]) == aborted
    assert [bool(e) for e in info["reward_info"]["exception"]] == aborted
    venv.close()


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(st.tuples(ACTIONS, ACTIONS), min_size=1, max_size=6))
def test_make_vec_never_fails_on_generated_actions(root, steps) -> None:
    venv = gym.vector.SyncVectorEnv([
        lambda: gym.make(ENV_ID, scenario="wifi_off", max_steps=3),
        lambda: gym.make(ENV_ID, scenario="turn_on_wifi_low_battery_mode", unknown_tool="abort", max_steps=2),
    ])
    venv.reset(seed=[0, 1])
    for pair in steps:
        obs, rew, term, trunc, _ = venv.step(pair)
        assert len(obs) == 2 and ((rew >= 0) & (rew <= 1)).all()
    venv.close()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.text(min_size=0, max_size=20), args=st.dictionaries(st.text(max_size=5), _junk, max_size=3),
       with_known=st.booleans())
def test_unknown_tools_are_error_results_that_change_nothing(root, name, args, with_known) -> None:
    env = _make()
    _, info = env.reset(seed=0, options={"scenario": "wifi_off"})
    if name in {t["function"]["name"] for t in info["tools"]}:
        return
    before, bus = env.state_fingerprint(), env.bus()
    action = format_tool_call(name, args)
    if with_known:
        action = format_tool_call("set_wifi_status", {"on": True}) + action  # fails: wifi already on
    obs, reward, term, trunc, info = env.step(action)
    if "action_error" in info:  # a name the grammar cannot carry is a malformed action: also no change
        assert env.state_fingerprint() == before and env.bus() == bus
        return
    assert not term and reward == 0.0
    tool_msgs = [m for m in info["messages"] if m["role"] == "tool"]
    assert tool_msgs[-1]["content"].startswith("Error: KeyError: ") and len(info["tool_errors"]) == len(tool_msgs)
    assert env.state_fingerprint() == before
    assert len(env.bus()) == len(bus) + (2 if with_known else 0)  # only the offered call is on the bus
    assert json.dumps(env.bus()[: len(bus)], default=str) == json.dumps(bus, default=str)


def test_a_pickled_env_binds_arguments_like_the_original(root) -> None:
    import pickle

    env = _make()
    env.reset(seed=0, options={"scenario": "wifi_off"})
    copy = pickle.loads(pickle.dumps(env))
    for e in (env, copy):  # the NOT_GIVEN / REQUIRED sentinels survive the round trip
        obs, *_ = e.step(format_tool_call("set_wifi_status", {}))
        assert "TypeError: missing a required argument: 'on'" in obs
    assert copy.state_fingerprint() == env.state_fingerprint()
