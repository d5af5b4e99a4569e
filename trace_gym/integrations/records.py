"""Episodes as plain records, for any RL library.

:func:`collect_episodes` plays one episode per seed with any policy and returns plain
records (messages, actions, rewards, reward breakdown), so a library can do its own
credit assignment::

    from trace_gym.integrations.records import collect_episodes

    records = collect_episodes("trace/cap-refund-policy-v0", lambda obs, info: my_model(obs), seeds=range(16))

Each episode is played through :class:`trace_gym.episode.Episode`, as every rollout of
trace-gym is: the same steps, the same early ending, the same record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..episode import Episode

__all__ = ["EpisodeRecord", "collect_episodes", "MAX_STEPS"]

MAX_STEPS = "collect_max_steps"
"""The termination reason of an episode :func:`collect_episodes` ended at its ``max_steps``."""


@dataclass
class EpisodeRecord:
    """One played episode (text level)."""

    seed: int
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    reward_info: dict[str, Any] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    termination_reason: str | None = None
    reset_info: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def steps(self) -> int:
        return len(self.actions)


def _as_policy_fn(policy: Any) -> Callable[[str, dict[str, Any]], str]:
    act = getattr(policy, "act", None)
    if callable(act):  # a trace_gym.policies Policy: act(messages, tools)
        return lambda obs, info: act(list(info.get("messages") or [{"role": "user", "content": obs}]), list(info.get("tools") or []))
    if callable(policy):
        return policy
    raise TypeError(f"policy must be callable as policy(observation, info) or have act(messages, tools); got {type(policy).__name__}")


def collect_episodes(
    env: Any,
    policy_fn: Any,
    seeds: Iterable[int],
    *,
    options: dict[str, Any] | None = None,
    max_steps: int | None = None,
) -> list[EpisodeRecord]:
    """Play one episode per seed and return the records.

    ``env``: a Gymnasium env instance or a registered env id.  ``policy_fn``:
    ``policy_fn(observation, info) -> action`` or an object with
    ``act(messages, tools)`` (a trace-gym policy).  ``max_steps`` ends an episode that
    the env would let run longer after that many actions: it is then truncated
    (termination reason :data:`MAX_STEPS`) and scored as the env scores a truncated
    episode (:meth:`trace_gym.episode.Episode.cut`; its ``rewards`` end with that score).
    ``reward`` is the score of the episode's last step (or of its cut).
    """
    import gymnasium as gym

    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if isinstance(env, str):
        import trace_gym  # noqa: F401  (registers trace/* ids)

        env = gym.make(env, disable_env_checker=True)
    fn = _as_policy_fn(policy_fn)
    reset = getattr(policy_fn, "reset", None) if hasattr(policy_fn, "act") else None
    policy_id = str(getattr(policy_fn, "policy_id", None) or getattr(policy_fn, "__name__", None) or type(policy_fn).__name__)
    records = []
    for seed in seeds:
        if callable(reset):  # per-episode policy state (e.g. a scripted policy's position)
            reset(int(seed))
        ep = Episode(env, policy_id, int(seed), options)
        ep.start()
        while not ep.done:
            if max_steps is not None and len(ep.traj.actions) >= max_steps:
                ep.cut(MAX_STEPS)
                break
            ep.apply(fn(ep.observation, ep.info))
        final = ep.final_reward
        t = ep.finish()
        records.append(EpisodeRecord(
            seed=t.seed, actions=t.actions, observations=t.observations, rewards=t.rewards, messages=t.messages,
            reward=final, reward_info=t.reward_info, terminated=t.terminated, truncated=t.truncated,
            termination_reason=t.termination_reason, reset_info=t.reset_info, seconds=t.timings["total_s"]))
    return records
