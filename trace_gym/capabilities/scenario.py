"""Seeded scenarios: pick a case, bind its slots to records of the synthetic database.

Slots are bound in declaration order.  Each draws from a database table or from a list
or mapping reached through an earlier slot, keeps the candidates that satisfy its
``where`` constraints (and differ from the slots named in ``distinct_from``), and picks
one (at random from the seeded generator, or the first/min/max).  Then the case's
``distractors`` add near-miss copies of bound records (fresh ids, some fields changed)
to the database, so that matching on the wrong detail picks the wrong record.  Everything else in
the case — the opening message, the user's lines, the hint, the reference solution,
the reward checks and the probes — is then rendered from the bound slots.

A random pick that leaves a later slot without a candidate (a user with no delivered
order holding a coloured item, say) is not final: binding backs up and tries the slot's
other candidates, in a seeded order, before giving up; ``first``/``min``/``max`` picks
mean that record and are never replaced.  The first try consumes the generator exactly
as a plain left-to-right binding does, so a seed that binds without backing up gives the
same scenario either way.  When no combination binds (within :data:`MAX_BINDING_TRIES`
tries) the case has no reference solution on this seed's database; a drawn case then
gives way to the spec's other cases (``other_cases``), and only when none binds is the
seed unsolvable: :class:`UnsolvableScenarioError` names the seed, the case and the first
slot that failed.

A case's templates and ``where`` paths are parsed on its first use and kept with its spec
(a spec is not changed once environments use it), so a reset only fills them in.
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .matchers import where_filter, where_getters, where_matches
from .spec_doc import CapabilitySpec, resolve_number
from .synthdb.clone import clone_record
from .templating import TemplateError, compile_template, lookup, path_getter

__all__ = ["Scenario", "UnsolvableScenarioError", "choose_case", "bind_scenario", "MAX_BINDING_TRIES"]

MAX_BINDING_TRIES = 256  # slot candidates tried after the first choice before a case is unsolvable

NOW = {"date": "2024-05-15", "datetime": "2024-05-15T15:00:00", "day_ago": "2024-05-14T15:00:00"}


class UnsolvableScenarioError(RuntimeError):
    """The spec generated a task without a reference solution for this seed.

    ``slot``: the slot that has no candidate (``None`` when the case fails as a whole, e.g. a
    placeholder that does not resolve), so that a load-time check can point at it.
    """

    def __init__(self, message: str, *, slot: str | None = None):
        super().__init__(message)
        self.slot = slot


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


class _Search:
    __slots__ = ("tries", "error")

    def __init__(self, tries: int):
        self.tries = tries
        self.error: Exception | None = None


def _found(s: _Slot, db: dict[str, Any], ctx: dict[str, Any], where_txt: str) -> list[Any]:
    """The slot's candidates given the slots bound so far (raises when there is none)."""
    where = s.fill_where(ctx)
    others = [ctx[d] for d in s.distinct]
    pool = s.candidates(db, ctx)
    if s.getters is not None:
        found = where_filter(pool, s.getters, list(where.values())) if where else list(pool)
    else:
        found = [c for c in pool if where_matches(c, where)]
    if others:
        found = [c for c in found if all(c is not o and c != o for o in others)]
    if not found:
        raise UnsolvableScenarioError(
            f"{where_txt}: slot {s.name!r} has no candidate in {s.frm!r} matching {where}"
            + (f" and distinct from {s.distinct}" if others else "") + "; the task would have no reference solution",
            slot=s.name,
        )
    return found


def _choices(s: _Slot, found: list[Any], rng: random.Random) -> Iterator[Any]:
    """The slot's pick, then (for a random pick, only when asked for) the other candidates in a seeded order."""
    pick = s.pick
    if pick == "first":
        yield found[0]
    elif pick in ("min", "max"):
        keys = [s.key(c) for c in found]
        best = min(keys) if pick == "min" else max(keys)
        yield found[keys.index(best)]
    else:
        i = int(rng.random() * len(found))
        yield found[i]
        rest = found[:i] + found[i + 1:]
        yield from rng.sample(rest, len(rest))


def _bind(slots: list[_Slot], k: int, db: dict[str, Any], ctx: dict[str, Any], rng: random.Random, search: _Search,
          where_txt: str) -> bool:
    if k == len(slots):
        return True
    s = slots[k]
    try:
        found = _found(s, db, ctx, where_txt)
    except (UnsolvableScenarioError, TemplateError) as exc:
        if search.error is None:
            search.error = exc
        return False
    for choice in _choices(s, found, rng):
        ctx[s.name] = choice
        if _bind(slots, k + 1, db, ctx, rng, search, where_txt):
            return True
        search.tries -= 1
        if search.tries < 0:
            break
    del ctx[s.name]
    return False


def _bind_case(spec: CapabilitySpec, case: dict[str, Any], db: dict[str, Any], knobs: dict[str, float],
               rng: random.Random, where_txt: str) -> tuple[_CompiledCase, dict[str, Any]]:
    """The case's compiled form and its slots bound (raises :class:`UnsolvableScenarioError` or TemplateError)."""
    cc = _compiled(spec, case)
    ctx: dict[str, Any] = {"knobs": dict(knobs), "now": NOW}
    search = _Search(MAX_BINDING_TRIES)
    if not _bind(cc.slots, 0, db, ctx, rng, search, where_txt):
        raise search.error or UnsolvableScenarioError(f"{where_txt}: no combination of slot values binds")
    return cc, ctx


def bind_scenario(spec: CapabilitySpec, case: dict[str, Any], db: dict[str, Any], knobs: dict[str, float],
                  rng: random.Random, seed: int | None, *, other_cases: bool = False) -> Scenario:
    """Bind the case's slots against ``db`` and render everything that depends on them.

    Raises :class:`UnsolvableScenarioError` (its ``slot`` set where one slot has no candidate)
    when the case cannot be bound on ``db``.

    With ``other_cases`` (the case was drawn, not asked for), a case whose slots cannot be
    bound on this database gives way to the spec's other cases of positive weight, in a
    seeded order; the error names the drawn case when none binds.
    """
    where_txt = f"{spec.env_id} (spec {spec.source}): seed {seed}: case {case['name']!r}"
    try:
        try:
            cc, ctx = _bind_case(spec, case, db, knobs, rng, where_txt)
        except (UnsolvableScenarioError, TemplateError) as first:
            if not other_cases:
                raise
            others = [c for c in spec.cases if c is not case and resolve_number(c.get("weight", 1.0), knobs) > 0]
            for other in rng.sample(others, len(others)):
                try:
                    cc, ctx = _bind_case(spec, other, db, knobs, rng, f"{spec.env_id}: seed {seed}: case {other['name']!r}")
                except (UnsolvableScenarioError, TemplateError):
                    continue
                case = other
                break
            else:
                raise first from None
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
