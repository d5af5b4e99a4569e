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
from collections.abc import Callable
from typing import Any

__all__ = ["TemplateError", "render", "compile_template", "lookup", "path_getter", "placeholders", "FILTERS"]

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


def path_getter(path: str) -> Callable[[Any], Any]:
    """``lookup`` with the path split once: returns ``get(ctx)``, same results and errors."""
    parts = path.split(".")
    if len(parts) == 1:
        part = parts[0]

        def get_one(ctx: Any) -> Any:
            if isinstance(ctx, dict) and part in ctx:
                return ctx[part]
            return lookup(ctx, path)  # list index or missing: the general walk (same value or error)

        return get_one

    def get(ctx: Any) -> Any:
        cur = ctx
        for part in parts:
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            else:
                return lookup(ctx, path)  # anything but a plain dict step: the general walk
        return cur

    return get


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


def _filtered(value: Any, filters: list[str], path: str) -> Any:
    """``value`` through each filter in turn; a failing filter is a :class:`TemplateError` naming it."""
    for f in filters:
        try:
            value = _apply(value, f)
        except TemplateError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise TemplateError(f"filter {f.strip()!r} cannot apply to {type(value).__name__} at {path!r}: {exc}") from None
    return value


def _resolve(ctx: dict[str, Any], expr: str) -> Any:
    path, *filters = expr.split("|")
    return _filtered(lookup(ctx, path.strip()), filters, path.strip())


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
            return _as_text(_resolve(ctx, mm.group(1)))

        return _PH.sub(sub, value)
    if isinstance(value, list):
        return [render(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: render(v, ctx) for k, v in value.items()}
    return value


def _compile_expr(expr: str) -> Callable[[dict[str, Any]], Any]:
    """``_resolve(ctx, expr)`` with the expression parsed once."""
    path, *filters = expr.split("|")
    path = path.strip()
    get = path_getter(path)
    if not filters:
        return get

    def resolve(ctx: dict[str, Any]) -> Any:
        return _filtered(get(ctx), filters, path)

    return resolve


def _as_text(v: Any) -> str:
    return v if isinstance(v, str) else (", ".join(map(str, v)) if isinstance(v, list) else str(v))


_NO_VALUE = object()


def _compile(value: Any) -> tuple[Callable[[dict[str, Any]], Any], Any]:
    """``(fill, constant)``: ``constant`` is the rendered value when it is a scalar that no
    placeholder touches (else ``_NO_VALUE``); containers always get a ``fill`` that builds them anew."""
    if isinstance(value, str):
        m = _WHOLE.match(value)
        if m:
            return _compile_expr(m.group(1)), _NO_VALUE
        pieces: list[str | Callable[[dict[str, Any]], Any]] = []
        pos = 0
        for mm in _PH.finditer(value):
            pieces.append(value[pos:mm.start()])
            tok = mm.group(0)
            pieces.append("{" if tok == "{{" else "}" if tok == "}}" else _compile_expr(mm.group(1)))
            pos = mm.end()
        pieces.append(value[pos:])
        merged: list[str | Callable[[dict[str, Any]], Any]] = []
        for piece in pieces:
            if isinstance(piece, str) and merged and isinstance(merged[-1], str):
                merged[-1] += piece
            elif piece != "":
                merged.append(piece)
        if all(isinstance(piece, str) for piece in merged):
            text = "".join(merged)  # type: ignore[arg-type]
            return (lambda ctx: text), text
        if len(merged) == 1:
            only = merged[0]
            return (lambda ctx: _as_text(only(ctx))), _NO_VALUE  # type: ignore[operator]
        parts = [(piece, None) if isinstance(piece, str) else ("", piece) for piece in merged]
        return (lambda ctx: "".join(lit if fn is None else _as_text(fn(ctx)) for lit, fn in parts)), _NO_VALUE
    if isinstance(value, (list, dict)):
        keys = range(len(value)) if isinstance(value, list) else list(value)
        children = [_compile(v) for v in (value if isinstance(value, list) else value.values())]
        # constants are copied in one go; everything else is filled in, in the original order
        base = [c if c is not _NO_VALUE else None for _, c in children]
        dynamic = [(k, f) for k, (f, c) in zip(keys, children, strict=True) if c is _NO_VALUE]
        if isinstance(value, list):
            if not dynamic:
                return (lambda ctx: list(base)), _NO_VALUE

            def fill_list(ctx: dict[str, Any]) -> list[Any]:
                out = list(base)
                for i, f in dynamic:
                    out[i] = f(ctx)
                return out

            return fill_list, _NO_VALUE
        template = dict(zip(keys, base, strict=True))
        if not dynamic:
            return (lambda ctx: dict(template)), _NO_VALUE

        def fill_dict(ctx: dict[str, Any]) -> dict[Any, Any]:
            out = dict(template)
            for k, f in dynamic:
                out[k] = f(ctx)
            return out

        return fill_dict, _NO_VALUE
    return (lambda ctx: value), value


def compile_template(value: Any) -> Callable[[dict[str, Any]], Any]:
    """Parse ``value`` once; the returned ``fill(ctx)`` equals ``render(value, ctx)`` (same result,
    same errors, placeholders resolved in the same order) and, like it, builds fresh lists and
    dicts on every call.  ``value`` must not be changed afterwards."""
    return _compile(value)[0]


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
