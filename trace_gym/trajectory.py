"""A played episode as a record (:class:`Trajectory`) and what identifies it in a store (:func:`episode_key`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Trajectory", "episode_key", "FORMAT_VERSION"]

FORMAT_VERSION = 1

def _jsonable(value: Any) -> Any:
    """A JSON-compatible copy of ``value`` (numpy scalars/arrays, sets, tuples, paths...)."""
    return json.loads(json.dumps(value, default=_json_default, ensure_ascii=False))


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return repr(value)


def _canonical(options: dict[str, Any] | None) -> str:
    return json.dumps(_jsonable(options or {}), sort_keys=True, ensure_ascii=False)


def episode_key(env_id: str, policy_id: str, seed: int, options: dict[str, Any] | None = None) -> tuple[str, str, int, str]:
    """What identifies an episode in a store: env id, policy id, seed and reset options."""
    return (env_id, policy_id, int(seed), _canonical(options))


@dataclass
class Trajectory:
    """One played episode.

    ``messages`` is the policy's view at the end (rejected actions and their
    feedback included); ``transcript`` is the scored conversation (without them)
    when the environment provides one.  ``rewards[i]`` is the reward of step ``i``;
    ``reward`` their sum.  ``timings`` holds seconds spent in ``reset``, in the
    policy and in ``step``, and the wall time of the episode.
    """

    env_id: str
    policy_id: str
    seed: int
    options: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    reward: float = 0.0
    reward_info: dict[str, Any] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    termination_reason: str | None = None
    action_errors: list[int] = field(default_factory=list)
    reset_info: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    version: int = FORMAT_VERSION

    @property
    def num_steps(self) -> int:
        return len(self.actions)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    @property
    def ended_with_message(self) -> bool:
        """Whether the agent brought the episode to an end: no limit stopped it (:data:`~trace_gym.core.env.LIMIT_REASONS`,
        truncation) and the agent's last turn was a message to the user, not a tool call."""
        from .core.env import LIMIT_REASONS

        if self.truncated or self.termination_reason in LIMIT_REASONS or not self.done:
            return False
        last = next((m for m in reversed(self.transcript or self.messages) if m.get("role") == "assistant"), None)
        return bool(last and not last.get("tool_calls") and str(last.get("content") or "").strip())

    @property
    def key(self) -> tuple[str, str, int, str]:
        return episode_key(self.env_id, self.policy_id, self.seed, self.options)

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        if not isinstance(d, dict):
            raise ValueError(f"a trajectory record must be a JSON object, got {type(d).__name__}")
        missing = [k for k in ("env_id", "policy_id", "seed") if k not in d]
        if missing:
            raise ValueError(f"trajectory record lacks {missing}")
        version = d.get("version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(f"trajectory format version {version!r} is not supported (expected {FORMAT_VERSION})")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown trajectory fields {unknown}")
        return cls(**d)
