"""The router seam.

A router looks at the start of a conversation once and names the adapter to use for
the whole conversation, or :data:`NO_ADAPTER` for the base model.  It sees what the user
asks and which tools the agent is offered: two conversations that open with the same
request but offer different tools are different tasks (with a tool withheld, the right
answer may be to say it cannot be done).  Contract: ``route(messages, tools)`` never
raises on a conversation without a user message (it answers :data:`NO_ADAPTER`), treats
``tools=None`` as "not known" (a router that uses tools then routes by the messages
alone), and is deterministic for the same input.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["NO_ADAPTER", "Router", "first_user_message", "tool_names"]

NO_ADAPTER = "none"


def first_user_message(messages: list[dict[str, Any]]) -> str | None:
    for m in messages:
        if m.get("role") == "user" and m.get("name") != "env_feedback" and m.get("content"):
            return m["content"]
    return None


def tool_names(tools: list[dict[str, Any]] | None) -> list[str] | None:
    """The sorted names of the offered tools (OpenAI function schemas or bare ``{"name": ...}``);
    ``None`` when the tools are not known."""
    if tools is None:
        return None
    names = set()
    for t in tools:
        fn = t.get("function", t) if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return sorted(names)


@runtime_checkable
class Router(Protocol):
    name: str
    labels: list[str]  # capability/adapter names the router can answer, NO_ADAPTER excluded

    def route(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str: ...
