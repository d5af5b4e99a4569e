"""The offline labeler's taxonomy: general capabilities and the starter envs that train them.

Each capability is defined in general terms (not tied to one domain) and, where the
project ships one, names the starter capability environment in ``envs/`` that trains it.
"""

from __future__ import annotations

from .labels import Capability

__all__ = ["TAXONOMY", "by_name"]

TAXONOMY: tuple[Capability, ...] = (
    Capability(
        "precondition-verification",
        "Before changing state, check that the policy allows the change for this record (status, fare class, "
        "time window, ownership) and refuse without writing when it does not. Failures are writes the task "
        "did not call for, or any write on a task that must be refused.",
        starter_env="cap-precondition-verification",
    ),
    Capability(
        "multi-step-completion",
        "Carry a request that needs several dependent state changes through to the end, performing every "
        "required write rather than stopping after the first one or two.",
        starter_env="cap-multi-step-completion",
    ),
    Capability(
        "tool-call-precision",
        "Call the right tool with exactly the right arguments (formats, lists, every required field), so the "
        "call does what was agreed instead of failing or doing something close.",
        starter_env="cap-tool-call-precision",
    ),
    Capability(
        "structured-selection",
        "Pick the one record that satisfies all of the user's constraints among several similar ones (orders, "
        "items, flights, reservations) and act on that record's id.",
        starter_env="cap-structured-selection",
    ),
    Capability(
        "refund-policy-compliance",
        "Send refunds and payments where the policy says: to the original payment method or an allowed gift "
        "card, only for eligible records, and only after the user confirmed.",
        starter_env="cap-refund-policy",
    ),
    Capability(
        "information-communication",
        "Tell the user the specific facts the task requires (amounts, counts, statuses) in the conversation, "
        "not just act on them.",
    ),
    Capability(
        "confirmation-before-write",
        "Summarise a state-changing action and get the user's explicit confirmation before performing it.",
    ),
)


def by_name(name: str) -> Capability:
    for c in TAXONOMY:
        if c.name == name:
            return c
    raise KeyError(f"unknown capability {name!r}; known: {[c.name for c in TAXONOMY]}")
