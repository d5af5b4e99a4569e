"""A deterministic, explainable labeler for targets whose tasks have a gold reference.

It compares what the agent did with the task's reference solution, as the target env's
task source gives it (:class:`trace_gym.core.tasks.Gold`: the reference tool calls, the
write tools and the facts to communicate; see :mod:`trace_gym.analysis.gold`).  Each rule below
decides when a capability is *needed* (else NA) and when it is LACKING; every label
carries evidence: the message index of the call or text and a sentence.

==========================  ====================================================  =====================================================
capability                  needed when                                           LACKING when
==========================  ====================================================  =====================================================
precondition-verification   the agent wrote, or the gold solution has no write    a successful write whose tool is not a gold write
                            (the task must be refused or is read-only)            (or any write when the gold has none)
multi-step-completion       the gold solution has ≥ 2 writes                       a gold write tool was never called successfully
tool-call-precision         the agent called a gold write tool                    that tool was called but never with the gold
                                                                                  arguments (ids aside), or the call errored
structured-selection        a gold write carries record ids                       a call to the gold tool used another record id
refund-policy-compliance    a gold write carries ``payment_method_id``            the agent's call used another payment method
information-communication   the task lists ``communicate_info``                   an item is missing from every assistant message
confirmation-before-write   the agent made a successful write                     no user message since the agent's last text or write
state-dependency            category STATE_DEPENDENCY                             a call failed (its prerequisite state unset) and that
                                                                                  tool never succeeded later, or no call succeeded
canonicalization            category CANONICALIZATION and the agent called a      no call of that tool had the arguments of one of its
                            gold tool that takes arguments                        gold calls (numbers within 1e-3, strings exact)
insufficient-information    category INSUFFICIENT_INFORMATION                     a successful write, or no message saying it cannot
multiple-user-turn          category MULTIPLE_USER_TURN                           the user never spoke again, or no gold tool call
                                                                                  succeeded after the user's second message
multiple-tool-call          category MULTIPLE_TOOL_CALL and gold calls of ≥ 2      a gold tool was never called successfully
                            tools
device-troubleshooting      the gold solution has actions on the user's device    no assistant message asks for one of them (every
                            (``gold["user_actions"]``)                            key word of its tool name)
account-device-coordination the gold solution has agent writes and user actions   a gold write never succeeded, or a user action was
                                                                                  never asked for
billing-policy-compliance   a gold write or a successful agent write carries      a successful billing write whose bill or amount is
                            ``bill_id`` or ``gb_amount``                          not a gold write's (or any on a task without one)
==========================  ====================================================  =====================================================

ToolSandbox's behaviours (state-dependency to multiple-tool-call) are needed only when the task
source puts the task in the matching category (``gold["categories"]``, case-insensitive); on tasks
of other benchmarks they are NA.  The dual-control rules (device-troubleshooting,
account-device-coordination) read ``gold["user_actions"]``: the actions the user must take on their
own device (τ²-bench telecom's gold actions with ``requestor: user``, as ``{"name", "arguments"}``);
where it is absent or empty they are NA.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..labels import Capability, Evidence, Label, LabelRun, LabelValue
from ..trajectory_view import AgentCall, agent_calls, assistant_texts, call_repr
from .base import LabelingItem

__all__ = ["GoldLabeler", "ID_ARGS"]

ID_ARGS = frozenset({
    "order_id", "item_ids", "new_item_ids", "product_id", "reservation_id", "flight_number", "flights",
    "user_id", "customer_id", "line_id",
})
PAYMENT_ARGS = frozenset({"payment_method_id", "payment_id"})
BILLING_ARGS = frozenset({"bill_id", "gb_amount"})
# words of a user tool's name that say nothing about which device action it is
_ACTION_FILLER = frozenset({"check", "toggle", "set", "get", "make", "run", "status", "my", "your", "the", "a"})

NA, PRESENT, LACKING = LabelValue.NA, LabelValue.PRESENT, LabelValue.LACKING
_CANNOT = re.compile(r"\b(can ?not|can't|unable|not able|couldn't|could not|don't have|do not have|no way|not possible|"
                     r"not available|isn't available|no tool|sorry)\b", re.IGNORECASE)


def _norm(v: Any) -> str:
    if isinstance(v, list):
        try:
            return json.dumps(sorted(v, key=lambda x: json.dumps(x, sort_keys=True)), sort_keys=True)
        except TypeError:
            pass
    return json.dumps(v, sort_keys=True)


def _asks_for(tool: str, text: str) -> bool:
    """Whether ``text`` (lower-case words joined by spaces) names every key word of a user tool's name."""
    keys = [w for w in tool.split("_") if w not in _ACTION_FILLER] or tool.split("_")
    words = set(text.split())
    return " ".join(keys) in text or all(k in words for k in keys)


