"""Capability checks composed into one reward with partial credit.

An episode is summarised as an :class:`EpisodeLog` (the ordered events — agent messages,
user messages, tool calls with their success — plus the database before and after).
Each rendered reward entry of a case becomes one component in [0, 1]:

``required_call``   a successful call of ``tool`` whose arguments satisfy ``args`` matchers
                    (``partial``: the best fraction of matchers any call satisfied)
``forbidden_call``  1 unless such a call succeeded (``count_errors``: or was attempted)
``db``              the final database value at ``path`` satisfies ``match``
``no_mutation``     the database is unchanged
``no_collateral``   nothing changed outside the ``allow``-ed subtrees
``refusal``         nothing changed and the agent said a refusal phrase
``communicated``    the agent's messages contain ``any_of`` one phrase / ``all_of`` (fraction)
``ordering``        the first ``first`` event precedes the first ``then`` event (a call event
                    counts successful calls; with ``attempted``, failed ones too)

reward = (product of gate components) × (weighted mean of the other components).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .matchers import matches
from .templating import TemplateError, lookup

__all__ = ["EpisodeLog", "evaluate_rewards", "REFUSAL_PHRASES", "normalize_text"]

REFUSAL_PHRASES = [
    "cannot", "can't", "can not", "unable", "not able", "not eligible", "ineligible", "not possible", "not allowed",
    "don't allow", "does not allow", "doesn't allow", "not permitted", "sorry",
]

_NUM_COMMA = re.compile(r",(?<=\d,)(?=\d{3})")  # a thousands separator; starts with the comma, so the scan is fast


def normalize_text(text: str) -> str:
    """Lower case, single spaces, no thousands separators, no dollar signs."""
    t = _NUM_COMMA.sub("", text.lower()).replace("$", "")
    return " ".join(t.split())


@dataclass
class EpisodeLog:
    """What the reward checks look at."""

    events: list[dict[str, Any]] = field(default_factory=list)
    initial_db: dict[str, Any] = field(default_factory=dict)
    final_db: dict[str, Any] = field(default_factory=dict)
    # ((events list, its length) it was built from, normalised agent text): built once, not once per check
    _agent_text: tuple[tuple[int, int], str] | None = field(default=None, repr=False, compare=False)

    def calls(self, tool: str, include_errors: bool = False) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == "call" and e["name"] == tool and (include_errors or not e["error"])]

    def agent_text(self) -> str:
        key = (id(self.events), len(self.events))  # events are only appended
        if self._agent_text is None or self._agent_text[0] != key:
            text = normalize_text("\n".join(e["text"] for e in self.events if e["kind"] == "agent"))
            self._agent_text = (key, text)
        return self._agent_text[1]


def _args_ok(args: dict[str, Any], matchers: dict[str, Any]) -> list[bool]:
    out = []
    for key, m in matchers.items():
        out.append(key in args and matches(args[key], m))
    return out


def _first_index(log: EpisodeLog, ev: dict[str, Any]) -> int | None:
    kind = "agent" if "agent_says_any" in ev else "user"
    phrases: list[str] | None = None  # normalised once, like each event's text
    for i, e in enumerate(log.events):
        if "call" in ev:
            if (e["kind"] == "call" and (not e["error"] or ev.get("attempted")) and e["name"] == ev["call"]
                    and all(_args_ok(e["args"], ev.get("args", {})))):
                return i
        elif e["kind"] == kind:
            if phrases is None:
                phrases = [normalize_text(p) for p in ev[f"{kind}_says_any"]]
            text = normalize_text(e["text"])
            if any(p in text for p in phrases):
                return i
    return None


def _changed_paths(a: Any, b: Any, prefix: tuple[str, ...], out: list[tuple[str, ...]]) -> None:
    if a is b:  # a shared part (the final state shares what the episode did not change)
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() | b.keys():
            if k not in a or k not in b:
                out.append(prefix + (str(k),))
            else:
                _changed_paths(a[k], b[k], prefix + (str(k),), out)
    elif a != b:
        out.append(prefix)


def _component(r: dict[str, Any], log: EpisodeLog) -> float:
    kind = r["type"]
    if kind == "required_call":
        best = 0.0
        for call in log.calls(r["tool"]):
            oks = _args_ok(call["args"], r.get("args", {}))
            score = 1.0 if all(oks) else (sum(oks) / len(oks) if r.get("partial") and oks else 0.0)
            best = max(best, score)
        return best
    if kind == "forbidden_call":
        bad = [c for c in log.calls(r["tool"], include_errors=bool(r.get("count_errors"))) if all(_args_ok(c["args"], r.get("args", {})))]
        return 0.0 if bad else 1.0
    if kind == "db":
        path = r["path"] if isinstance(r["path"], list) else r["path"].split(".")
        try:
            cur: Any = log.final_db
            for part in path:
                cur = cur[part] if isinstance(cur, dict) else lookup(cur, part)
        except (KeyError, TemplateError, TypeError):
            return 0.0
        return 1.0 if matches(cur, r["match"]) else 0.0
    if kind == "no_mutation":
        return 1.0 if log.initial_db == log.final_db else 0.0
    if kind == "no_collateral":
        changed: list[tuple[str, ...]] = []
        _changed_paths(log.initial_db, log.final_db, (), changed)
        allow = [tuple(p) for p in r.get("allow", [])]
        return 0.0 if any(not any(c[: len(a)] == a for a in allow) for c in changed) else 1.0
    if kind == "refusal":
        phrases = r.get("phrases", REFUSAL_PHRASES)
        text = log.agent_text()
        said = any(normalize_text(p) in text for p in phrases)
        return 1.0 if said and log.initial_db == log.final_db else 0.0
    if kind == "communicated":
        text = log.agent_text()
        if "any_of" in r and not any(normalize_text(str(p)) in text for p in r["any_of"]):
            return 0.0
        if "all_of" in r:
            hits = [normalize_text(str(p)) in text for p in r["all_of"]]
            return sum(hits) / len(hits)
        return 1.0
    if kind == "ordering":
        a, b = _first_index(log, r["first"]), _first_index(log, r["then"])
        if b is None:
            return float(r.get("if_missing", 0.0))
        return 1.0 if a is not None and a < b else 0.0
    raise ValueError(f"unknown reward type {kind!r}")


def evaluate_rewards(rewards: list[dict[str, Any]], log: EpisodeLog) -> tuple[float, dict[str, Any]]:
    """Total reward and ``{"components", "weights", "gates", ...}`` for ``info["reward_info"]``."""
    components: dict[str, float] = {}
    weights: dict[str, float] = {}
    gates: list[str] = []
    for j, r in enumerate(rewards):
        name = r.get("name") or f"{r['type']}_{j}"
        try:
            components[name] = _component(r, log)
        except (TypeError, AttributeError, KeyError, ValueError, IndexError):
            components[name] = 0.0  # a check whose rendered parameters have the wrong shape is not met
        if r.get("gate"):
            gates.append(name)
        else:
            weights[name] = float(r.get("weight", 1.0))
    total_w = sum(weights.values())
    mean = sum(components[n] * w for n, w in weights.items()) / total_w if total_w else 1.0
    gate = 1.0
    for n in gates:
        gate *= components[n]
    reward = max(0.0, min(1.0, gate * mean))
    return reward, {"components": components, "weights": weights, "gates": gates, "reward": reward}
