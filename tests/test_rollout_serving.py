"""Rollouts with a continuously serving policy (``policy.serve``): the same episodes as lock step,
whatever order the policy answers in; a request too long for the context ends just its episode;
a policy failure raises with the finished episodes kept."""

from __future__ import annotations

import gymnasium as gym
import pytest

try:
    from helpers_envs import ENV_ID, solver
except ImportError:  # tests/ imported as a package
    from tests.helpers_envs import ENV_ID, solver

from trace_gym.policies.base import ContextExceeded, PolicyError
from trace_gym.rollout import CONTEXT_LENGTH, RolloutError, collect, rollout_queue


def dawdler(messages, tools):
    """Episodes of different lengths: requests of even length wait one turn before solving."""
    first = sum(x["role"] == "assistant" for x in messages) == 0
    return "Let me see." if first and len(messages[1]["content"]) % 2 == 0 else solver(messages, tools)


class LockStep:
    policy_id = "p"

    def act(self, messages, tools):
        return dawdler(messages, tools)

    def act_batch(self, requests):
        return [dawdler(m, t) for m, t in requests]


class Serving(LockStep):
    """Takes up to ``slots`` requests, answers the newest first, one per round, taking again in between."""

    def __init__(self, slots=3, reject=None, fail_after=None):
        self.slots, self.reject, self.fail_after = slots, reject or (lambda m: False), fail_after
        self.held_most = 0
        self.answered = 0

    def serve(self, queue):
        held = []
        while True:
            while len(held) < self.slots:
                item = queue.take()
                if item is None:
                    break
                key, (messages, tools), _seed = item
                if self.reject(messages):
                    queue.reject(key, ContextExceeded("too long", [0], [9999], 100))
                    continue
                held.append((key, messages, tools))
            self.held_most = max(self.held_most, len(held))
            if not held:
                return
            if self.fail_after is not None and self.answered >= self.fail_after:
                raise PolicyError("the model went away")
            key, messages, tools = held.pop()
            self.answered += 1
            queue.answer(key, dawdler(messages, tools))


def _plain(trajs):
    return [(t.seed, t.actions, t.rewards, t.observations, t.terminated, t.truncated, t.termination_reason) for t in trajs]


def test_served_episodes_are_the_lock_step_episodes():
    seeds = list(range(9))
    lock = rollout_queue([gym.make(ENV_ID) for _ in range(3)], LockStep(), seeds)
    policy = Serving(slots=3)
    ended: list[int] = []
    served = rollout_queue([gym.make(ENV_ID) for _ in range(3)], policy, seeds, on_episode=lambda t: ended.append(t.seed))
    assert _plain(served) == _plain(lock) and sorted(ended) == seeds
    assert policy.held_most == 3  # the envs kept the policy's slots full
    assert all(0 < t.timings["policy_s"] <= t.timings["total_s"] for t in served)  # each episode's share of the serving


def test_collect_serves_and_resumes(tmp_path):
    seeds = list(range(6))
    trajs = collect(ENV_ID, Serving(slots=2), seeds, store=tmp_path / "s.jsonl", batch_size=2)
    lock = collect(ENV_ID, LockStep(), seeds, store=tmp_path / "l.jsonl", batch_size=2)
    assert _plain(trajs) == _plain(lock)


def test_a_request_too_long_for_the_context_ends_only_its_episode():
    seeds = list(range(6))
    # the second turn of every episode whose first answer dawdled is "too long"
    policy = Serving(slots=3, reject=lambda m: len(m[1]["content"]) % 2 == 0 and sum(x["role"] == "assistant" for x in m) == 1)
    served = rollout_queue([gym.make(ENV_ID) for _ in range(3)], policy, seeds)
    lock = {t.seed: t for t in rollout_queue([gym.make(ENV_ID) for _ in range(3)], LockStep(), seeds)}
    cut = [t for t in served if t.termination_reason == CONTEXT_LENGTH]
    assert cut and len(cut) < len(seeds)
    for t in served:
        if t in cut:
            assert t.truncated and t.reward_info.get("cut") == CONTEXT_LENGTH and len(t.actions) == 1
        else:
            assert t.actions == lock[t.seed].actions and t.reward == lock[t.seed].reward


def test_a_policy_failure_raises_and_keeps_what_finished():
    seeds = list(range(6))
    finished = []
    with pytest.raises(RolloutError, match="the model went away") as info:
        rollout_queue([gym.make(ENV_ID) for _ in range(2)], Serving(slots=2, fail_after=7), seeds,
                      on_episode=finished.append)
    assert info.value.completed == finished and info.value.trajectory.seed not in {t.seed for t in finished}


def test_a_policy_that_stops_with_requests_unanswered_is_an_error():
    class Quitter(LockStep):
        def serve(self, queue):
            queue.take()

    with pytest.raises(RolloutError, match="unanswered"):
        rollout_queue([gym.make(ENV_ID) for _ in range(2)], Quitter(), [0, 1])


def test_one_env_plays_in_lock_step_even_with_serve():
    class NoServe(Serving):
        def serve(self, queue):
            raise AssertionError("one env needs no continuous serving")

    [t] = rollout_queue([gym.make(ENV_ID)], NoServe(), [0])
    assert t.reward == 1.0
