"""A trace env in SkyRL-gym: registered in ``skyrl_gym``'s registry, made and stepped with SkyRL-gym's own API."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.extras import need  # noqa: E402

skyrl_gym = need("skyrl_gym")

import trace_gym  # noqa: E402,F401
from trace_gym.integrations.skyrl import ENTRY_POINT, dataset_rows, register  # noqa: E402

pytestmark = pytest.mark.usefixtures("tau2_data")
ENV = "trace/cap-refund-policy-v0"


@pytest.mark.parametrize("seed", [0, 1, 5])
def test_skyrl_make_and_step_play_the_reference_episode_as_the_env_does(seed):
    register(ENV)
    register(ENV)  # again: no-op
    assert skyrl_gym.spec(ENV).entry_point == ENTRY_POINT
    env = skyrl_gym.make(ENV, env_config={}, extras={"extra_info": {"seed": seed}})
    assert isinstance(env, skyrl_gym.Env)
    ref = gym.make(ENV, disable_env_checker=True)
    _, info = ref.reset(seed=seed)
    chat, meta = env.init([])
    assert meta["seed"] == seed and chat[0]["role"] == "system" and chat[-1]["content"] == info["messages"][-1]["content"]
    assert all(t["function"]["name"] in chat[0]["content"] for t in info["tools"])  # the tools are listed
    for action in ref.unwrapped.reference_actions():
        before = len(ref.unwrapped.messages)
        _, reward, term, trunc, info = ref.step(action)
        out = env.step(action)
        assert out["done"] == (term or trunc) and out["reward"] == reward
        if out["done"]:
            assert out["metadata"]["reward_info"] == info["reward_info"] and reward == 1.0
            break
        replies = [m["content"] for m in info["messages"][before:] if m["role"] != "assistant"]
        assert replies and all(r in "".join(o["content"] for o in out["observations"]) for r in replies)
        assert all(o["role"] == "user" for o in out["observations"])
    assert out["done"]
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("hello")
    env.close()


def test_skyrl_dataset_rows_are_the_episodes_openings():
    rows = dataset_rows(ENV, [2, 3])
    assert [r["extra_info"]["seed"] for r in rows] == [2, 3] and {r["env_class"] for r in rows} == {ENV}
    register(ENV)
    env = skyrl_gym.make(ENV, env_config={}, extras=rows[0])
    assert env.init(rows[0]["prompt"])[0] == rows[0]["prompt"]
    with pytest.raises(ValueError, match="not the opening"):
        skyrl_gym.make(ENV, env_config={}, extras=rows[0]).init(rows[1]["prompt"])


def test_skyrl_register_refuses_an_unknown_id():
    with pytest.raises(gym.error.Error):
        register("trace/no-such-env-v0")
