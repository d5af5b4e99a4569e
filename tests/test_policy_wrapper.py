"""PolicyWrapper: a feature of the inner policy is reached through the wrapper, one the wrapper overrides is
not; a wrapper that changes ``act`` is never bypassed by the inner policy's ``act_batch`` or ``serve``; the
Policy protocol's optional features are asked with ``supports``."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import pytest

try:
    from helpers_envs import ENV_ID
    from test_rollout_serving import LockStep, Serving, _plain
except ImportError:  # tests/ imported as a package
    from tests.helpers_envs import ENV_ID
    from tests.test_rollout_serving import LockStep, Serving, _plain

from trace_gym.episode import LOCK_STEP, SERVING, rollout_mode
from trace_gym.policies import Policy, PolicyWrapper, ScriptedPolicy, supports
from trace_gym.policies.base import FEATURES, act_batch, reset_policy
from trace_gym.policies.wrapper import unwrap
from trace_gym.rollout import rollout_queue


class Counting(PolicyWrapper):
    """Only observes: counts the actions it answers; serving may go round it."""

    bypassable = ("serve",)

    def __init__(self, inner):
        super().__init__(inner)
        self.calls = 0

    def act(self, messages, tools):
        self.calls += 1
        return self.inner.act(messages, tools)


class Shouting(PolicyWrapper):
    """Changes every answer: nothing of the inner policy's may answer round it."""

    def act(self, messages, tools):
        return self.inner.act(messages, tools).upper()


class Quiet(PolicyWrapper):
    """Changes nothing it answers: a plain wrapper forwards everything."""


class Seeded:
    policy_id = "seeded"
    accepts_seeds = True
    batchable = False

    def __init__(self):
        self.resets, self.bound, self.decisions = [], None, ["kept"]

    def act(self, messages, tools):
        return "hi"

    def act_batch(self, requests, seeds=None):
        return [f"hi {s}" for s in seeds or [None] * len(requests)]

    def reset(self, seed):
        self.resets.append(seed)

    def bind_env(self, env):
        self.bound = env

    def serve(self, queue):
        raise AssertionError("not asked here")


def test_a_plain_wrapper_forwards_every_feature_and_attribute():
    inner = Seeded()
    w = Quiet(inner)
    assert isinstance(w, Policy)
    assert all(supports(w, f) == supports(inner, f) for f in FEATURES)
    assert w.policy_id == "seeded" and w.decisions is inner.decisions and w.unwrapped is inner
    assert act_batch(w, [([], []), ([], [])], [4, 5]) == ["hi 4", "hi 5"]  # accepts_seeds reached the inner policy
    reset_policy(w, 7)
    w.bind_env("env")
    assert inner.resets == [7] and inner.bound == "env"
    w.policy_id = "renamed"  # names the wrapper, not the policy it wraps
    assert (w.policy_id, inner.policy_id) == ("renamed", "seeded")
    with pytest.raises(AttributeError):
        w.no_such_thing  # noqa: B018


def test_a_wrapper_that_changes_act_withholds_act_batch_and_serve():
    inner = Seeded()
    w = Shouting(inner)
    assert not supports(w, "act_batch") and not supports(w, "serve")
    assert supports(w, "reset") and supports(w, "bind_env") and not supports(w, "batchable")  # the rest is forwarded
    assert act_batch(w, [([], []), ([], [])], [4, 5]) == ["HI", "HI"]  # through the wrapper's act, never round it
    assert Counting(inner).serve == inner.serve and not supports(Counting(inner), "act_batch")


def test_rollouts_never_go_round_a_wrapper_that_changes_act():
    seeds = list(range(6))
    lock = rollout_queue([gym.make(ENV_ID) for _ in range(3)], LockStep(), seeds)
    assert rollout_mode(Shouting(Serving(slots=3)), 3) == LOCK_STEP
    shouted = rollout_queue([gym.make(ENV_ID) for _ in range(3)], Shouting(Serving(slots=3)), seeds)
    assert [t.actions for t in shouted] == [[a.upper() for a in t.actions] for t in shouted]
    assert shouted[0].actions != lock[0].actions  # the wrapper's act is what answered
    counting = Counting(Serving(slots=3))
    assert rollout_mode(counting, 3) == SERVING  # it said serving may bypass it
    assert _plain(rollout_queue([gym.make(ENV_ID) for _ in range(3)], counting, seeds)) == _plain(lock)
    assert counting.calls == 0 and counting.inner.held_most == 3


def test_subclasses_are_checked_when_defined():
    with pytest.raises(TypeError, match="but not act"):
        type("BatchOnly", (PolicyWrapper,), {"act_batch": lambda self, requests, seeds=None: []})
    with pytest.raises(TypeError, match="only act_batch and serve"):
        type("Odd", (PolicyWrapper,), {"bypassable": ("reset",)})


def test_wrappers_copy_pickle_and_unwrap():
    w = Shouting(Quiet(ScriptedPolicy(["a", "b"])))
    assert unwrap(w) is w.inner.inner and unwrap("not a wrapper") == "not a wrapper"
    assert copy.deepcopy(w).act([], []) == "A"
    assert pickle.loads(pickle.dumps(w)).act([], []) == "A"


def test_supports_reads_flags_with_their_defaults_and_rejects_unknown_features():
    plain = LockStep()  # says nothing of its flags
    assert supports(plain, "batchable") and not supports(plain, "accepts_seeds") and supports(plain, "act_batch")
    assert not supports(plain, "serve") and not supports(plain, "bind_env") and not supports(plain, "reset")
    script = ScriptedPolicy(["a"])  # a list keeps its place per episode: not batchable
    assert not supports(script, "batchable") and supports(script, "reset")
    with pytest.raises(ValueError, match="unknown policy feature 'teleport'"):
        supports(script, "teleport")
