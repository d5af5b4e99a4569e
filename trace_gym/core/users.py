"""The user side of a conversation: one seam for every user simulator.

A :class:`UserSimulator` is reset once per episode with its family's context, then
asked for one :class:`UserTurn` whenever it is the user's turn.  The τ² offline, LLM and
replay users (:mod:`trace_gym.tau2.users`), the ToolSandbox scripted, replay and LLM users
(:mod:`trace_gym.toolsandbox.users`) and the capability users
(:mod:`trace_gym.capabilities.user`) all implement it; each family keeps its own
behaviour and documents what its context and its ``messages`` hold.

Shared here: the turn type, the error, the stop token, :class:`ReplayTurns` (a fixed
list of turns, then a final one) and :func:`flip_roles` (the conversation as the user sees it); one chat
call on the user's behalf is :func:`trace_gym.llm.ask_model`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["STOP", "UserTurn", "UserError", "UserSimulator", "ReplayTurns", "flip_roles"]

STOP = "###STOP###"


@dataclass(frozen=True, eq=False)
class UserTurn(Mapping[str, Any]):
    """One user turn: a message (``content``), calls to the user's own tools (``tool_calls``,
    ``[{"name", "arguments"}]``), and whether the conversation ends with it (``end``).

    It reads as the chat message it is — ``turn["role"]``, ``turn["content"]``,
    ``turn["tool_calls"]`` (``None`` when there are none) — and compares equal to that dict;
    two turns are equal when content, calls and ``end`` are.
    """

    content: str | None = None
    tool_calls: tuple[dict[str, Any], ...] | None = None
    end: bool = False

    def __post_init__(self) -> None:
        if self.tool_calls is not None:
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls) or None)

    def _view(self) -> dict[str, Any]:
        calls = [dict(c) for c in self.tool_calls] if self.tool_calls else None
        return {"role": "user", "content": self.content, "tool_calls": calls}

    def __getitem__(self, key: str) -> Any:
        return self._view()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(("role", "content", "tool_calls"))

    def __len__(self) -> int:
        return 3

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UserTurn):
            return (self.content, self.tool_calls, self.end) == (other.content, other.tool_calls, other.end)
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"UserTurn(content={self.content!r}, tool_calls={self.tool_calls!r}, end={self.end})"


class UserError(RuntimeError):
    """The simulator could not produce a turn (its model failed or answered nothing usable)."""


@runtime_checkable
class UserSimulator(Protocol):
    """Plays the user: ``reset(context)`` once per episode, then ``respond(messages)`` per user turn.

    ``context`` is the family's episode description (τ²: a ``UserContext``; ToolSandbox:
    the scenario; capability envs: the scenario, or ``None``).  ``messages`` is what the
    user sees at its turn, in the family's message form (τ²: the messages since its last
    turn; ToolSandbox: the message bus; capability envs: the conversation so far).

    Error contract: any text the agent wrote is a valid thing to answer, so ``respond``
    never raises because of the agent.  ``reset`` raises ``ValueError`` (or
    :class:`~trace_gym.data.DataDirError`) for a context it cannot play.  When
    ``respond`` cannot produce a turn — the model behind it is unreachable or keeps
    failing — it raises :class:`UserError` naming the cause, never a made-up turn;
    a family may instead document a fallback turn that ends the conversation
    (capability envs do).  The environment decides what an error does to the episode
    (τ² ends it as ``user_error``).
    """

    def reset(self, context: Any) -> None: ...

    def respond(self, messages: Sequence[Mapping[str, Any]]) -> UserTurn: ...


class ReplayTurns:
    """A fixed list of turns in order, then ``final`` for every further turn (scripts and replays)."""

    def __init__(self, turns: Sequence[UserTurn], final: UserTurn):
        self.turns, self.final = list(turns), final
        self._next = 0

    def reset(self, context: Any = None, *_: Any) -> None:
        self._next = 0

    def respond(self, messages: Sequence[Mapping[str, Any]] = ()) -> UserTurn:
        if self._next >= len(self.turns):
            return self.final
        self._next += 1
        return self.turns[self._next - 1]


def flip_roles(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The agent's text conversation as the user's model sees it: the user's own messages become
    ``assistant``, the agent's text messages ``user``; tool traffic and environment notes
    (messages with a ``name``) are left out."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("tool_calls") or m.get("name") is not None:
            continue
        if m.get("role") == "user":
            out.append({"role": "assistant", "content": m.get("content") or ""})
        elif m.get("role") == "assistant":
            out.append({"role": "user", "content": m.get("content") or ""})
    return out
