"""Episodes being played, and the queue a rollout plays them from.

* :class:`Episode` is one episode in play: its env, its trajectory so far, what the policy sees.
* :class:`EpisodeQueue` is the schedule of one rollout: one episode per seed, played through a
  few env slots, each slot starting its next episode as soon as its own ends.  Two runners play
  it: lock step (:func:`trace_gym.rollout.rollout_queue`: one policy call per turn for every
  episode in play) and continuous serving (:func:`trace_gym.batching.serve_episodes`: a policy
  with ``serve`` answers each action as soon as it is complete).  :func:`rollout_mode` says which
  one a rollout uses.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from .policies.base import Policy, reset_policy, supports
from .trajectory import Trajectory

__all__ = ["Episode", "EpisodeQueue", "RolloutError", "CONTEXT_LENGTH", "LOCK_STEP", "SERVING", "rollout_mode",
           "mode_note"]

CONTEXT_LENGTH = "context_length"
"""The termination reason of an episode ended because the policy's context was full."""

LOCK_STEP = "lock step"
SERVING = "continuous serving"


def rollout_mode(policy: Any, slots: int) -> str:
    """How a rollout of ``slots`` env slots plays: :data:`SERVING` when there are several and the policy
    serves requests continuously (``policy.serve``, :class:`~trace_gym.policies.base.RequestQueue`),
    else :data:`LOCK_STEP` (one ``act_batch`` per turn of the episodes in play)."""
    return SERVING if slots > 1 and supports(policy, "serve") else LOCK_STEP


def mode_note(policy: Any, slots: int) -> str:
    """What a progress line says of a rollout's mode: ``" (4 slots, lock step)"``; nothing for one slot."""
    return f" ({slots} slots, {rollout_mode(policy, slots)})" if slots > 1 else ""


class RolloutError(RuntimeError):
    """The policy failed mid-episode.

    :attr:`trajectory` holds the failed episode so far; :attr:`completed` the episodes
    of the same lock-step batch that had already finished (they are complete and valid).
    """

    def __init__(self, message: str, trajectory: Trajectory, completed: list[Trajectory] | None = None):
        super().__init__(message)
        self.trajectory = trajectory
        self.completed = list(completed or [])


def _env_id(env: gym.Env) -> str:
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return spec.id
    return type(env.unwrapped).__name__


class Episode:
    """One episode being played: its env, the :class:`Trajectory` under construction, what the policy sees.

    Every place that plays an episode keeps its books here, so a step, an early end and the
    end-of-episode record are written once:

    * :meth:`start` resets the env (``seed`` and ``options`` of the constructor);
    * :meth:`apply` steps it with one action and returns Gymnasium's 5-tuple;
    * :meth:`cut` ends it between steps for a reason of the caller's (the policy's context is
      full, a step or token limit of the caller's), scored as the env scores a truncated episode;
    * :meth:`finish` returns the finished :class:`Trajectory`.

    :attr:`messages`, :attr:`tools` and :attr:`info` are what the last reset or step said
    (``info``: its whole info dict).  ``seed`` ``None`` resets the env without a seed (it goes on
    with its own random stream, as Gymnasium's ``reset(seed=None)`` does; the trajectory's seed is then
    -1).  Errors: :meth:`apply` or :meth:`cut` before :meth:`start` or after the episode ended raise
    ``RuntimeError``; an empty ``reason`` is a ``ValueError``.
    """

    def __init__(self, env: gym.Env, policy_id: str, seed: int | None, options: dict[str, Any] | None):
        self.env = env
        self._seed = None if seed is None else int(seed)
        self.traj = Trajectory(env_id=_env_id(env), policy_id=policy_id, seed=-1 if seed is None else int(seed),
                               options=options)
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []
        self.info: dict[str, Any] = {}
        self.started = time.perf_counter()
        self._open = False

    def start(self) -> None:
        t0 = time.perf_counter()
        obs, info = self.env.reset(seed=self._seed, options=self.traj.options)
        self.traj.timings = {"reset_s": time.perf_counter() - t0, "policy_s": 0.0, "env_s": 0.0}
        self.traj.observations.append(obs)
        self.info = info
        self.messages = list(info.get("messages", []))
        self.tools = list(info.get("tools", []))
        self.traj.tools = self.tools
        self.traj.reset_info = {k: v for k, v in info.items() if k not in ("messages", "tools")}
        self._open = True

    @property
    def done(self) -> bool:
        return self.traj.done

    @property
    def observation(self) -> Any:
        """The last observation (of the reset or the last step)."""
        return self.traj.observations[-1] if self.traj.observations else None

    def _check_open(self, what: str) -> None:
        if not self._open:
            raise RuntimeError(f"Episode.{what}: the episode was never started")
        if self.done:
            raise RuntimeError(f"Episode.{what}: the episode of seed {self.traj.seed} has ended")

    def apply(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the env with ``action`` and record the step; returns the env's ``(obs, reward, terminated,
        truncated, info)``.  A step that ends the episode records its reward breakdown and reason."""
        self._check_open("apply")
        t0 = time.perf_counter()
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.traj.timings["env_s"] += time.perf_counter() - t0
        t = self.traj
        if "action_error" in info:
            t.action_errors.append(len(t.actions))
        t.actions.append(action)
        t.observations.append(obs)
        t.rewards.append(float(reward))
        self.info = info
        self.messages = list(info.get("messages", self.messages))
        self.tools = list(info.get("tools", self.tools))
        if terminated or truncated:
            t.terminated, t.truncated = bool(terminated), bool(truncated)
            t.reward_info = dict(info.get("reward_info") or {})
            t.termination_reason = info.get("termination_reason")
        return obs, reward, terminated, truncated, info

    def cut(self, reason: str, reward: float | None = None) -> None:
        """End the episode between steps for a reason of the caller's (e.g. :data:`CONTEXT_LENGTH`: the
        policy's context is full): scored the way the env scores a truncated episode (``truncate()``; 0.0
        for an env without one), unless the caller gives the ``reward`` itself (the env is then not asked).
        ``reason`` becomes its termination reason and ``reward_info["cut"]``; the reward is appended to
        the trajectory's rewards as the episode's last."""
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"Episode.cut needs a reason, got {reason!r}")
        self._check_open("cut")
        t = self.traj
        info: dict[str, Any] = {}
        if reward is None:
            t0 = time.perf_counter()
            truncate = getattr(self.env.unwrapped, "truncate", None)
            reward, info = truncate() if callable(truncate) else (0.0, {})
            self.traj.timings["env_s"] += time.perf_counter() - t0
        t.rewards.append(float(reward))
        t.truncated = True
        t.termination_reason = reason
        t.reward_info = {**dict(info or {}), "cut": reason}

    @property
    def final_reward(self) -> float:
        """The reward of the episode's last step (or of its cut): what an env scores the episode with."""
        return float(self.traj.rewards[-1]) if self.traj.rewards else 0.0

    def finish(self) -> Trajectory:
        """The episode as a detached, JSON-clean :class:`Trajectory` (``reward``: the sum of its step rewards)."""
        t = self.traj
        t.messages = self.messages
        transcript = getattr(self.env.unwrapped, "transcript", None)
        t.transcript = list(transcript()) if callable(transcript) else list(self.messages)
        t.reward = math.fsum(t.rewards)
        t.timings["total_s"] = time.perf_counter() - self.started
        return Trajectory.from_dict(t.to_dict())


