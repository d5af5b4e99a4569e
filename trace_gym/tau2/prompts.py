"""The agent's system prompt around a τ²-bench domain policy (with a user, or solo on a ticket)."""

from __future__ import annotations

__all__ = ["agent_system_prompt"]

_FRAME = (
    "You are a customer-support agent for the business described in the policy below. "
    "Help the customer with their request while following the policy exactly.\n\n"
    "On each turn, either write a message to the customer or call one or more tools "
    "(a turn that calls tools talks to the tools only; the customer sees only your messages). "
    "Use only facts the customer or the tools gave you, and do not promise what the policy forbids."
)
_SOLO_FRAME = (
    "You are a customer-support agent working through a support ticket on your own, following "
    "the policy below exactly. There is no customer to talk to: every turn must call one or more tools. "
    "When the ticket is resolved, call the `done` tool, alone, to finish."
)


def agent_system_prompt(policy: str, *, solo_ticket: str | None = None) -> str:
    """The agent's system prompt: the domain policy inside our own instruction frame."""
    if solo_ticket is None:
        return f"{_FRAME}\n\n<policy>\n{policy}\n</policy>"
    return f"{_SOLO_FRAME}\n\n<policy>\n{policy}\n</policy>\n\n<ticket>\n{solo_ticket}\n</ticket>"
