"""Near-miss distractor records: copies of a scenario's record under fresh ids.

A clone keeps everything the agent might match on (names, items, routes) but gets new
identifiers, so it stays consistent with the rest of the database: a cloned order or
reservation is listed under its owner, a cloned user gets a new id and e-mail.
"""

from __future__ import annotations

import copy
import random
from typing import Any

__all__ = ["clone_record", "CLONABLE"]

CLONABLE = {"retail": ("orders", "users"), "airline": ("reservations", "users"), "telecom": ()}  # telecom: no near-miss copies
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"


_ATOMS = frozenset({str, int, float, bool, type(None)})  # immutable: shared, not copied


def _copy(value: Any) -> Any:
    """A deep copy of a database record (plain dicts, lists and scalars, no shared parts)."""
    t = type(value)
    if t is dict:
        return {k: v if type(v) in _ATOMS else _copy(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _ATOMS else _copy(v) for v in value]
    if isinstance(value, (str, int, float, type(None))):
        return value
    return copy.deepcopy(value)  # anything unusual: the general copy


def _fresh(rng: random.Random, make: Any, taken: dict[str, Any]) -> str:
    while True:
        key = make(rng)
        if key not in taken:
            return key


def clone_record(db: dict[str, Any], domain: str, table: str, record: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Insert a copy of ``record`` into ``db[table]`` under a fresh id and return it."""
    if table not in CLONABLE.get(domain, ()):
        raise ValueError(f"cannot clone {domain} {table}; clonable tables: {list(CLONABLE.get(domain, ()))}")
    rec = _copy(record)
    rows = db[table]
    if table == "users":
        first, last = rec["name"]["first_name"].lower(), rec["name"]["last_name"].lower()
        uid = _fresh(rng, lambda r: f"{first}_{last}_{r.randrange(1000, 9999)}", rows)
        rec["user_id"] = uid
        rec["email"] = f"{first}.{last}{rng.randrange(1000, 9999)}@example.com"
        for key in ("orders", "reservations"):
            if key in rec:
                rec[key] = []
        rows[uid] = rec
        return rec
    if table == "orders":
        oid = _fresh(rng, lambda r: f"#W{r.randrange(1_000_000, 9_999_999)}", rows)
        rec["order_id"] = oid
        rows[oid] = rec
        db["users"][rec["user_id"]]["orders"].append(oid)
        return rec
    rid = _fresh(rng, lambda r: "".join(r.choice(_LETTERS) for _ in range(6)), rows)
    rec["reservation_id"] = rid
    rows[rid] = rec
    db["users"][rec["user_id"]]["reservations"].append(rid)
    return rec
