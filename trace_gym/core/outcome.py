"""What counts as a successful episode: one definition for the whole library.

An episode succeeds when its reward reaches the env's success threshold, within
:data:`TOLERANCE` (floating-point products of reward components may land a hair
below 1).  The threshold is 1.0 unless the env declares its own with a
``success_threshold`` attribute (an env whose reward is a graded similarity, for
instance); generic code asks the env through :func:`success_threshold` instead of
hard-coding 1.0.  For rewards in [0, 1] and the default threshold this is τ²-bench's
rule, "reward 1 within 1e-6", so pass^k numbers match tau2's.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TOLERANCE", "DEFAULT_THRESHOLD", "is_success", "success_threshold"]

TOLERANCE = 1e-6
DEFAULT_THRESHOLD = 1.0


def is_success(reward: float | bool | None, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """Whether an outcome is a success: ``True``/``False`` as given, ``None`` is a failure,
    a number succeeds when it is at least ``threshold - TOLERANCE``."""
    if reward is None:
        return False
    if isinstance(reward, bool):
        return reward
    return float(reward) >= float(threshold) - TOLERANCE


def success_threshold(env: Any) -> float:
    """The success threshold an env declares (``success_threshold`` on the unwrapped env), else 1.0."""
    base = getattr(env, "unwrapped", env)
    value = getattr(base, "success_threshold", None)
    return DEFAULT_THRESHOLD if value is None else float(value)
