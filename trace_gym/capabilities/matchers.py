"""Value matchers shared by slot constraints and reward checks.

A matcher is a plain value (equality) or a mapping of operators, all of which must hold:
``eq ne in not_in gt ge lt le startswith endswith contains icontains len exists all any
set_eq approx phone_eq time_near similar_to not``.  ``all``/``any`` take a ``where`` mapping applied to each list element;
``len`` takes a matcher for the length; ``set_eq`` compares lists as multisets;
``approx`` compares numbers to within 0.01; ``phone_eq`` compares phone numbers in E.164,
``time_near`` timestamps (numbers or ISO 8601) to within a minute and ``similar_to`` texts by
ROUGE-L F (at least 0.5), after canonicalising both sides (:mod:`.canonical`); ``not`` holds
when its matcher does not (the field must be present).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from .templating import TemplateError, lookup, path_getter

__all__ = ["OPERATORS", "matches", "where_matches", "where_getters", "where_holds", "where_filter", "matcher_problem"]

OPERATORS = ("eq", "ne", "in", "not_in", "gt", "ge", "lt", "le", "startswith", "endswith", "contains", "icontains",
             "len", "exists", "all", "any", "set_eq", "approx", "phone_eq", "time_near", "similar_to", "not")
# Canonicalising operators (see :mod:`.canonical`): phone numbers equal in E.164, timestamps
# (numbers or ISO 8601) within TIME_TOLERANCE_S, texts with ROUGE-L F of at least SIMILAR_MIN.
_CANONICAL: dict[str, Callable[[Any, Any], bool]] = {}


def _canonical(op: str, value: Any, arg: Any) -> bool:
    if not _CANONICAL:
        from .canonical import SIMILAR_MIN, TIME_TOLERANCE_S, canonical_phone, text_similarity, timestamp_of

        def near(v: Any, a: Any) -> bool:
            tv, ta = timestamp_of(v), timestamp_of(a)
            return tv is not None and ta is not None and abs(tv - ta) <= TIME_TOLERANCE_S

        _CANONICAL.update({
            "phone_eq": lambda v, a: canonical_phone(v) is not None and canonical_phone(v) == canonical_phone(a),
            "time_near": near,
            "similar_to": lambda v, a: text_similarity(a, v) >= SIMILAR_MIN,
        })
    return _CANONICAL[op](value, arg)

_MISSING = object()


def _hashable(v: Any) -> Any:
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def _cmp(op: str, value: Any, arg: Any) -> bool:
    try:
        if op == "gt":
            return value > arg
        if op == "ge":
            return value >= arg
        if op == "lt":
            return value < arg
        return value <= arg
    except TypeError:
        return False


def _is_operator_map(m: Any) -> bool:
    return isinstance(m, dict) and bool(m) and all(k in OPERATORS for k in m)


def matches(value: Any, matcher: Any) -> bool:
    """Whether ``value`` satisfies ``matcher`` (``value`` is ``_MISSING`` for an absent field).

    An operator given an argument of the wrong shape (``in: 3``) is simply not satisfied.
    """
    try:
        return _matches(value, matcher)
    except (TypeError, AttributeError, ValueError, KeyError, IndexError, RecursionError):
        return False


def _matches(value: Any, matcher: Any) -> bool:
    if not _is_operator_map(matcher):
        return value is not _MISSING and value == matcher
    for op, arg in matcher.items():
        if op == "exists":
            if (value is not _MISSING) != bool(arg):
                return False
            continue
        if value is _MISSING:
            return False
        if op == "eq" and value != arg:
            return False
        if op == "ne" and value == arg:
            return False
        if op == "in" and value not in arg:
            return False
        if op == "not_in" and value in arg:
            return False
        if op in ("gt", "ge", "lt", "le") and not _cmp(op, value, arg):
            return False
        if op == "startswith" and not (isinstance(value, str) and value.startswith(arg)):
            return False
        if op == "endswith" and not (isinstance(value, str) and value.endswith(arg)):
            return False
        if op == "contains" and not (isinstance(value, (str, list, dict)) and arg in value):
            return False
        if op == "icontains" and not (isinstance(value, str) and str(arg).lower() in value.lower()):
            return False
        if op == "len" and not (hasattr(value, "__len__") and matches(len(value), arg)):
            return False
        if op == "all" and not (isinstance(value, list) and all(where_matches(v, arg) for v in value)):
            return False
        if op == "any" and not (isinstance(value, list) and any(where_matches(v, arg) for v in value)):
            return False
        if op == "set_eq" and not (isinstance(value, list) and isinstance(arg, list)
                                   and Counter(map(_hashable, value)) == Counter(map(_hashable, arg))):
            return False
        if op in ("phone_eq", "time_near", "similar_to") and not _canonical(op, value, arg):
            return False
        if op == "not" and matches(value, arg):
            return False
        if op == "approx":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                try:
                    value = float(str(value).replace("$", "").replace(",", ""))
                except ValueError:
                    return False
            if abs(value - float(arg)) > 0.01:
                return False
    return True


def where_matches(record: Any, where: dict[str, Any]) -> bool:
    """Whether every ``path: matcher`` of ``where`` holds on ``record`` (a non-mapping ``where`` never holds)."""
    if not isinstance(where, dict):
        return False
    for path, m in where.items():
        if not isinstance(path, str):
            return False
        try:
            value = lookup(record, path) if path != "." else record
        except TemplateError:
            value = _MISSING
        if not matches(value, m):
            return False
    return True


def _whole(record: Any) -> Any:
    return record


WhereCheck = tuple["str | None", Callable[[Any], Any]]


def where_getters(paths: list[Any]) -> list[WhereCheck] | None:
    """Path readers for the keys of a ``where`` mapping, split once (``None`` when a key is not
    a string: such a ``where`` never holds, and :func:`where_matches` says so).  Each is
    ``(key, get)``: ``key`` is set for a one-part path, read straight from a dict record."""
    if not all(isinstance(p, str) for p in paths):
        return None
    return [(None, _whole) if p == "." else (p if "." not in p else None, path_getter(p)) for p in paths]


def where_holds(record: Any, getters: list[WhereCheck], matchers: list[Any]) -> bool:
    """:func:`where_matches` with the paths already split by :func:`where_getters`."""
    plain = type(record) is dict
    for (key, get), m in zip(getters, matchers, strict=True):
        if key is not None and plain:
            value = record.get(key, _MISSING)  # a missing field is what lookup reports as absent
        else:
            try:
                value = get(record)
            except TemplateError:
                value = _MISSING
        if type(m) is str:  # a plain text: equality (what matches() decides for it)
            if type(value) is not str or value != m:
                if value is _MISSING or type(value) is str or not matches(value, m):
                    return False
        elif not matches(value, m):
            return False
    return True


def where_filter(records: list[Any], getters: list[WhereCheck], matchers: list[Any]) -> list[Any]:
    """The records on which :func:`where_holds` holds, in order.

    When every path is one field and no matcher is a mapping (the usual slot constraint:
    ``{user_id: "...", status: delivered}``), each check is the equality :func:`matches`
    decides for such a matcher, read straight from a dict record.
    """
    if any(key is None for key, _ in getters) or any(isinstance(m, dict) for m in matchers):
        return [r for r in records if where_holds(r, getters, matchers)]
    missing = _MISSING
    if len(getters) == 1:
        key, m = getters[0][0], matchers[0]
        return [r for r in records if (r.get(key, missing) == m if type(r) is dict else where_holds(r, getters, matchers))]
    if len(getters) == 2:
        (k1, _), (k2, _) = getters
        m1, m2 = matchers
        return [r for r in records if (r.get(k1, missing) == m1 and r.get(k2, missing) == m2 if type(r) is dict
                                       else where_holds(r, getters, matchers))]
    pairs = [(key, m) for (key, _), m in zip(getters, matchers, strict=True)]
    return [r for r in records if (all(r.get(k, missing) == m for k, m in pairs) if type(r) is dict
                                   else where_holds(r, getters, matchers))]


_ARG_TYPES: dict[str, tuple[type, ...]] = {
    "in": (list,), "not_in": (list,), "startswith": (str,), "endswith": (str,), "icontains": (str,), "all": (dict,),
    "any": (dict,), "set_eq": (list,), "exists": (bool,), "approx": (int, float),
    "phone_eq": (str,), "time_near": (int, float, str), "similar_to": (str,),
}


def matcher_problem(matcher: Any) -> str | None:
    """What is wrong with a matcher as written in a spec (placeholders are not checked), or None.

    A mapping written as a matcher must be a mapping of operators: an unknown key is almost
    always a misspelt operator, which would otherwise silently compare for equality and
    never match.  Equality with a mapping is written ``{eq: {...}}``.
    """
    if isinstance(matcher, dict) and matcher and not _is_operator_map(matcher):
        unknown = sorted(str(k) for k in matcher if k not in OPERATORS)
        return (f"unknown operator{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; expected one of "
                f"{', '.join(OPERATORS)} (to compare with a mapping, write {{eq: {{...}}}})")
    if not _is_operator_map(matcher):
        return None
    for op, arg in matcher.items():
        if isinstance(arg, str) and arg.startswith("{") and arg.endswith("}"):
            continue
        want = _ARG_TYPES.get(op)
        if want and (not isinstance(arg, want) or (op == "approx" and isinstance(arg, bool))):
            return f"operator {op!r} takes a {' or '.join(t.__name__ for t in want)}, got {type(arg).__name__}"
        if op in ("all", "any") and isinstance(arg, dict):
            for sub in arg.values():
                problem = matcher_problem(sub)
                if problem:
                    return problem
        if op in ("len", "not"):
            problem = matcher_problem(arg)
            if problem:
                return problem
    return None
