"""A scripted τ²-bench agent built from a task's gold actions, with deliberate departures.

The demo needs trajectories that pass *and* trajectories that fail for known reasons,
so that the contrastive analysis has something to contrast.  :func:`flawed_script`
turns a task's reference solution into the text actions of one *variant*:

* ``faithful`` — every gold call in order, each write announced and confirmed by the
  user first, then a closing message that states the task's ``communicate_info``;
* ``skips-write`` — the same, but every call of the last gold write's tool is left out
  (the agent still claims success);
* ``wrong-payment`` — money-moving writes use another payment method of the same user;
* ``no-confirmation`` — writes are made without asking the user first.

The offline user (:class:`trace_gym.tau2.users.OfflineUser`) answers a confirmation
question with "yes" and ends the conversation when the agent says it is done, so a
faithful script is a complete, passing conversation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..core.toolcalls import format_tool_call
from ..policies.scripted import ScriptedPolicy

__all__ = ["VARIANTS", "demo_tasks", "flawed_script", "flawed_policy", "payment_alternatives", "variants_for", "write_tools"]

VARIANTS = ("faithful", "skips-write", "wrong-payment", "no-confirmation")
PAYMENT_ARG = "payment_method_id"
CLOSING = "Your request has been processed successfully. Is there anything else I can help you with?"


def _gold_actions(task: Mapping[str, Any]) -> list[dict[str, Any]]:
    crit = task.get("evaluation_criteria") or {}
    return [a for a in crit.get("actions") or [] if a.get("requestor", "assistant") == "assistant"]


def payment_alternatives(task: Mapping[str, Any], db: Mapping[str, Any]) -> list[str]:
    """Other payment methods of the user a money-moving gold write belongs to (sorted)."""
    for a in _gold_actions(task):
        args = a.get("arguments") or {}
        if PAYMENT_ARG not in args:
            continue
        order = (db.get("orders") or {}).get(str(args.get("order_id", "")))
        user_id = (order or {}).get("user_id") or args.get("user_id")
        user = (db.get("users") or {}).get(str(user_id)) if user_id else None
        if not user:
            continue
        return sorted(m for m in (user.get("payment_methods") or {}) if m != args[PAYMENT_ARG])
    return []


def variants_for(task: Mapping[str, Any], write_tools: frozenset[str], db: Mapping[str, Any]) -> list[str]:
    """The variants that make sense for ``task`` (a departure must change something)."""
    writes = [a for a in _gold_actions(task) if a["name"] in write_tools]
    out = ["faithful"]
    if writes:
        out.append("skips-write")
        out.append("no-confirmation")
        if any(PAYMENT_ARG in (a.get("arguments") or {}) for a in writes) and payment_alternatives(task, db):
            out.append("wrong-payment")
    return [v for v in VARIANTS if v in out]


def flawed_script(task: Mapping[str, Any], variant: str, write_tools: frozenset[str],
                  db: Mapping[str, Any] | None = None) -> list[str]:
    """The text actions of ``variant`` on ``task`` (see the module docstring)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    actions = _gold_actions(task)
    writes = [a for a in actions if a["name"] in write_tools]
    skipped = writes[-1]["name"] if (variant == "skips-write" and writes) else None
    other_payment = None
    if variant == "wrong-payment":
        alts = payment_alternatives(task, db or {})
        if not alts:
            raise ValueError(f"task {task.get('id')!r}: the user has no other payment method to pick wrongly")
        other_payment = alts[0]
    script: list[str] = []
    for a in actions:
        name, args = a["name"], dict(a.get("arguments") or {})
        if name == skipped:
            continue
        if name in write_tools:
            if other_payment is not None and PAYMENT_ARG in args:
                args[PAYMENT_ARG] = other_payment
            if variant != "no-confirmation":
                script.append(f"I am going to run {name} with {json.dumps(args, sort_keys=True)}. "
                              "Do you confirm (yes/no)?")
        script.append(format_tool_call(name, args, style="hermes"))
    infos = (task.get("evaluation_criteria") or {}).get("communicate_info") or []
    closing = CLOSING if not infos else f"Here is what I found: {', '.join(str(i) for i in infos)}. {CLOSING}"
    script.append(closing)
    return script


def flawed_policy(script: list[str], variant: str) -> ScriptedPolicy:
    """A policy replaying ``script``; once it runs out it closes the conversation (so every episode ends)."""
    finish = "Thank you for contacting us. Goodbye! ###STOP###"

    def act(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        sent = sum(1 for m in messages if m.get("role") == "assistant" and m.get("name") is None)
        return script[sent] if sent < len(script) else finish

    fn: Callable[[list[dict[str, Any]], list[dict[str, Any]]], str] = act
    return ScriptedPolicy(fn, policy_id=f"flawed-scripted:{variant}")


def _source(env_id: str) -> Any:
    from ..core.tasks import task_source_for

    return task_source_for(env_id)


def write_tools(env_id: str, task_id: str) -> frozenset[str]:
    """The tools of ``env_id`` that change the world state (from a task's gold reference)."""
    gold = _source(env_id).gold(str(task_id))
    return gold.write_tools if gold is not None else frozenset()


def task_database(env_id: str) -> dict[str, Any]:
    """The τ²-bench database of the target's domain (users, orders, payment methods)."""
    from ..tau2.data import domain_dir, read_db_file

    return read_db_file(domain_dir(_source(env_id).domain) / "db.json")


def demo_tasks(env_id: str, n: int) -> list[dict[str, Any]]:
    """The first ``n`` train-split tasks of ``env_id`` on which every variant applies (split order), as
    ``{"id", "evaluation_criteria"}`` from each task's gold reference."""
    src = _source(env_id)
    tasks = []
    for tid in src.task_ids("train"):
        gold = src.gold(tid)
        tasks.append({"id": tid, "evaluation_criteria": dict(gold.details) if gold is not None else {}})
    db = task_database(env_id)
    writes = write_tools(env_id, tasks[0]["id"])
    full = [t for t in tasks if variants_for(t, writes, db) == list(VARIANTS)]
    rest = [t for t in tasks if t not in full]
    return (full + rest)[:n]
