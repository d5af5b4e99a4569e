"""The one Episode: its contract (apply, cut, finish, checked arguments) and the places that play through it."""

from __future__ import annotations

import gymnasium as gym
import pytest

import tests.core.counter_env  # noqa: F401  (registers trace-test/counter-v0)
from trace_gym.capabilities.calibrate import play_groups
from trace_gym.core.toolcalls import format_tool_call
from trace_gym.episode import CONTEXT_LENGTH, Episode, EpisodeQueue
from trace_gym.integrations.chat import ChatEpisode
from trace_gym.policies.base import PolicyError
from trace_gym.rollout import rollout_queue


def _env():
    return gym.make("trace-test/counter-v0", disable_env_checker=True)


def test_episode_steps_cuts_and_records_once():
    env = _env()
    ep = Episode(env, "p", 3, None)
    with pytest.raises(RuntimeError, match="never started"):
        ep.apply("hi")
    ep.start()
    assert ep.observation == ep.traj.observations[0] and ep.info["tools"] and not ep.done
    obs, reward, terminated, truncated, info = ep.apply(format_tool_call("add", {"amount": 1}))
    assert (terminated, truncated) == (False, False) and info is ep.info and ep.observation == obs
    with pytest.raises(ValueError, match="reason"):
        ep.cut("")
    ep.cut(CONTEXT_LENGTH)
    twin = _env()  # the same episode, truncated by the env's own rule
    twin.reset(seed=3)
    twin.step(format_tool_call("add", {"amount": 1}))
    score, parts = twin.unwrapped.truncate()
    assert ep.done and ep.final_reward == score and ep.traj.reward_info == {**parts, "cut": CONTEXT_LENGTH}
    with pytest.raises(RuntimeError, match="has ended"):
        ep.apply("more")
    with pytest.raises(RuntimeError, match="has ended"):
        ep.cut(CONTEXT_LENGTH)
    t = ep.finish()
    assert t.truncated and t.termination_reason == CONTEXT_LENGTH and t.rewards[-1] == score and len(t.rewards) == 2


def test_a_cut_with_the_callers_reward_does_not_ask_the_env():
    ep = Episode(_env(), "p", 0, None)
    ep.start()
    ep.cut("token_budget", reward=0.25)
    assert ep.final_reward == 0.25 and ep.traj.reward_info == {"cut": "token_budget"}


def test_an_unseeded_episode_goes_on_with_the_envs_stream():
    env = _env()
    env.reset(seed=5)
    ep = Episode(env, "p", None, None)
    ep.start()
    assert ep.traj.seed == -1 and ep.messages


class _Binding:
    """Reads the target off the env it is bound to, and reaches it."""

    policy_id = "binding"

    def __init__(self):
        self.env, self.bound = None, []

    def bind_env(self, env):
        self.env = env
        self.bound.append(env)

    def act(self, messages, tools):
        if self.env.count < self.env.target:
            return format_tool_call("add", {"amount": self.env.target - self.env.count})
        return "bye"


def test_a_policy_that_binds_its_env_plays_one_slot_bound_to_each_episode():
    envs = [_env(), _env()]
    with pytest.raises(ValueError, match="bind_env"):
        EpisodeQueue(envs, _Binding(), [0, 1])
    policy = _Binding()
    trajs = rollout_queue(envs[:1], policy, [0, 1])
    assert policy.bound == [envs[0].unwrapped] * 2 and [t.reward for t in trajs] == [1.0, 1.0]
    rewards, _, errors = play_groups(_env, policy, [4], 2, slots=4)  # a binding policy plays one slot
    assert rewards == {4: [1.0, 1.0]} and not errors


class _Failing:
    """Says bye at once, except that it fails on every episode of env seed 1."""

    policy_id = "failing"
    batch_size = 2

    def __init__(self):
        self.seed = None

    def reset(self, seed=None):
        self.seed = seed

    def act(self, messages, tools):
        if self.seed is not None and self.seed // 1000 == 1:
            raise PolicyError("cannot act")
        return "bye"


def test_play_groups_scores_a_failed_episode_zero_and_plays_the_others():
    seen = []
    rewards, cases, errors = play_groups(_env, _Failing(), [0, 1, 2], 2, slots=1, on_episode=seen.append)
    assert rewards[1] == [0.0, 0.0] and len(errors) == 2 and all("cannot act" in e for e in errors)
    assert len(rewards[0]) == len(rewards[2]) == 2 and len(seen) == 6
    with pytest.raises(ValueError, match="samples"):
        play_groups(_env, _Failing(), [0], 0, slots=1)


def test_chat_episode_closes_as_a_step_limit_truncation():
    chat = ChatEpisode(_env())
    with pytest.raises(RuntimeError):
        chat.act("hi")
    opening = chat.open(0)
    assert opening[0]["role"] == "system" and not chat.done
    new, reward, done, _ = chat.act(format_tool_call("add", {"amount": 1}))
    assert not done and new
    score = chat.close_scored()
    assert chat.done and score == chat.episode.final_reward and chat.info["reward_info"]["cut"] == "max_steps"
    with pytest.raises(RuntimeError):
        chat.act("more")
