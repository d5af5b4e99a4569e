"""Continuous batching: rollouts with a continuously serving policy (``policy.serve``,
:class:`~trace_gym.policies.base.RequestQueue`).  (The env server, ``trace-gym serve``, is
:mod:`trace_gym.integrations.openenv`'s.)

:func:`~trace_gym.rollout.rollout_queue` hands a policy that can serve its episodes' requests
(:data:`~trace_gym.episode.SERVING`) the :class:`~trace_gym.episode.EpisodeQueue` as a request
queue: each episode steps as soon as its action is complete and queues its next request, and an
env whose episode ends starts the next seed at once, so no episode waits for the longest action
of a batch.  The episodes, their order and their scoring are the lock-step loop's.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import gymnasium as gym

from .episode import CONTEXT_LENGTH, Episode, EpisodeQueue, RolloutError
from .policies.base import ContextExceeded, PolicyError
from .trajectory import Trajectory

__all__ = ["serve_episodes"]


def serve_episodes(policy: Any, episodes: EpisodeQueue) -> None:
    """Play ``episodes`` through ``policy.serve``.

    An episode's ``policy_s`` is the time its requests were being served (overlapping
    other episodes').  A :class:`~trace_gym.policies.base.PolicyError` raises :class:`RolloutError`
    (``completed``: the episodes that had ended); a request the policy hands back as too long for
    its context ends that episode as truncated (``context_length``) and the others play on.
    """
    waiting: collections.deque[tuple[int, Episode]] = collections.deque()
    serving: dict[int, tuple[Episode, float]] = {}
    acting, finished = episodes.acting, episodes.finished

    def start(env: gym.Env) -> None:
        started = episodes.start(env)
        if started is not None:
            waiting.append(started)

    def next_of(j: int, ep: Episode) -> None:
        if not ep.done:
            waiting.append((j, ep))
            return
        episodes.end(j, ep)
        start(ep.env)

    class Queue:
        def take(self) -> tuple[int, Any, int] | None:
            if not waiting:
                return None
            j, ep = waiting.popleft()
            serving[j] = (ep, time.perf_counter())
            return j, (ep.messages, ep.tools), acting[j]

        def answer(self, j: int, action: str) -> None:
            ep, t0 = serving.pop(j)
            ep.traj.timings["policy_s"] += time.perf_counter() - t0
            if not isinstance(action, str):
                serving[j] = (ep, t0)
                raise PolicyError(f"returned {type(action).__name__}, not a text action")
            ep.apply(action)
            next_of(j, ep)

        def reject(self, j: int, error: ContextExceeded) -> None:
            ep, _ = serving.pop(j)
            ep.cut(CONTEXT_LENGTH)
            next_of(j, ep)

    for env in episodes.envs:
        start(env)
    try:
        policy.serve(Queue())
    except PolicyError as exc:
        raise _stopped(policy, serving, waiting, finished, str(exc)) from exc
    if serving or waiting:
        raise _stopped(policy, serving, waiting, finished, f"stopped serving with {len(serving) + len(waiting)} "
                                                            "requests unanswered")


def _stopped(policy: Any, serving: dict[int, tuple[Episode, float]], waiting: collections.deque[tuple[int, Episode]],
             finished: list[Trajectory], why: str) -> RolloutError:
    ep = next(iter(serving.values()))[0] if serving else waiting[0][1] if waiting else None
    if ep is None:  # nothing was being served: the last episode that ended stands for the run
        return RolloutError(f"policy {policy.policy_id!r}: {why}", finished[-1] if finished else Trajectory(
            env_id="?", policy_id=policy.policy_id, seed=-1), finished)
    partial = ep.finish()
    return RolloutError(f"policy {policy.policy_id!r} failed at step {partial.num_steps} of seed {partial.seed}: {why}",
                        partial, finished)
