"""The policy interface: chat messages and tool schemas in, one text action out.

A policy sees what an LLM would see — the conversation as OpenAI chat dicts
(``info["messages"]``) and the OpenAI function schemas (``info["tools"]``) — and
answers with one text action in the grammar of :mod:`trace_gym.core.toolcalls`
(a message to the user, or tool calls).  Tool calls stay text: the environment
parses them, so a policy's formatting mistakes are the environment's to report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["AdapterServer", "ContextExceeded", "FEATURES", "Policy", "PolicyError", "Request", "RequestQueue", "act_batch",
           "reset_policy", "supports"]

Request = tuple[list[dict[str, Any]], list[dict[str, Any]]]
"""One policy query: ``(messages, tools)``."""


class PolicyError(RuntimeError):
    """A policy could not produce an action (script exhausted, server unreachable, ...)."""


class ContextExceeded(PolicyError):
    """Some requests' prompts leave no room in the model's context for another token.

    :attr:`rows` are their indices in the batch that was asked for (nothing was generated
    for any row); :attr:`lengths` their prompt lengths and :attr:`limit` the context.
    A rollout ends those episodes as truncated and goes on with the others.
    """

    def __init__(self, message: str, rows: Sequence[int], lengths: Sequence[int], limit: int):
        super().__init__(message)
        self.rows = list(rows)
        self.lengths = list(lengths)
        self.limit = int(limit)


class RequestQueue(Protocol):
    """The episodes a continuously serving policy answers (``policy.serve(queue)``).

    ``take()`` hands out the next request as ``(key, (messages, tools), episode seed)``, or
    ``None`` when none is waiting right now (the policy then finishes the rows it holds; an
    answer may queue more, so it asks again after each).  ``answer(key, action)`` delivers
    the action of a request taken earlier; the episode steps at once and its next request,
    if any, is queued.  ``reject(key, error)`` hands back a request the policy cannot
    answer because its prompt leaves no room in the model's context (a
    :class:`ContextExceeded`); the caller ends that episode as truncated.  ``serve``
    returns when ``take()`` gives ``None`` and no request it took is unanswered; it raises
    :class:`PolicyError` when it cannot go on (requests taken and not answered stay so), and
    lets whatever ``answer`` raises through.
    """

    def take(self) -> tuple[Any, Request, int | None] | None: ...

    def answer(self, key: Any, action: str) -> None: ...

    def reject(self, key: Any, error: ContextExceeded) -> None: ...


@runtime_checkable
class Policy(Protocol):
    """Anything with a ``policy_id`` and an ``act`` method.

    ``act(messages, tools) -> str`` answers one query (the conversation as chat dicts and the
    offered tool schemas) with one text action.  The optional features below are used when
    present; ask for one with :func:`supports` rather than probing for the attribute:

    * ``act_batch(requests, seeds=None) -> list[str]`` answers several queries at once (a GPU
      policy batches them), one action per request in order;
    * ``accepts_seeds = True`` (default false) makes ``act_batch`` receive ``seeds=`` (each
      request's episode seed), so that sampling can depend on the episode;
    * ``batchable = False`` (default true) says the policy keeps per-episode state and cannot
      play several episodes in lock step: a rollout plays its episodes one at a time;
    * ``reset(seed) -> None`` is called at the start of every episode with its seed;
    * ``bind_env(env) -> None`` is called with the env once each episode is reset, before the
      first ``act``, for a policy that reads the env itself (a baseline playing the episode's
      reference solution); calibration plays such a policy one episode at a time;
    * ``serve(queue) -> None`` answers requests continuously (:class:`RequestQueue`): each
      action as soon as it is complete, while the others go on, so that a rollout of
      several episodes never waits for a batch's longest action.
    * ``close() -> None`` releases what the policy holds (a loaded engine's memory) once its
      owner is done with it; the policy is not asked again afterwards.

    A wrapper around a policy (:class:`~trace_gym.policies.wrapper.PolicyWrapper`) forwards the
    features it does not change.

    Errors: :class:`PolicyError` when no action can be produced (the rollout stops);
    :class:`ContextExceeded` (a ``PolicyError``) when some requests no longer fit the
    model's context: it names them, nothing was generated, and a rollout ends just those
    episodes as truncated (termination reason ``context_length``) and asks again for the rest.
    ``act_batch`` returning another number of actions than requests is a :class:`PolicyError`
    (raised by :func:`act_batch`); ``serve`` raises as :class:`RequestQueue` describes.
    ``reset`` and ``bind_env`` raise nothing of their own.
    """

    policy_id: str

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str: ...


@runtime_checkable
class AdapterServer(Protocol):
    """A policy that holds LoRA adapters itself and serves requests continuously
    (:class:`~trace_gym.policies.llamacpp.LlamaCppPolicy`): what
    :class:`~trace_gym.route.policy.ServedAdapterPolicy` wraps.

    ``load_adapter(name, folder)`` takes a PEFT LoRA folder; ``merge_adapter(name, folder)``
    serves that one adapter merged into the weights instead; ``use_adapter(name)`` acts with
    adapter ``name`` (``None``: the plain model) from then on; ``serve`` as :class:`Policy`
    describes.  Errors: ``ValueError`` or ``OSError`` from ``load_adapter``/``merge_adapter``
    for an adapter that does not fit the model; ``KeyError`` from ``use_adapter`` for a name
    not loaded.
    """

    policy_id: str

    def load_adapter(self, name: str, folder: Any) -> None: ...

    def merge_adapter(self, name: str, folder: Any) -> None: ...

    def use_adapter(self, name: str | None) -> None: ...

    def serve(self, queue: RequestQueue) -> None: ...


# The optional features of a policy: methods (present when callable) and flags (with their default).
_METHODS = ("act_batch", "reset", "bind_env", "serve", "close")
_FLAGS = {"accepts_seeds": False, "batchable": True}
FEATURES = (*_METHODS, *_FLAGS)
"""The optional features :class:`Policy` lists, by name."""


def supports(policy: Any, feature: str) -> bool:
    """Whether ``policy`` has the optional ``feature`` (one of :data:`FEATURES`).

    A method feature (``act_batch``, ``reset``, ``bind_env``, ``serve``, ``close``) is there when the policy
    has it callable; a flag (``accepts_seeds``, ``batchable``) is the policy's value, or its
    default (``accepts_seeds`` false, ``batchable`` true) when the policy says nothing.
    An unknown ``feature`` is a ``ValueError``.
    """
    if feature in _FLAGS:
        return bool(getattr(policy, feature, _FLAGS[feature]))
    if feature in _METHODS:
        return callable(getattr(policy, feature, None))
    raise ValueError(f"unknown policy feature {feature!r}; the features are {', '.join(FEATURES)}")


def act_batch(policy: Policy, requests: Sequence[Request], seeds: Sequence[int | None] | None = None) -> list[str]:
    """Answer ``requests`` with ``policy.act_batch`` when it has one, else one ``act`` at a time.

    ``seeds`` (the episode seed of each request) are passed on to policies whose
    ``accepts_seeds`` attribute is true, so that sampling can depend on the episode.
    """
    if not requests:
        return []
    if not supports(policy, "act_batch"):
        return [policy.act(m, t) for m, t in requests]
    if seeds is not None and supports(policy, "accepts_seeds"):
        out = list(policy.act_batch(list(requests), seeds=list(seeds)))  # type: ignore[attr-defined]
    else:
        out = list(policy.act_batch(list(requests)))  # type: ignore[attr-defined]
    if len(out) != len(requests):
        raise PolicyError(f"{policy.policy_id}: act_batch returned {len(out)} actions for {len(requests)} requests")
    return out


def reset_policy(policy: Policy, seed: int | None) -> None:
    """Call ``policy.reset(seed)`` if the policy keeps per-episode state."""
    if supports(policy, "reset"):
        policy.reset(seed)  # type: ignore[attr-defined]
