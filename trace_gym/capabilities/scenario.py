"""Seeded scenarios: pick a case, bind its slots to records of the synthetic database.

Slots are bound in declaration order.  Each draws from a database table or from a list
or mapping reached through an earlier slot, keeps the candidates that satisfy its
``where`` constraints (and differ from the slots named in ``distinct_from``), and picks
one (at random from the seeded generator, or the first/min/max).  Then the case's
``distractors`` add near-miss copies of bound records (fresh ids, some fields changed)
to the database, so that matching on the wrong detail picks the wrong record.  Everything else in
the case — the opening message, the user's lines, the hint, the reference solution,
the reward checks and the probes — is then rendered from the bound slots.  A slot with
no candidate means the case has no reference solution for this seed:
:class:`UnsolvableScenarioError` names the seed, the case and the slot.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from .matchers import where_matches
from .spec import CapabilitySpec, resolve_number
from .synthdb.clone import clone_record
from .templating import TemplateError, lookup, render

__all__ = ["Scenario", "UnsolvableScenarioError", "choose_case", "bind_scenario"]

NOW = {"date": "2024-05-15", "datetime": "2024-05-15T15:00:00", "day_ago": "2024-05-14T15:00:00"}


class UnsolvableScenarioError(RuntimeError):
    """The spec generated a task without a reference solution for this seed."""


@dataclass
class Scenario:
    case: dict[str, Any]
    slots: dict[str, Any]
    opening: str
    reference: list[dict[str, Any]]
    rewards: list[dict[str, Any]]
    user: dict[str, Any]
    hint: str | None = None
    unauthorized: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.case["name"]

    @property
    def allowed(self) -> bool:
        return bool(self.case.get("allowed", True))


def choose_case(spec: CapabilitySpec, knobs: dict[str, float], rng: random.Random) -> dict[str, Any]:
    """A case drawn in proportion to its (possibly knob-driven) weight."""
    weights = [max(0.0, resolve_number(c.get("weight", 1.0), knobs)) for c in spec.cases]
    total = sum(weights)
    if total <= 0:
        return spec.cases[int(rng.random() * len(spec.cases))]
    x = rng.random() * total
    for case, w in zip(spec.cases, weights, strict=True):
        if x < w:
            return case
        x -= w
    return spec.cases[-1]


def _candidates(db: dict[str, Any], slot: dict[str, Any], ctx: dict[str, Any]) -> list[Any]:
    frm = slot["from"]
    pool = db[frm] if frm in db else render(frm, ctx)
    if isinstance(pool, dict):
        pool = list(pool.values())
    if not isinstance(pool, list):
        raise TemplateError(f"'from' {frm!r} is a {type(pool).__name__}, not a list or mapping")
    return pool


def bind_scenario(spec: CapabilitySpec, case: dict[str, Any], db: dict[str, Any], knobs: dict[str, float],
                  rng: random.Random, seed: int | None) -> Scenario:
    """Bind the case's slots against ``db`` and render everything that depends on them."""
    ctx: dict[str, Any] = {"knobs": dict(knobs), "now": NOW}
    where_txt = f"{spec.env_id} (spec {spec.source}): seed {seed}: case {case['name']!r}"
    try:
        for name, slot in case["slots"].items():
            where = render(slot.get("where", {}), ctx)
            others = [ctx[d] for d in slot.get("distinct_from", [])]
            found = [c for c in _candidates(db, slot, ctx) if where_matches(c, where) and all(c is not o and c != o for o in others)]
            if not found:
                raise UnsolvableScenarioError(
                    f"{where_txt}: slot {name!r} has no candidate in {slot['from']!r} matching {where}"
                    + (f" and distinct from {slot['distinct_from']}" if others else "") + "; the task would have no reference solution"
                )
            pick = slot.get("pick", "random")
            if pick == "first":
                ctx[name] = found[0]
            elif pick in ("min", "max"):
                keys = [_key(c, slot["by"]) for c in found]
                best = min(keys) if pick == "min" else max(keys)
                ctx[name] = found[keys.index(best)]
            else:
                ctx[name] = found[int(rng.random() * len(found))]
        for d in case.get("distractors", []):
            count = int(resolve_number(d.get("count", 1), knobs))
            changes = render(d.get("set", {}), ctx)
            for _ in range(count):
                rec = clone_record(db, spec.domain, d["table"], ctx[d["like"]], rng)
                for path, value in changes.items():
                    _assign(rec, path, value)
        user = _merge_user(spec.data.get("user", {}), case.get("user", {}))
        hint_src = case.get("hint", (spec.data.get("hint") or {}).get("text"))
        return Scenario(
            case=case,
            slots={k: v for k, v in ctx.items() if k not in ("knobs", "now")},
            opening=render(case["opening"], ctx),
            reference=render(case["reference"], ctx),
            rewards=render(case["rewards"], ctx),
            user=render(user, ctx),
            hint=render(hint_src, ctx) if hint_src else None,
            unauthorized=render(case.get("unauthorized", []), ctx),
        )
    except TemplateError as exc:
        raise UnsolvableScenarioError(f"{where_txt}: {exc}") from None


def _assign(record: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    cur: Any = record
    try:
        for part in parts[:-1]:
            cur = cur[int(part)] if isinstance(cur, list) else cur[part]
        if isinstance(cur, list):
            cur[int(parts[-1])] = value
        else:
            cur[parts[-1]] = value
    except (KeyError, IndexError, ValueError, TypeError):
        raise TemplateError(f"distractor field {path!r} does not exist in the copied record") from None


def _key(record: Any, path: str) -> Any:
    try:
        return lookup(record, path)
    except TemplateError:
        return float("inf")


def _merge_user(base: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    merged.update({k: v for k, v in case.items() if k != "rules"})
    merged["rules"] = list(case.get("rules", [])) + list(base.get("rules", []))
    return merged
