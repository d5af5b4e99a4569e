"""Counting the episodes a small-context model's context ends.

τ²-bench prompts (policy text plus tool list) are over 5,000 tokens, and every turn
adds to them.  The model policy itself says when a prompt no longer fits its context
(:class:`~trace_gym.policies.base.ContextExceeded`), and the rollout ends those episodes
as the env scores a truncated episode (termination reason ``context_length``) while the
others play on.  :class:`ContextGuard` wraps a model policy and counts them
(:attr:`ContextGuard.fired`), so the demo can report how often that happened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..policies.base import ContextExceeded, Request, RequestQueue, act_batch
from ..policies.wrapper import PolicyWrapper

__all__ = ["ContextGuard"]


class ContextGuard(PolicyWrapper):
    """Counts the requests of ``inner`` (a model policy, plain, adapter or routed) that its
    context could not take (:attr:`fired`), each of which ends its episode; the policy's
    :class:`~trace_gym.policies.base.ContextExceeded` passes on to the rollout.  Every other feature
    is the wrapped policy's (``policy_id``, ``accepts_seeds``, ``batch_size``, ``reset``,
    ``decisions``, ``serve``, ...)."""

    def __init__(self, inner: Any):
        super().__init__(inner)
        self.fired = 0

    @property
    def policy_id(self) -> str:
        return self.inner.policy_id

    @policy_id.setter
    def policy_id(self, value: str) -> None:  # the guard is transparent: naming it names the policy it guards
        self.inner.policy_id = value

    @property
    def serve(self) -> Callable[[RequestQueue], None]:
        """The wrapped policy's ``serve``, counting the requests it rejects (an :class:`AttributeError`, so no
        ``serve`` here, when it has none)."""
        return self._serving(self.inner.serve)

    def _serving(self, serve: Callable[[RequestQueue], None]) -> Callable[[RequestQueue], None]:
        guard = self

        class Counting:
            def __init__(self, queue: RequestQueue):
                self.queue = queue

            def take(self) -> Any:
                return self.queue.take()

            def answer(self, key: Any, action: str) -> None:
                self.queue.answer(key, action)

            def reject(self, key: Any, error: ContextExceeded) -> None:
                guard.fired += 1
                self.queue.reject(key, error)

        return lambda queue: serve(Counting(queue))

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        try:
            return self.inner.act(messages, tools)
        except ContextExceeded:
            self.fired += 1
            raise

    def act_batch(self, requests: Sequence[Request], seeds: Sequence[int | None] | None = None) -> list[str]:
        try:
            return act_batch(self.inner, requests, seeds)
        except ContextExceeded as exc:
            self.fired += len(set(exc.rows))
            raise
