"""Helpers for domain normalisers: put records in model field order and fill defaults."""

from __future__ import annotations

from typing import Any

__all__ = ["conform", "conform_map"]


def conform(record: Any, fields: dict[str, Any], where: str) -> dict[str, Any]:
    """``record`` with keys in ``fields`` order; missing optional fields get their default.

    ``fields`` maps a field name to its default, or ``...`` when the field is required.
    Unknown keys are dropped (pydantic ignores them).
    """
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected an object, got {type(record).__name__}")
    out: dict[str, Any] = {}
    for name, default in fields.items():
        if name in record:
            out[name] = record[name]
        elif default is ...:
            raise ValueError(f"{where}: field {name!r} is required")
        else:
            out[name] = default
    return out


def conform_map(raw: dict[str, Any], coll: str, fields: dict[str, Any], model: str) -> dict[str, Any]:
    """Apply :func:`conform` to every record of the dict ``raw[coll]``."""
    records = raw.get(coll)
    if not isinstance(records, dict):
        raise ValueError(f"{model}.{coll}: expected an object of records")
    return {k: conform(v, fields, f"{model}.{coll}.{k}") for k, v in records.items()}
