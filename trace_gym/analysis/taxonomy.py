"""The offline labeler's taxonomy: general capabilities and the starter envs that train them.

Each capability is defined in general terms (not tied to one domain) and, where the
project ships one, names the starter capability environment in ``envs/`` that trains it.
:data:`GENERAL_CAPABILITIES` come from τ²-bench-style policy tasks;
:data:`TOOLSANDBOX_CAPABILITIES` are the behaviours ToolSandbox's scenario categories test
(the offline labeler marks them NA on tasks whose task source names no such category);
:data:`TELECOM_CAPABILITIES` are those of dual-control support (τ²-bench telecom: the agent
instructs, the user operates their own device), needed where the gold solution has actions on
the user's side or billing writes.  :data:`TAXONOMY` is all three, in that order.
"""

from __future__ import annotations

from .labels import Capability

__all__ = ["TAXONOMY", "GENERAL_CAPABILITIES", "TOOLSANDBOX_CAPABILITIES", "TELECOM_CAPABILITIES", "by_name"]

GENERAL_CAPABILITIES: tuple[Capability, ...] = (
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

TOOLSANDBOX_CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        "state-dependency",
        "Put the world in the state a call depends on first (turn a setting on or off, e.g. leave low-battery "
        "mode, enable cellular, wifi or location service) and only then make the dependent call. Failures are "
        "the dependent call made without its prerequisite, or the prerequisite never set.",
        starter_env="cap-ts-state-dependency",
    ),
    Capability(
        "canonicalization",
        "Pass arguments in the canonical form the tool expects: relative dates and times turned into exact "
        "timestamps, phone numbers in international form, amounts and units converted, names resolved to ids.",
        starter_env="cap-ts-canonicalization",
    ),
    Capability(
        "insufficient-information",
        "When no available tool can do what the user asks (or a needed fact cannot be obtained), say so plainly "
        "instead of inventing an answer or an argument, and change nothing.",
        starter_env="cap-ts-insufficient-information",
    ),
    Capability(
        "multiple-user-turn",
        "When the first request lacks details, keep the conversation going: ask the user for what is missing "
        "and then use the answers in the calls, rather than stopping or guessing after the first message.",
        starter_env="cap-ts-multiple-user-turn",
    ),
    Capability(
        "multiple-tool-call",
        "Complete every call a request needs (look-ups that feed later calls, then the calls that act), not "
        "just the first one.",
        starter_env="cap-ts-multiple-tool-call",
    ),
)

TELECOM_CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        "device-troubleshooting",
        "When the fault sits on a device only the user can operate, diagnose it with the user: ask them to run "
        "checks on their device, then for the one fix the result points to, then for a check that it worked. "
        "Failures are a device action the solution needs that the user was never asked to do.",
        starter_env="cap-telecom-mobile-data",
    ),
    Capability(
        "account-device-coordination",
        "Fix a problem that needs changes on both sides, the account (e.g. enable roaming on the line) and the "
        "user's device (e.g. turn data roaming on), rather than only one of them. Failures are a required "
        "account change never made or a required device action never asked of the user.",
        starter_env="cap-telecom-roaming",
    ),
    Capability(
        "billing-policy-compliance",
        "Take billing actions only as the policy allows: a payment request only for a bill confirmed overdue "
        "(the user then pays on their device), data refuelled only up to the allowed amount after the price "
        "was confirmed. Failures are a billing write on another bill or amount than the task calls for, or on "
        "a task that must be refused.",
        starter_env="cap-telecom-plan-billing",
    ),
)

TAXONOMY: tuple[Capability, ...] = GENERAL_CAPABILITIES + TOOLSANDBOX_CAPABILITIES + TELECOM_CAPABILITIES


def by_name(name: str) -> Capability:
    for c in TAXONOMY:
        if c.name == name:
            return c
    raise KeyError(f"unknown capability {name!r}; known: {[c.name for c in TAXONOMY]}")
