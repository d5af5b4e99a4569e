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

A case's templates and ``where`` paths are parsed on its first use and kept with its spec
(a spec is not changed once environments use it), so a reset only fills them in.
"""

from __future__ import annotations

import random
import weakref
from dataclasses import dataclass, field
from typing import Any

from .matchers import where_getters, where_holds, where_matches
from .spec import CapabilitySpec, resolve_number
from .synthdb.clone import clone_record
from .templating import TemplateError, compile_template, lookup, path_getter

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


class _Slot:
    """One slot of a case, parsed once: its templates compiled and its paths split."""

    __slots__ = ("name", "slot", "frm", "fill_from", "where", "fill_where", "getters", "distinct", "pick", "by")

    def __init__(self, name: str, slot: dict[str, Any]):
        self.name = name
        self.slot = slot
        self.frm = slot["from"]
        self.fill_from = compile_template(self.frm)
        self.where = slot.get("where", {})
        self.fill_where = compile_template(self.where)
        # a literal mapping's keys are never rendered: split its paths now (else match the slow way)
        self.getters = where_getters(list(self.where)) if isinstance(self.where, dict) else None
        self.distinct = slot.get("distinct_from", [])
        self.pick = slot.get("pick", "random")
        self.by = path_getter(slot["by"]) if self.pick in ("min", "max") and isinstance(slot.get("by"), str) else None

    def candidates(self, db: dict[str, Any], ctx: dict[str, Any]) -> list[Any]:
        frm = self.frm
        pool = db[frm] if frm in db else self.fill_from(ctx)
        if isinstance(pool, dict):
            pool = list(pool.values())
        if not isinstance(pool, list):
            raise TemplateError(f"'from' {frm!r} is a {type(pool).__name__}, not a list or mapping")
        return pool

    def key(self, record: Any) -> Any:
        if self.by is None:
            return _key(record, self.slot["by"])
        try:
            return self.by(record)
        except TemplateError:
            return float("inf")


class _CompiledCase:
    """A case's templates parsed once per spec (the spec is not changed after loading)."""

    def __init__(self, spec: CapabilitySpec, case: dict[str, Any]):
        self.case = case
        self.slots = [_Slot(name, slot) for name, slot in case["slots"].items()]
        self.distractors = [(d, compile_template(d.get("set", {}))) for d in case.get("distractors", [])]
        self.user = compile_template(_merge_user(spec.data.get("user", {}), case.get("user", {})))
        hint_src = case.get("hint", (spec.data.get("hint") or {}).get("text"))
        self.hint = compile_template(hint_src) if hint_src else None
        self.opening = compile_template(case["opening"])
        self.reference = compile_template(case["reference"])
        self.rewards = compile_template(case["rewards"])
        self.unauthorized = compile_template(case.get("unauthorized", []))


# id(spec) -> (weak reference to the spec, {id(case): compiled case}); an entry goes with its spec
_COMPILED: dict[int, tuple[weakref.ref[CapabilitySpec], dict[int, _CompiledCase]]] = {}


def _compiled(spec: CapabilitySpec, case: dict[str, Any]) -> _CompiledCase:
    key = id(spec)
    entry = _COMPILED.get(key)
    if entry is None or entry[0]() is not spec:
        def forget(_ref: Any, key: int = key) -> None:
            current = _COMPILED.get(key)
            if current is not None and current[0] is _ref:
                del _COMPILED[key]

        entry = _COMPILED[key] = (weakref.ref(spec, forget), {})
    cases = entry[1]
    cc = cases.get(id(case))
    if cc is None or cc.case is not case:
        cc = cases[id(case)] = _CompiledCase(spec, case)
    return cc


def bind_scenario(spec: CapabilitySpec, case: dict[str, Any], db: dict[str, Any], knobs: dict[str, float],
                  rng: random.Random, seed: int | None) -> Scenario:
    """Bind the case's slots against ``db`` and render everything that depends on them."""
    ctx: dict[str, Any] = {"knobs": dict(knobs), "now": NOW}
    where_txt = f"{spec.env_id} (spec {spec.source}): seed {seed}: case {case['name']!r}"
    try:
        cc = _compiled(spec, case)
        for s in cc.slots:
            where = s.fill_where(ctx)
            others = [ctx[d] for d in s.distinct]
            pool = s.candidates(db, ctx)
            if s.getters is not None:
                matchers = list(where.values())
                getters = s.getters
                found = [c for c in pool if where_holds(c, getters, matchers) and all(c is not o and c != o for o in others)]
            else:
                found = [c for c in pool if where_matches(c, where) and all(c is not o and c != o for o in others)]
            if not found:
                raise UnsolvableScenarioError(
                    f"{where_txt}: slot {s.name!r} has no candidate in {s.frm!r} matching {where}"
                    + (f" and distinct from {s.distinct}" if others else "") + "; the task would have no reference solution"
                )
            pick = s.pick
            if pick == "first":
                ctx[s.name] = found[0]
            elif pick in ("min", "max"):
                keys = [s.key(c) for c in found]
                best = min(keys) if pick == "min" else max(keys)
                ctx[s.name] = found[keys.index(best)]
            else:
                ctx[s.name] = found[int(rng.random() * len(found))]
        for d, fill_set in cc.distractors:
            count = int(resolve_number(d.get("count", 1), knobs))
            changes = fill_set(ctx)
            for _ in range(count):
                rec = clone_record(db, spec.domain, d["table"], ctx[d["like"]], rng)
                for path, value in changes.items():
                    _assign(rec, path, value)
        return Scenario(
            case=case,
            slots={k: v for k, v in ctx.items() if k not in ("knobs", "now")},
            opening=cc.opening(ctx),
            reference=cc.reference(ctx),
            rewards=cc.rewards(ctx),
            user=cc.user(ctx),
            hint=cc.hint(ctx) if cc.hint is not None else None,
            unauthorized=cc.unauthorized(ctx),
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
