"""Every registered capability environment passes check_env and check_reward; the kit catches bad specs."""

from __future__ import annotations

import copy

import gymnasium as gym
import pytest
import yaml
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings

import trace_gym  # noqa: F401
from trace_gym.capabilities import CapabilityEnv
from trace_gym.testing import RewardCheckError, check_reward, episodes, run_actions, text_actions, tool_call_actions

from .conftest import ENVS_DIR

CAP_IDS = sorted(i for i in gym.registry if i.startswith("trace/cap-"))


def test_starter_envs_are_registered():
    """Every starter spec is registered, and nothing else under ``trace/cap-`` (the tests below run over CAP_IDS)."""
    assert CAP_IDS == sorted(f"trace/{p.stem}-v0" for p in ENVS_DIR.glob("cap-*.yaml")) and len(CAP_IDS) >= 15


@pytest.mark.parametrize("env_id", CAP_IDS)
def test_check_env(env_data, env_id):
    env = gym.make(env_id)
    check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("env_id", CAP_IDS)
def test_check_reward(env_data, env_id):
    report = check_reward(env_id, seeds=6)
    s = report.summary()
    assert s["probes"]["reference"]["mean"] == 1.0
    assert s["probes"]["do_nothing"]["max"] < 0.5
    assert "unauthorized_write" in s["probes"] and "read_only_inserted" in s["probes"]


def _write(tmp_path, doc):
    path = tmp_path / f"{doc['id']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_check_reward_catches_a_reward_that_pays_for_doing_nothing(tau2_data, tmp_path):
    doc = yaml.safe_load((ENVS_DIR / "cap-refund-policy.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["id"] = "cap-lenient-test"
    for case in doc["cases"]:  # free points that doing nothing also earns
        case["rewards"].append({"name": "free_points", "type": "forbidden_call", "tool": "list_all_product_types", "weight": 50})
    path = _write(tmp_path, doc)
    gym.register("trace/cap-lenient-test-v0", entry_point="trace_gym.capabilities.env:CapabilityEnv", kwargs={"spec": str(path)})
    try:
        with pytest.raises(RewardCheckError, match=r"seed 0: (doing nothing|refusing)"):
            check_reward("trace/cap-lenient-test-v0", seeds=[0])
    finally:
        del gym.registry["trace/cap-lenient-test-v0"]


def test_check_reward_catches_a_reward_that_counts_read_calls(tau2_data, tmp_path):
    doc = yaml.safe_load((ENVS_DIR / "cap-refund-policy.yaml").read_text())
    doc["id"] = "cap-readcount-test"
    for case in doc["cases"]:  # a 'component' that is 0 as soon as a read tool is called twice
        case["rewards"].append({"name": "one_lookup", "type": "forbidden_call", "tool": "find_user_id_by_email",
                                "args": {"email": {"startswith": "zzz"}}})
        case["rewards"].append({"name": "exactly_once", "type": "ordering", "first": {"call": "find_user_id_by_email"},
                                "then": {"call": "get_user_details"}, "if_missing": 1.0})
    path = _write(tmp_path, doc)
    gym.register("trace/cap-readcount-test-v0", entry_point="trace_gym.capabilities.env:CapabilityEnv", kwargs={"spec": str(path)})
    try:
        with pytest.raises(RewardCheckError, match="read-only calls inserted"):
            check_reward("trace/cap-readcount-test-v0", seeds=range(6))
    finally:
        del gym.registry["trace/cap-readcount-test-v0"]


def test_check_reward_refuses_non_capability_envs():
    with pytest.raises(TypeError, match="not a capability environment"):
        check_reward("trace-test/counter-v0", seeds=1)


# ----------------------------------------------------------------------------- strategies
_ENV = None


def _env():
    global _ENV
    if _ENV is None:
        _ENV = CapabilityEnv(ENVS_DIR / "cap-tool-call-precision.yaml")
    return _ENV


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(text_actions())
def test_text_actions_never_crash_an_env(tau2_data, action):
    env = _env()
    env.reset(seed=1)
    before = env.state_fingerprint()
    obs, r, term, trunc, info = env.step(action)
    assert isinstance(obs, str) and 0.0 <= r <= 1.0
    if "action_error" in info:
        assert env.state_fingerprint() == before


def test_tool_call_actions_parse_to_calls_of_the_envs_tools(tau2_data):
    env = _env()
    _, info = env.reset(seed=1)
    names = {t["function"]["name"] for t in info["tools"]}

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(tool_call_actions(info["tools"]))
    def check(action):
        from trace_gym.core.toolcalls import parse_action

        parsed = parse_action(action)
        assert parsed.error is None and parsed.calls and parsed.calls[0][0] in names
        env.reset(seed=1)
        before = env.state_fingerprint()
        _, _, _, _, step_info = env.step(action)
        if step_info.get("tool_errors"):
            assert env.state_fingerprint() == before, "a rejected call changed the database"

    check()


def test_episodes_strategy_runs_whole_episodes(tau2_data):
    env = _env()

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(episodes(env))
    def check(ep):
        seed, actions = ep
        reward, info, transcript = run_actions(env, seed, actions)
        assert 0.0 <= reward <= 1.0 and "reward_info" in info

    check()


@pytest.mark.parametrize("env_id", CAP_IDS)
def test_check_reward_holds_at_every_knob_extreme(env_data, env_id):
    spec = gym.spec(env_id).kwargs["spec"]
    from trace_gym.capabilities.spec import load_spec

    for name, knob in load_spec(spec).data.get("difficulty", {}).items():
        for value in (knob["min"], knob["max"]):
            check_reward(env_id, seeds=[value_seed(name, value)], env_kwargs={"difficulty": {name: value}})


def value_seed(name: str, value: float) -> int:
    """A different (but fixed) seed per knob setting, so the extremes see varied episodes."""
    return sum(map(ord, f"{name}={value}")) % 997
