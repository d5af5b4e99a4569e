"""Chat messages in the OpenAI chat-completions format.

The wire format everywhere in trace-gym is the plain ``dict`` that the OpenAI API
(and vLLM, and every Hugging Face chat template) accepts::

    {"role": "system", "content": "..."}
    {"role": "user", "content": "..."}
    {"role": "assistant", "content": "...", "tool_calls": [
        {"id": "call_0", "type": "function",
         "function": {"name": "get_order", "arguments": "{\\"order_id\\": \\"#W1\\"}"}}]}
    {"role": "tool", "tool_call_id": "call_0", "name": "get_order", "content": "..."}

:class:`Message` and :class:`ToolCall` are typed views of those dicts with
validation and an exact JSON round trip (``Message.from_dict(m).to_dict() == m`` for
every valid message).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from .boundedjson import JSONLimitError
from .boundedjson import loads as _loads

__all__ = ["ToolCall", "Message", "Role", "validate_conversation", "MessageError"]

Role = Literal["system", "user", "assistant", "tool"]
_ROLES = ("system", "user", "assistant", "tool")


class MessageError(ValueError):
    """A message dict does not follow the OpenAI chat format."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by the assistant."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        try:
            fn = d["function"]
            raw = fn.get("arguments", "{}")
            args = _loads(raw) if isinstance(raw, str) else raw
            if raw == "" or args is None:
                args = {}
            if not isinstance(args, dict):
                raise MessageError(f"tool call arguments must be a JSON object, got {type(args).__name__}")
            return cls(id=str(d["id"]), name=str(fn["name"]), arguments=args)
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError, JSONLimitError) as exc:
            raise MessageError(f"malformed tool call {str(d)[:200]}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message. ``tool_calls`` only on assistant messages, ``tool_call_id`` only on tool messages."""

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise MessageError(f"unknown role {self.role!r}; expected one of {_ROLES}")
        if self.tool_calls and self.role != "assistant":
            raise MessageError(f"only assistant messages carry tool_calls (got role {self.role!r})")
        if self.role == "tool" and not self.tool_call_id:
            raise MessageError("a tool message needs the tool_call_id of the call it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise MessageError(f"tool_call_id is only valid on tool messages (got role {self.role!r})")
        if self.content is not None and not isinstance(self.content, str):
            raise MessageError(f"content must be a string or None, got {type(self.content).__name__}")

    # -- constructors -------------------------------------------------------------
    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str | None = None, tool_calls: list[ToolCall] | tuple[ToolCall, ...] = ()) -> Message:
        return cls("assistant", content, tuple(tool_calls))

    @classmethod
    def tool(cls, tool_call_id: str, content: str, name: str | None = None) -> Message:
        return cls("tool", content, (), tool_call_id, name)

    # -- conversion ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [tc.to_dict() for tc in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Message:
        if not isinstance(d, dict):
            raise MessageError(f"a message must be a dict, got {type(d).__name__}")
        if "role" not in d:
            raise MessageError(f"message without a role: {d!r}")
        unknown = set(d) - {"role", "content", "tool_calls", "tool_call_id", "name"}
        if unknown:
            raise MessageError(f"unknown message fields {sorted(unknown)}")
        calls = tuple(ToolCall.from_dict(tc) for tc in (d.get("tool_calls") or ()))
        return cls(d["role"], d.get("content"), calls, d.get("tool_call_id"), d.get("name"))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Message:
        return cls.from_dict(json.loads(text))


def validate_conversation(messages: list[dict[str, Any]]) -> list[Message]:
    """Parse a conversation and check that every tool message answers an earlier, unanswered call."""
    parsed = [Message.from_dict(m) for m in messages]
    pending: set[str] = set()
    for i, m in enumerate(parsed):
        if m.role == "assistant":
            pending.update(tc.id for tc in m.tool_calls)
        elif m.role == "tool":
            if m.tool_call_id not in pending:
                raise MessageError(f"message {i}: tool result for unknown or already answered call {m.tool_call_id!r}")
            pending.discard(m.tool_call_id)
    return parsed
