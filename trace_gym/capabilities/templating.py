"""``{slot.path|filter}`` placeholders in spec values, resolved against the bound slots.

* A string that is exactly one placeholder keeps the value's type (a list stays a list).
* Otherwise placeholders are formatted into the text; ``{{`` and ``}}`` are literal braces.
* Paths are dotted; a numeric part indexes a list.  Filters: ``values``, ``keys``, ``len``,
  ``lower``, ``upper``, ``first``, ``last``, ``sorted``, ``money`` (two decimals),
  ``map:FIELD`` (one field of every element), ``sum:FIELD``, ``join`` (comma-separated),
  ``pairs`` (a mapping as ``key: value, key: value``).
* Nothing is evaluated: there are no expressions, only lookups and the fixed filters.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["TemplateError", "render", "lookup", "placeholders", "FILTERS"]

_PH = re.compile(r"\{\{|\}\}|\{([^{}]+)\}")
_WHOLE = re.compile(r"^\{([^{}]+)\}$")
FILTERS = ("values", "keys", "len", "lower", "upper", "first", "last", "sorted", "money", "map", "sum", "join", "pairs")


class TemplateError(ValueError):
    """A placeholder names something that is not there."""


def lookup(ctx: dict[str, Any], path: str) -> Any:
    """Follow a dotted path through dicts and lists."""
    cur: Any = ctx
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            raise TemplateError(f"no value at {path!r} (missing {part!r})")
    return cur


def _apply(value: Any, flt: str) -> Any:
    name, _, arg = flt.partition(":")
    name = name.strip()
    arg = arg.strip()
    if name == "values":
        return list(value.values()) if isinstance(value, dict) else list(value)
    if name == "keys":
        return list(value.keys())
    if name == "len":
        return len(value)
    if name == "lower":
        return str(value).lower()
    if name == "upper":
        return str(value).upper()
    if name == "first":
        return value[0]
    if name == "last":
        return value[-1]
    if name == "sorted":
        return sorted(value)
    if name == "money":
        return f"{float(value):.2f}"
    if name == "map":
        return [lookup(v, arg) for v in value]
    if name == "sum":
        return round(sum(lookup(v, arg) if arg else v for v in value), 2)
    if name == "pairs":
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    if name == "join":
        return ", ".join(str(v) for v in value)
    raise TemplateError(f"unknown filter {name!r}; expected one of {list(FILTERS)}")


def _resolve(ctx: dict[str, Any], expr: str) -> Any:
    path, *filters = expr.split("|")
    value = lookup(ctx, path.strip())
    for f in filters:
        try:
            value = _apply(value, f)
        except TemplateError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise TemplateError(f"filter {f.strip()!r} cannot apply to {type(value).__name__} at {path.strip()!r}: {exc}") from None
    return value


def render(value: Any, ctx: dict[str, Any]) -> Any:
    """Resolve every placeholder inside ``value`` (strings, lists and dicts, recursively)."""
    if isinstance(value, str):
        m = _WHOLE.match(value)
        if m:
            return _resolve(ctx, m.group(1))

        def sub(mm: re.Match[str]) -> str:
            tok = mm.group(0)
            if tok == "{{":
                return "{"
            if tok == "}}":
                return "}"
            v = _resolve(ctx, mm.group(1))
            return v if isinstance(v, str) else (", ".join(map(str, v)) if isinstance(v, list) else str(v))

        return _PH.sub(sub, value)
    if isinstance(value, list):
        return [render(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: render(v, ctx) for k, v in value.items()}
    return value


def placeholders(value: Any) -> list[str]:
    """Every placeholder expression inside ``value`` (for load-time checks)."""
    out: list[str] = []
    if isinstance(value, str):
        out.extend(m.group(1) for m in _PH.finditer(value) if m.group(1))
    elif isinstance(value, list):
        for v in value:
            out.extend(placeholders(v))
    elif isinstance(value, dict):
        for v in value.values():
            out.extend(placeholders(v))
    return out
