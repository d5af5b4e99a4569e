"""Keeping a small-context model inside its context window.

τ²-bench prompts (policy text plus tool list) are over 5,000 tokens, and every turn
adds to them.  :class:`ContextGuard` wraps a model policy: a request whose prompt
would not fit (prompt plus ``max_new_tokens`` beyond the model's context) is answered
with :data:`GIVE_UP` — the agent ends the conversation, which scores like any other
failure — instead of failing the whole lock-step batch.  :attr:`ContextGuard.fired`
counts how often that happened, so the demo can report it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..policies.base import Request, act_batch

__all__ = ["ContextGuard", "GIVE_UP", "chat_core"]

GIVE_UP = "I'm sorry, this conversation has grown too long for me to continue. ###STOP###"


def chat_core(policy: Any) -> Any:
    """The :class:`~trace_gym.policies.chat.ChatPolicy` (transformers or llama.cpp) inside a plain, adapter or
    routed policy."""
    seen = policy
    for attr in ("adapters", "base"):
        inner = getattr(seen, attr, None)
        if inner is not None:
            seen = inner
    if not all(hasattr(seen, a) for a in ("render_prompt", "tokenizer", "context_limit", "max_new_tokens")):
        raise TypeError(f"{type(policy).__name__} does not wrap a chat-template model policy")
    return seen


class ContextGuard:
    """Answers over-long requests with :data:`GIVE_UP`; passes the rest to the wrapped policy."""

    accepts_seeds = True

    def __init__(self, inner: Any):
        self.inner = inner
        self.core = chat_core(inner)
        self.fired = 0

    @property
    def policy_id(self) -> str:
        return self.inner.policy_id

    @policy_id.setter
    def policy_id(self, value: str) -> None:
        self.inner.policy_id = value

    def __getattr__(self, name: str) -> Any:  # decisions, names, ... of the wrapped policy
        if name in ("inner", "serve"):  # serving continuously would bypass the guard's own act_batch
            raise AttributeError(name)
        return getattr(self.inner, name)

    def limit(self) -> int | None:
        n = self.core.context_limit()
        return None if n is None else int(n) - int(self.core.max_new_tokens)

    def fits(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> bool:
        limit = self.limit()
        if limit is None:
            return True
        prompt = self.core.render_prompt(messages, tools)
        return len(self.core.tokenizer(prompt, add_special_tokens=False)["input_ids"]) <= limit

    def reset(self, seed: int | None = None) -> None:
        reset = getattr(self.inner, "reset", None)
        if reset is not None:
            reset(seed)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if not self.fits(messages, tools):
            self.fired += 1
            return GIVE_UP
        return self.inner.act(messages, tools)

    def act_batch(self, requests: Sequence[Request], seeds: Sequence[int | None] | None = None) -> list[str]:
        ok = [self.fits(m, t) for m, t in requests]
        keep = [i for i, f in enumerate(ok) if f]
        out = [GIVE_UP] * len(requests)
        self.fired += len(requests) - len(keep)
        if keep:
            sub_seeds = [seeds[i] for i in keep] if seeds is not None else None
            for i, a in zip(keep, act_batch(self.inner, [requests[i] for i in keep], sub_seeds), strict=True):
                out[i] = a
        return out
