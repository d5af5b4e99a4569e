"""A validated capability spec (:class:`CapabilitySpec`) and its knob-resolved numbers.

What loading a spec yields (:func:`trace_gym.capabilities.spec.load_spec`), apart from the
loader, so that the code that binds and plays specs does not depend on the domain registry
the loader asks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CapabilitySpec", "resolve_number"]


@dataclass
class CapabilitySpec:
    """A validated spec; ``data`` is the parsed document, ``source`` the file it came from."""

    data: dict[str, Any]
    source: str = "<spec>"
    tool_names: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def domain(self) -> str:
        return self.data["domain"]

    @property
    def env_id(self) -> str:
        return f"trace/{self.id}-v0"

    @property
    def floor(self) -> float:
        return float(self.data.get("floor", 0.5))

    @property
    def cases(self) -> list[dict[str, Any]]:
        return self.data["cases"]

    def knobs(self, overrides: dict[str, float] | None = None) -> dict[str, float]:
        """Knob values: the spec's defaults with ``overrides`` applied (range-checked)."""
        decl = self.data.get("difficulty", {})
        values: dict[str, float] = {}
        for name, k in decl.items():
            values[name] = int(k["default"]) if k.get("type") == "int" else k["default"]
        for name, v in (overrides or {}).items():
            if name not in decl:
                raise ValueError(f"{self.env_id}: unknown difficulty knob {name!r}; expected one of {sorted(decl)}")
            k = decl[name]
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not (k["min"] <= v <= k["max"]):
                raise ValueError(f"{self.env_id}: knob {name!r} must be a number in [{k['min']}, {k['max']}], got {v!r}")
            values[name] = int(round(v)) if k.get("type") == "int" else float(v)
        return values

    def with_knob_defaults(self, values: dict[str, float]) -> dict[str, Any]:
        """A copy of the document with new knob defaults (what ``calibrate --tune`` writes)."""
        doc = json.loads(json.dumps(self.data))
        for name, v in values.items():
            doc["difficulty"][name]["default"] = v
        return doc


def resolve_number(value: Any, knobs: dict[str, float]) -> float:
    """A plain number, or a ``{knob: name}`` reference (``complement`` → 1 - v, ``scale`` → v * s)."""
    if isinstance(value, dict):
        v = float(knobs[value["knob"]])
        if value.get("complement"):
            v = 1.0 - v
        return v * float(value.get("scale", 1.0))
    return float(value)