class EpisodeQueue:
    """The episodes of one rollout: one per seed, played through the env slots ``envs``.

    :meth:`start` starts an env's next episode (episodes that end at reset are recorded at
    once and the env takes the one after); :meth:`end` records an episode that ended (and
    calls ``on_episode``); :meth:`results` gives every recorded episode in seed order.  The
    policy sees each episode's env seed as its episode seed unless ``policy_seeds`` gives
    others; a policy with ``bind_env(env)`` (one slot only) is bound to each episode's env before
    it starts.  Bad arguments are a ``ValueError``.
    """

    def __init__(self, envs: Sequence[gym.Env], policy: Policy, seeds: Sequence[int],
                 options: dict[str, Any] | Sequence[dict[str, Any] | None] | None = None,
                 policy_seeds: Sequence[int] | None = None, *, on_episode: Callable[[Trajectory], None] | None = None):
        per_episode = list(options) if isinstance(options, (list, tuple)) else [options] * len(seeds)
        if len(per_episode) != len(seeds):
            raise ValueError(f"rollout got {len(per_episode)} option sets for {len(seeds)} episodes")
        if policy_seeds is not None and len(policy_seeds) != len(seeds):
            raise ValueError(f"rollout got {len(policy_seeds)} policy seeds for {len(seeds)} episodes")
        if not envs and seeds:
            raise ValueError("rollout needs at least one env")
        if len({id(e) for e in envs}) != len(envs):
            raise ValueError("rollout needs distinct env instances")
        if min(len(envs), len(seeds)) > 1 and not supports(policy, "batchable"):
            raise ValueError(f"policy {policy.policy_id!r} plays one episode at a time; use a batch size of 1")
        if min(len(envs), len(seeds)) > 1 and supports(policy, "bind_env"):
            raise ValueError(f"policy {policy.policy_id!r} binds to the env it plays (bind_env); use one env slot")
        self.envs, self.policy, self.seeds, self.options = list(envs), policy, list(seeds), per_episode
        self.acting = [int(s) for s in (policy_seeds if policy_seeds is not None else seeds)]
        self.on_episode = on_episode
        self.finished: list[Trajectory] = []  # in the order they ended
        self._results: list[Trajectory | None] = [None] * len(seeds)
        self._next = iter(range(len(seeds)))

    @property
    def mode(self) -> str:
        """:data:`LOCK_STEP` or :data:`SERVING` (:func:`rollout_mode`)."""
        return rollout_mode(self.policy, len(self.envs))

    def start(self, env: gym.Env) -> tuple[int, Episode] | None:
        """``(index, episode)`` of ``env``'s next episode, started; ``None`` when no seed is left."""
        for j in self._next:
            ep = Episode(env, self.policy.policy_id, self.seeds[j], self.options[j])
            if len(self.envs) == 1:
                if supports(self.policy, "bind_env"):  # a policy that reads its env (the reference solution's player)
                    self.policy.bind_env(env.unwrapped)
                reset_policy(self.policy, self.acting[j])
            ep.start()
            if not ep.done:
                return j, ep
            self.end(j, ep)  # ended at reset: the env is free again
        return None

    def end(self, j: int, ep: Episode) -> None:
        """Record episode ``j``, which has ended."""
        t = self._results[j] = ep.finish()
        self.finished.append(t)
        if self.on_episode is not None:
            self.on_episode(t)

    def results(self) -> list[Trajectory]:
        """The recorded episodes in seed order."""
        return [t for t in self._results if t is not None]
