"""The router seam.

A router looks at the start of a conversation once and names the adapter to use for
the whole conversation, or :data:`NO_ADAPTER` for the base model.  Contract:
``route(messages)`` never raises on a conversation without a user message (it
answers :data:`NO_ADAPTER`) and is deterministic for the same input.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["NO_ADAPTER", "Router", "first_user_message"]

NO_ADAPTER = "none"


def first_user_message(messages: list[dict[str, Any]]) -> str | None:
    for m in messages:
        if m.get("role") == "user" and m.get("name") != "env_feedback" and m.get("content"):
            return m["content"]
    return None


@runtime_checkable
class Router(Protocol):
    name: str
    labels: list[str]  # capability/adapter names the router can answer, NO_ADAPTER excluded

    def route(self, messages: list[dict[str, Any]]) -> str: ...
