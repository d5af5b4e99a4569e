"""What every ToolSandbox tool shares: the ``NOT_GIVEN`` sentinel, upstream's error types,
argument validators, the table filters of the search tools and the device settings.

Tools are plain functions ``fn(world, kb, **arguments)`` over an injected
:class:`~trace_gym.toolsandbox.world.World` and a
:class:`~trace_gym.toolsandbox.tools.rapidapi.KnowledgeBase`; nothing here holds state.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..world import World

__all__ = [
    "NOT_GIVEN", "NotGiven", "DuplicateError", "NoDataError", "format_exception", "check_type", "get_bool",
    "require_wifi", "current_location", "timestamp_range", "latitude_range", "longitude_range", "check_phone", "exact", "ge", "le",
    "fuzzy", "filter_rows", "Rows",
]

Rows = list[dict[str, Any]]


class NotGiven:
    """Sentinel for "argument not passed" (upstream's ``NOT_GIVEN``)."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "NOT_GIVEN"  # unpickles as the one sentinel


NOT_GIVEN: Any = NotGiven()


class DuplicateError(Exception):
    """Upstream raises polars' ``DuplicateError``; same qualified name in error lines."""


class NoDataError(Exception):
    """Upstream raises polars' ``NoDataError``; same qualified name in error lines."""


DuplicateError.__module__ = "polars.exceptions"
NoDataError.__module__ = "polars.exceptions"


def format_exception(exc: BaseException) -> str:
    """The last line of the traceback Python would print for ``exc``."""
    lines = traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip().split("\n")[-1]


def _expected_repr(ann: str) -> str:
    if ann in ("str", "int", "float", "bool"):
        return f"<class '{ann}'>"
    return f"typing.{ann}"


def check_type(value: Any, name: str, annotation: str, allowed: frozenset[type]) -> None:
    """Upstream's run-time type check (typeguard's rules for these annotations, its message)."""
    if object in allowed or type(value) in allowed:
        return
    if isinstance(value, int) and float in allowed:
        return
    if isinstance(value, bool) and (int in allowed or float in allowed):
        return
    raise TypeError(f"Parameter '{name}' is of type '{type(value)}', but expected '{_expected_repr(annotation)}'.")


# ---------------------------------------------------------------------------- settings
def get_bool(world: World, name: str) -> bool:
    return bool(world.setting(name))


def require_wifi(world: World) -> None:
    """The precondition of every web-backed tool."""
    if not get_bool(world, "wifi"):
        raise ConnectionError("Wifi is not enabled")


def current_location(world: World) -> dict[str, float]:
    """The device's location (``PermissionError`` while location service is off)."""
    if not get_bool(world, "location_service"):
        raise PermissionError("Location service is not enabled.")
    return {"latitude": world.setting("latitude"), "longitude": world.setting("longitude")}


# ---------------------------------------------------------------------------- validators
_TS_MIN, _TS_MAX = 315529200.0, 2524604400.0


def _range(value: Any, name: str, lo: float, hi: float) -> None:
    if isinstance(value, (int, float)):
        if value < lo:
            raise ValueError(f"Parameter '{name}' is smaller than its valid range minimum of {lo}.")
        if value > hi:
            raise ValueError(f"Parameter '{name}' is larger than its valid range maximum of {hi}.")


def timestamp_range(value: Any, name: str) -> None:
    _range(value, name, _TS_MIN, _TS_MAX)


def latitude_range(value: Any, name: str) -> None:
    _range(value, name, -90.0, 90.0)


def longitude_range(value: Any, name: str) -> None:
    _range(value, name, -180.0, 180.0)


def check_phone(value: Any) -> None:
    if value is NOT_GIVEN:
        return
    if type(value) is str:
        if not _NANP_E164.fullmatch(value):  # +1 and ten digits always parse
            _parse_phone(value)  # a text that parsed once parses again: remembered
        return
    import phonenumbers

    phonenumbers.parse(value)


_NANP_E164 = re.compile(r"\+1[2-9][0-9]{9}")


@lru_cache(maxsize=1024)
def _parse_phone(value: str) -> None:
    import phonenumbers

    phonenumbers.parse(value)


# ---------------------------------------------------------------------------- table filters
Filter = Callable[[Rows, str, Any], Rows]


def exact(rows: Rows, col: str, value: Any) -> Rows:
    if value is None:
        return []
    return [r for r in rows if r[col] is not None and r[col] == value]


def ge(rows: Rows, col: str, value: Any) -> Rows:
    return [r for r in rows if r[col] is not None and r[col] >= value]


def le(rows: Rows, col: str, value: Any) -> Rows:
    return [r for r in rows if r[col] is not None and r[col] <= value]


def fuzzy(threshold: int) -> Filter:
    """Rows whose ``col`` matches ``value`` with rapidfuzz ``WRatio`` at least ``threshold``, best first."""

    def match(rows: Rows, col: str, value: Any) -> Rows:
        from rapidfuzz import fuzz, process
        from rapidfuzz import utils as fuzz_utils

        choices = [r[col] for r in rows]
        found = process.extract(
            value, choices, processor=fuzz_utils.default_process, scorer=fuzz.WRatio, score_cutoff=threshold
        )
        return [rows[m[-1]] for m in found]

    return match


def filter_rows(rows: Rows, criteria: list[tuple[str, Any, Filter]]) -> Rows:
    """Apply every given criterion in order; at least one must be given (upstream's message)."""
    if all(v is NOT_GIVEN for _, v, _ in criteria):
        names = tuple(c for c, _, _ in criteria)
        raise ValueError(
            "No search criteria are given. At least one search criteria should be provided among " f"{names}"
        )
    for col, value, method in criteria:
        if value is not NOT_GIVEN:
            rows = method(rows, col, value)
    return [dict(r) for r in rows]
