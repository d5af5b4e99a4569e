"""The contract every registered environment must honour (one suite over all ids).

Modelled on Gymnasium's own ``tests/envs/test_envs.py``: every ``trace/*`` id that
``import trace_gym`` registers is checked automatically, plus the test-only core env:
the env checker, determinism, fuzzed and hostile actions (never an exception, rejected
ones change nothing), a pickle round trip that resumes the same episode, and vector envs
(sync, async without shared memory, and the clear error with it).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.testing import hostile_actions

ENV_IDS = sorted(i for i in gym.registry if i.startswith("trace/")) + ["trace-test/counter-v0"]


def _make(env_id: str):
    env = gym.make(env_id)
    env.reset(seed=0)  # data folders are read lazily: make sure they exist
    return env


@pytest.fixture(scope="module", params=ENV_IDS)
def env_id(request):
    return request.param


def test_every_benchmark_env_and_starter_spec_is_registered():
    """The contract below runs over ENV_IDS: each benchmark env and each starter spec must be in it."""
    envs_dir = Path(__file__).resolve().parents[1] / "envs"
    expected = {f"trace/tau2-{d}-v0" for d in ("airline", "mock", "retail", "telecom")} | {"trace/toolsandbox-v0"}
    expected |= {f"trace/{p.stem}-v0" for p in envs_dir.glob("cap-*.yaml")}
    assert len(expected) >= 20 and expected <= set(ENV_IDS), sorted(expected - set(ENV_IDS))


def test_check_env(env_id):
    env = _make(env_id)
    check_env(env.unwrapped, skip_render_check=False)
    env.close()


def _script(info) -> list[str]:
    tools = [t["function"]["name"] for t in info["tools"]]
    first = tools[0] if tools else "no_such_tool"
    return [
        "Hello, could you tell me more about what you need?",
        json.dumps({"name": first, "arguments": {}}),
        '{"name": "broken", "arguments": {',
        "<tool_call>" + json.dumps({"name": "definitely_not_a_tool", "arguments": {"x": 1}}) + "</tool_call>",
        "Thank you, goodbye. ###STOP###",
    ]


def _run(env_id: str, seed: int):
    env = _make(env_id)
    obs, info = env.reset(seed=seed)
    trace = [obs]
    for action in _script(info):
        obs, r, term, trunc, info = env.step(action)
        trace.append((obs, r, term, trunc, json.dumps(info.get("reward_info"), sort_keys=True, default=str)))
        if term or trunc:
            break
    trace.append(json.dumps(info["messages"], sort_keys=True, default=str))
    env.close()
    return trace


def test_same_seed_same_episode(env_id):
    assert _run(env_id, 123) == _run(env_id, 123)


def _play(env, actions: list[str]) -> list:
    trace = []
    for action in actions:
        obs, r, term, trunc, info = env.step(action)
        trace.append((obs, r, term, trunc, json.dumps(info, sort_keys=True, default=str)))
        if term or trunc:
            break
    return trace


def test_pickle_round_trip_resumes_the_same_episode(env_id):
    """A pickled env (fresh or mid-episode) unpickles into one that plays on exactly like the original."""
    env = _make(env_id)
    fresh = pickle.loads(pickle.dumps(env))
    assert type(fresh.unwrapped) is type(env.unwrapped)
    obs, info = env.reset(seed=7)
    assert fresh.reset(seed=7)[0] == obs
    actions = _script(info)
    first = _play(env, actions[:1])
    _play(fresh, actions[:1])
    if not (first[-1][2] or first[-1][3]):  # still running: pickle mid-episode
        copy = pickle.loads(pickle.dumps(env))
        assert copy.unwrapped.state_fingerprint() == env.unwrapped.state_fingerprint()
        assert copy.unwrapped.transcript() == env.unwrapped.transcript()
        assert _play(copy, actions[1:]) == _play(env, actions[1:]) == _play(fresh, actions[1:])
    env.close()


def _snapshot(env) -> tuple:
    u = env.unwrapped
    return (json.dumps(u.np_random.bit_generator.state, sort_keys=True, default=str), u.np_random_seed,
            u.state_fingerprint(), json.dumps(u.transcript(), sort_keys=True, default=str), u.step_count,
            u.termination_reason)


def test_a_reset_the_env_refuses_changes_nothing(env_id):
    """Options the env refuses raise from ``reset`` and leave the episode in play as it was: same generator,
    world, transcript and step count, and it plays on exactly like a twin that never saw the failed reset."""
    from trace_gym.core.env import declared_reset_options

    env, twin = _make(env_id), _make(env_id)
    declared = declared_reset_options(env) or frozenset()
    refused = 0
    for key in sorted(declared):
        for junk in ("no-such-value", {"no": "such"}, -1):
            for e in (env, twin):
                _, info = e.reset(seed=7)
            actions = _script(info)
            _play(env, actions[:1])
            _play(twin, actions[:1])
            before = _snapshot(env)
            try:
                env.reset(seed=99, options={key: junk})
            except (ValueError, TypeError, KeyError):
                refused += 1
            else:
                continue
            assert _snapshot(env) == before, (key, junk)
            assert _play(env, actions[1:]) == _play(twin, actions[1:]), (key, junk)
    assert refused or not declared, f"{env_id} refused none of {sorted(declared)} with junk values"
    env.close()
    twin.close()


def _fuzz_actions(tool_names: list[str]):
    names = st.sampled_from(tool_names or ["x"]) | st.text(min_size=1, max_size=12)
    junk = st.none() | st.integers() | st.text(max_size=8) | st.lists(st.integers(), max_size=3) | st.floats(allow_nan=False)
    args = st.dictionaries(st.text(min_size=1, max_size=12), junk, max_size=4)
    call = st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}), names, args)
    hermes = st.builds(lambda c: f"<tool_call>{c}</tool_call>", call)
    truncated = call.map(lambda s: s[: max(1, len(s) // 2)])
    return st.one_of(
        st.text(max_size=200),
        call,
        hermes,
        truncated,
        st.builds(lambda n: f"{n}(", names),
        st.text(alphabet="{}[]\"':,<>/", max_size=50),
        st.just("x" * 20_000),
        st.just("<tool_call>" * 3),
        hostile_actions(tool_names, max_size=2_000),  # deep nesting, repeated tags, huge values, unicode
    )


def test_fuzzed_actions_never_raise_and_invalid_ones_change_nothing(env_id):
    env = _make(env_id)
    _, info = env.reset(seed=0)
    tool_names = [t["function"]["name"] for t in info["tools"]]

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_fuzz_actions(tool_names))
    def check(action):
        _, info = env.reset(seed=0)
        u = env.unwrapped
        fp_before = u.state_fingerprint()
        transcript_before = u.transcript()
        obs, reward, term, trunc, info = env.step(action)
        assert isinstance(obs, str) and env.observation_space.contains(obs)
        assert 0.0 <= reward <= 1.0
        if "action_error" in info:
            assert u.state_fingerprint() == fp_before
            assert u.transcript() == transcript_before
        new_calls = [m for m in info["messages"][len(transcript_before):] if m["role"] == "assistant" and m.get("tool_calls")]
        if new_calls and len(info.get("tool_errors", [])) == len(new_calls[0]["tool_calls"]):
            assert u.state_fingerprint() == fp_before, "a rejected tool call changed state"

    check()
    env.close()


def test_async_vector_env_refuses_shared_memory_with_a_clear_error(env_id):
    from trace_gym.core.spaces import SharedMemoryError

    _make(env_id).close()  # skips cleanly when the env's data is missing
    with pytest.raises(SharedMemoryError, match=r'vector_kwargs=\{"shared_memory": False\}'):
        gym.make_vec(env_id, num_envs=2, vectorization_mode="async")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec(env_id, mode):
    _make(env_id).close()  # skips cleanly when the env's data is missing
    kwargs = {"shared_memory": False} if mode == "async" else {}
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, vector_kwargs=kwargs)
    obs, info = venv.reset(seed=[1, 2])
    assert len(obs) == 2 and all(isinstance(o, str) for o in obs)
    obs, rew, term, trunc, info = venv.step(("Hello there.", "Hello there."))
    assert len(obs) == 2 and rew.shape == (2,)
    venv.close()
