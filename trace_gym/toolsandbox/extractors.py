"""Running a data-described tool-trace extractor (the ToolSandbox data README, ``shared/toolsandbox/README.md``: "the ten extractors").

An extractor reads values out of one traced call ``{tool_name, arguments, result}``: each output
follows its ``path`` (object keys, or integer positions in lists), optionally casts the value with
Python ``float``/``int``, and the optional ``float_surface_forms`` normalization expands a float
``v`` into ``"{v:.0f}"``, ``"{v:.1f}"``, ``"{v:.2f}"`` and ``"{v:.3f}"``.  A trace where any path is
missing or any cast fails yields no candidate at all, as upstream's callers swallow those errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import product
from typing import Any

from trace_gym.toolsandbox.scenarios import Extractor

__all__ = ["ExtractionFailed", "extract_candidates", "surface_forms"]


class ExtractionFailed(Exception):
    """A path step is missing or a cast failed: this trace yields no candidate."""


def _follow(trace: Any, path: tuple[str | int, ...]) -> Any:
    value = trace
    for step in path:
        if isinstance(value, Mapping):
            if step not in value:
                raise ExtractionFailed(f"missing key {step!r}")
            value = value[step]
        elif isinstance(value, (list, tuple)) and isinstance(step, int) and not isinstance(step, bool):
            if not -len(value) <= step < len(value):
                raise ExtractionFailed(f"index {step} out of range")
            value = value[step]
        else:
            raise ExtractionFailed(f"cannot index {type(value).__name__} with {step!r}")
    return value


def _cast(value: Any, cast: str | None) -> Any:
    if cast is None:
        return value
    if isinstance(value, (dict, list, tuple)) or value is None:
        raise ExtractionFailed(f"cannot cast {type(value).__name__} to {cast}")
    try:
        return float(value) if cast == "float" else int(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ExtractionFailed(str(exc)) from None


def surface_forms(value: Any) -> list[Any]:
    """The ``float_surface_forms`` of a value: four roundings of a float, ``str(value)`` otherwise."""
    if isinstance(value, float):
        return [f"{value:.0f}", f"{value:.1f}", f"{value:.2f}", f"{value:.3f}"]
    return [str(value)]


def extract_candidates(extractor: Extractor, trace: Any) -> list[dict[str, Any]]:
    """The candidate value dicts ``extractor`` yields for one traced call (possibly none)."""
    try:
        values = [(out.key, _cast(_follow(trace, out.path), out.cast)) for out in extractor.outputs]
    except ExtractionFailed:
        return []
    if extractor.normalization == "float_surface_forms":
        keys = [k for k, _ in values]
        return [dict(zip(keys, combo, strict=True)) for combo in product(*(surface_forms(v) for _, v in values))]
    return [dict(values)]