def _same(a: dict[str, Any], b: dict[str, Any], keys: frozenset[str] | None = None, exclude: frozenset[str] = frozenset()) -> bool:
    ks = (set(a) | set(b)) if keys is None else keys
    return all(_norm(a.get(k)) == _norm(b.get(k)) for k in ks if k not in exclude)


class GoldLabeler:
    """Labels from departures from the gold solution; identical output for identical input."""

    name = "offline"

    def label(self, items: list[LabelingItem], capabilities: list[Capability], *, run: int = 0, seed: int = 0) -> LabelRun:
        out = LabelRun(run=run, seed=seed)
        for item in items:
            if item.gold is None:
                raise ValueError(f"trajectory {item.trajectory_id!r} has no gold solution; the offline labeler needs one (use --labeler llm)")
            verdicts = self._verdicts(item)
            for cap in capabilities:
                v = verdicts.get(cap.name)
                if v is None:
                    out.unlabeled.append((item.trajectory_id, cap.name))
                    continue
                out.labels.append(Label(item.trajectory_id, cap.name, v[0], tuple(v[1])))
        return out

    # -------------------------------------------------------------- rules
    def _verdicts(self, item: LabelingItem) -> dict[str, tuple[LabelValue, list[Evidence]]]:
        gold = item.gold or {}
        gold_actions = [a for a in gold.get("actions") or [] if a.get("requestor", "assistant") == "assistant"]
        gold_writes = [a for a in gold_actions if a["name"] in item.write_tools]
        calls = agent_calls(item.messages)
        writes_ok = [c for c in calls if c.name in item.write_tools and not c.error]
        return {
            "precondition-verification": self._precondition(gold_writes, writes_ok),
            "multi-step-completion": self._completion(gold_writes, writes_ok),
            "tool-call-precision": self._precision(gold_writes, calls),
            "structured-selection": self._selection(gold_writes, calls),
            "refund-policy-compliance": self._refund(gold_writes, calls),
            "information-communication": self._communicate(gold.get("communicate_info") or [], item.messages),
            "confirmation-before-write": self._confirmation(item.messages, writes_ok),
            **self._toolsandbox(item, gold, gold_actions, calls),
            **self._dual_control(gold, gold_writes, writes_ok, item.messages, item.write_tools),
        }

    # -------------------------------------------------------------- dual control (the user operates the device)
    def _dual_control(self, gold: dict[str, Any], gold_writes: list[dict[str, Any]], writes_ok: list[AgentCall],
                      messages: list[dict[str, Any]], write_tools: frozenset[str]) -> dict[str, tuple[LabelValue, list[Evidence]]]:
        user_actions = [a for a in gold.get("user_actions") or [] if isinstance(a, dict) and a.get("name")]
        texts = [(i, " ".join(re.findall(r"[a-z0-9]+", t.lower()))) for i, t in assistant_texts(messages)]
        unasked = [a for a in user_actions if not any(_asks_for(a["name"], t) for _, t in texts)]
        if not user_actions:
            device = coordination = (NA, [Evidence("the task needs no action on the user's device")])
        else:
            ev = [Evidence(f"never asked the user to {a['name'].replace('_', ' ')} on their device") for a in unasked]
            device = (LACKING, ev) if ev else (PRESENT, [Evidence(f"asked the user for every device action ({len(user_actions)})")])
            if not gold_writes:
                coordination = (NA, [Evidence("the fix needs no change on the account side")])
            else:
                done = {c.name for c in writes_ok}
                ev = [Evidence(f"never made the account change {call_repr(a['name'], a.get('arguments') or {})}")
                      for a in gold_writes if a["name"] not in done]
                ev += [Evidence(f"the device side was left out: never asked for {a['name'].replace('_', ' ')}") for a in unasked]
                coordination = (LACKING, ev) if ev else (PRESENT, [Evidence("made the account change and had the user fix the device")])
        return {"device-troubleshooting": device, "account-device-coordination": coordination,
                "billing-policy-compliance": self._billing(gold_writes, writes_ok, write_tools)}

    def _billing(self, gold_writes, writes_ok, write_tools):
        gold_billing = [a for a in gold_writes if BILLING_ARGS & set(a.get("arguments") or {})]
        done = [c for c in writes_ok if c.name in write_tools and BILLING_ARGS & set(c.arguments)]
        if not gold_billing and not done:
            return NA, [Evidence("no billing write (bill_id, gb_amount) was called for or made")]
        ev = []
        for c in done:
            keys = BILLING_ARGS & set(c.arguments)
            if not any(a["name"] == c.name and self._matches(c, {"name": a["name"], "arguments": {k: (a.get("arguments") or {}).get(k)
                                                                                                    for k in keys}})
                       for a in gold_billing):
                why = "a billing write on a task that calls for none" if not gold_billing else "a bill or amount the task did not call for"
                ev.append(self._ev(c, why))
        return (LACKING, ev) if ev else (PRESENT, [Evidence("billing writes were the ones the policy allows here" if done
                                                            else "made no billing write")])

    # -------------------------------------------------------------- ToolSandbox behaviours
    def _toolsandbox(self, item: LabelingItem, gold: dict[str, Any], gold_actions: list[dict[str, Any]],
                     calls: list[AgentCall]) -> dict[str, tuple[LabelValue, list[Evidence]]]:
        cats = {str(c).upper() for c in gold.get("categories") or ()}
        rules = {
            "state-dependency": ("STATE_DEPENDENCY", lambda: self._state_dependency(calls)),
            "canonicalization": ("CANONICALIZATION", lambda: self._canonical(gold_actions, calls)),
            "insufficient-information": ("INSUFFICIENT_INFORMATION",
                                         lambda: self._insufficient(item.messages, item.write_tools, calls)),
            "multiple-user-turn": ("MULTIPLE_USER_TURN", lambda: self._user_turns(item.messages, gold_actions, calls)),
            "multiple-tool-call": ("MULTIPLE_TOOL_CALL", lambda: self._all_calls(gold_actions, calls)),
        }
        return {name: rule() if cat in cats else (NA, [Evidence(f"the task is not in the {cat.lower()} category")])
                for name, (cat, rule) in rules.items()}

    @staticmethod
    def _matches(call: AgentCall, action: dict[str, Any]) -> bool:
        """The call is the gold action: same tool, every gold argument equal (numbers within 1e-3)."""
        if call.name != action["name"]:
            return False
        for k, g in (action.get("arguments") or {}).items():
            a = call.arguments.get(k)
            if isinstance(g, (int, float)) and not isinstance(g, bool) and isinstance(a, (int, float)):
                if abs(float(a) - float(g)) > 1e-3:
                    return False
            elif _norm(a) != _norm(g):
                return False
        return True

    def _state_dependency(self, calls):
        ev = [self._ev(c, "failed (its prerequisite state was not set first) and never succeeded afterwards")
              for i, c in enumerate(calls) if c.error and not any(not d.error and d.name == c.name for d in calls[i + 1:])]
        if not ev and not any(not c.error for c in calls):
            ev = [Evidence("never made a successful call: the state the task depends on was never set")]
        return (LACKING, ev) if ev else (PRESENT, [Evidence("every call that depends on a setting ran after it was set")])

    def _canonical(self, gold_actions, calls):
        alternatives: dict[str, list[dict[str, Any]]] = {}
        for a in gold_actions:  # a tool's gold calls are alternatives (upstream accepts any of them)
            if a.get("arguments"):
                alternatives.setdefault(a["name"], []).append(a)
        relevant = [(name, alts, [c for c in calls if c.name == name]) for name, alts in alternatives.items()]
        relevant = [r for r in relevant if r[2]]
        if not relevant:
            return NA, [Evidence("the agent never called a gold tool that takes arguments")]
        ev = []
        for name, alts, cs in relevant:
            if any(not c.error and self._matches(c, a) for c in cs for a in alts):
                continue
            ev.extend(self._ev(c, f"arguments not in the canonical form of {call_repr(name, alts[0]['arguments'])}")
                      for c in cs)
        return (LACKING, ev) if ev else (PRESENT, [Evidence("arguments were passed in their canonical form")])

    def _insufficient(self, messages, write_tools, calls):
        ev = [self._ev(c, "changed the world on a task no available tool can do") for c in calls
              if c.name in write_tools and not c.error]
        texts = assistant_texts(messages)
        if not any(_CANNOT.search(t) for _, t in texts):
            ev.append(Evidence("never told the user it cannot do this", texts[-1][0] if texts else None))
        return (LACKING, ev) if ev else (PRESENT, [Evidence("said it cannot do it and changed nothing")])

    def _user_turns(self, messages, gold_actions, calls):
        users = [i for i, m in enumerate(messages) if m.get("role") == "user" and m.get("name") != "env_feedback"]
        if len(users) < 2:
            texts = assistant_texts(messages)
            return LACKING, [Evidence("the conversation ended without asking the user for what was missing",
                                      texts[-1][0] if texts else None)]
        names = {a["name"] for a in gold_actions}
        if names and not any(not c.error and c.name in names and c.turn > users[1] for c in calls):
            return LACKING, [Evidence("never used what the user said later in a successful gold call", users[1])]
        return PRESENT, [Evidence(f"the user spoke {len(users)} times and the agent acted on it")]

    def _all_calls(self, gold_actions, calls):
        tools = list(dict.fromkeys(a["name"] for a in gold_actions))
        if len(tools) < 2:
            return NA, [Evidence(f"the gold solution calls {len(tools)} tool(s)")]
        done = {c.name for c in calls if not c.error}
        missed = [next(a for a in gold_actions if a["name"] == t) for t in tools if t not in done]
        if missed:
            return LACKING, [Evidence(f"never completed {call_repr(a['name'], a.get('arguments') or {})}") for a in missed]
        return PRESENT, [Evidence(f"all {len(tools)} required tools were called")]

    @staticmethod
    def _ev(c: AgentCall, reason: str) -> Evidence:
        return Evidence(reason, c.turn, call_repr(c.name, c.arguments))

    def _precondition(self, gold_writes, writes_ok):
        if not writes_ok and gold_writes:
            return NA, [Evidence("the agent made no write and the task called for some")]
        gold_names = {a["name"] for a in gold_writes}
        bad = [c for c in writes_ok if c.name not in gold_names]
        if bad:
            why = "the task must be refused, yet the agent wrote" if not gold_writes else "a write the task did not call for"
            return LACKING, [self._ev(c, why) for c in bad]
        return PRESENT, [Evidence("every write was one the task called for" if writes_ok else "no write on a task without writes")]

    def _completion(self, gold_writes, writes_ok):
        if len(gold_writes) < 2:
            return NA, [Evidence(f"the task needs {len(gold_writes)} write(s)")]
        done = {c.name for c in writes_ok}
        missed = [a for a in gold_writes if a["name"] not in done]
        if missed:
            return LACKING, [Evidence(f"never performed {call_repr(a['name'], a.get('arguments') or {})}") for a in missed]
        return PRESENT, [Evidence(f"all {len(gold_writes)} required writes were performed")]

    def _precision(self, gold_writes, calls):
        relevant = [(a, [c for c in calls if c.name == a["name"]]) for a in gold_writes]
        relevant = [(a, cs) for a, cs in relevant if cs]
        if not relevant:
            return NA, [Evidence("the agent never called a gold write tool")]
        ev = []
        for a, cs in relevant:
            gargs = a.get("arguments") or {}
            if any(not c.error and _same(c.arguments, gargs, exclude=ID_ARGS | PAYMENT_ARGS) for c in cs):
                continue
            for c in cs:
                ev.append(self._ev(c, "the call failed" if c.error else f"arguments differ from {call_repr(a['name'], gargs)}"))
        return (LACKING, ev) if ev else (PRESENT, [Evidence("gold write tools called with the gold arguments")])

    def _selection(self, gold_writes, calls):
        with_ids = [a for a in gold_writes if ID_ARGS & set(a.get("arguments") or {})]
        relevant = [(a, [c for c in calls if c.name == a["name"] and not c.error]) for a in with_ids]
        relevant = [(a, cs) for a, cs in relevant if cs]
        if not relevant:
            return NA, [Evidence("no successful call to a gold write that selects records")]
        ev = []
        for a, cs in relevant:
            gargs = a.get("arguments") or {}
            keys = frozenset(ID_ARGS & set(gargs))
            if not any(_same(c.arguments, gargs, keys=keys) for c in cs):
                ev.extend(self._ev(c, f"selected other records than {sorted((k, gargs[k]) for k in keys)}") for c in cs)
        return (LACKING, ev) if ev else (PRESENT, [Evidence("the right records were selected")])

    def _refund(self, gold_writes, calls):
        pay = [a for a in gold_writes if PAYMENT_ARGS & set(a.get("arguments") or {})]
        relevant = [(a, [c for c in calls if c.name == a["name"] and not c.error]) for a in pay]
        relevant = [(a, cs) for a, cs in relevant if cs]
        if not relevant:
            return NA, [Evidence("no successful call to a gold write that moves money")]
        ev = []
        for a, cs in relevant:
            gargs = a.get("arguments") or {}
            keys = frozenset(PAYMENT_ARGS & set(gargs))
            if not any(_same(c.arguments, gargs, keys=keys) for c in cs):
                ev.extend(self._ev(c, f"paid to {[c.arguments.get(k) for k in keys]} instead of {[gargs[k] for k in keys]}") for c in cs)
        return (LACKING, ev) if ev else (PRESENT, [Evidence("money went to the payment method the policy requires")])

    def _communicate(self, infos, messages):
        if not infos:
            return NA, [Evidence("the task requires no specific information to be communicated")]
        texts = [(i, t.lower().replace(",", "")) for i, t in assistant_texts(messages)]
        missing = [s for s in infos if not any(str(s).lower() in t for _, t in texts)]
        if missing:
            return LACKING, [Evidence(f"never told the user {s!r}") for s in missing]
        return PRESENT, [Evidence(f"communicated {list(infos)!r}")]

    def _confirmation(self, messages, writes_ok):
        if not writes_ok:
            return NA, [Evidence("the agent made no write")]
        ev = []
        last_barrier = -1  # index of the agent's last text message or write
        writes_by_turn = {c.turn for c in writes_ok}
        for i, m in enumerate(messages):
            role = m.get("role")
            if role == "assistant" and i in writes_by_turn:
                asked = any(messages[j].get("role") == "user" and messages[j].get("name") != "env_feedback"
                            for j in range(last_barrier + 1, i))
                if not asked or last_barrier < 0 or messages[last_barrier].get("tool_calls"):
                    c = next(c for c in writes_ok if c.turn == i)
                    ev.append(self._ev(c, "wrote without asking the user to confirm first"))
                last_barrier = i
            elif role == "assistant" and not m.get("tool_calls") and m.get("content"):
                last_barrier = i
        return (LACKING, ev) if ev else (PRESENT, [Evidence("each write followed a user reply to the agent's summary")])
