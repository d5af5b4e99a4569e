"""The ToolSandbox tool catalogue: ``tools.json`` read once into one :class:`ToolSpec` per tool.

A :class:`ToolSpec` is what the agent sees (the OpenAI schema, upstream's augmented
views) plus what is needed to call the tool like upstream does: the parameters of its
Python signature (annotation, default, whether upstream's run-time type check applies),
which world databases it writes, and who may call it.  :class:`Catalog` holds the specs
in upstream's discovery order and the offline RapidAPI knowledge base.

Malformed data raises :class:`~trace_gym.toolsandbox.data.ScenarioError` naming the file,
the tool and the field, e.g. ``tools.json: tools['add_contact'].defaults.is_self.recorded_in_trace: ...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from trace_gym.data import toolsandbox_data_dir

from .data import Fields, FrozenDict, ScenarioError, freeze
from .tools.common import NOT_GIVEN, NotGiven
from .tools.rapidapi import KnowledgeBase, load_knowledge_base

__all__ = ["Catalog", "Param", "REQUIRED", "ToolSpec", "load_catalog", "parse_catalog"]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"

    def __reduce__(self) -> str:
        return "REQUIRED"  # unpickles as the one sentinel


REQUIRED: Any = _Required()  # the default of a parameter that has none

_TYPE_NAMES: dict[str, type] = {
    "str": str, "int": int, "float": float, "bool": bool, "None": type(None), "NoneType": type(None),
    "tool_sandbox.common.utils.NotGiven": NotGiven,
}

# Tools whose upstream body is not wrapped in the run-time type checker.
_UNCHECKED = frozenset({
    "search_contacts", "get_cellular_service_status", "get_current_location", "get_location_service_status",
    "get_wifi_status", "get_low_battery_mode_status", "set_cellular_service_status", "set_location_service_status",
    "set_low_battery_mode_status", "set_wifi_status", "end_conversation",
})


@dataclass(frozen=True)
class Param:
    """One parameter of a tool's Python signature."""

    name: str
    annotation: str  # as written in upstream's signature
    default: Any  # NOT_GIVEN, a value, or REQUIRED
    allowed: frozenset[type]  # the types the annotation admits (object: anything)

    @property
    def recorded_in_trace(self) -> bool:
        """Whether the default shows in the tool trace when the argument is not passed."""
        return self.default is not NOT_GIVEN


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its agent-facing schema and how to call it like upstream."""

    name: str
    schema: FrozenDict  # the OpenAI function schema
    params: tuple[Param, ...]
    visible_to: tuple[str, ...]
    typechecked: bool
    writes: tuple[str, ...] = ()  # world databases the tool may change
    augmented_views: FrozenDict = field(default_factory=FrozenDict)

    @property
    def description(self) -> str:
        return str(self.schema["function"].get("description", ""))

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")


@dataclass(frozen=True)
class Catalog:
    """``tools.json``: the specs in upstream's discovery order and the RapidAPI model."""

    specs: Mapping[str, ToolSpec]
    kb: KnowledgeBase
    rapidapi: FrozenDict
    upstream_commit: str = ""

    @property
    def discovery_order(self) -> tuple[str, ...]:
        return tuple(self.specs)

    def __getitem__(self, name: str) -> ToolSpec:
        return self.specs[name]


# ---------------------------------------------------------------------------- signatures
def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _allowed_types(ann: str) -> frozenset[type]:
    ann = ann.strip()
    m = re.fullmatch(r"(Optional|Union)\[(.*)\]", ann)
    if m:
        out: set[type] = set()
        for part in _split_top(m.group(2)):
            out |= _allowed_types(part)
        if m.group(1) == "Optional":
            out.add(type(None))
        return frozenset(out)
    return frozenset({_TYPE_NAMES.get(ann, object)})


def _parse_params(f: Fields, signature: str, where: str) -> tuple[Param, ...]:
    if "(" not in signature or ")" not in signature:
        raise f.fail(where, f"not a Python signature: {signature!r:.60}")
    inner = signature[signature.index("(") + 1 : signature.rindex(")")]
    params = []
    for part in _split_top(inner):
        name, _, rest = part.partition(":")
        ann, eq, default_text = rest.partition("=")
        default: Any = REQUIRED
        if eq:
            d = default_text.strip()
            try:
                default = NOT_GIVEN if d == "NOT_GIVEN" else json.loads(
                    {"None": "null", "False": "false", "True": "true"}.get(d, d)
                )
            except json.JSONDecodeError:
                raise f.fail(where, f"cannot read the default of {name.strip()!r}: {d!r:.40}") from None
        params.append(Param(name.strip(), ann.strip(), default, _allowed_types(ann)))
    return tuple(params)


# ---------------------------------------------------------------------------- tools.json
def _parse_tool(f: Fields, obj: Any, where: str) -> ToolSpec:
    name = f.get(obj, "name", f"{where}.name", str)
    where = f"tools[{name!r}]"
    schema = f.get(obj, "openai_schema", f"{where}.openai_schema", dict)
    fn = f.get(schema, "function", f"{where}.openai_schema.function", dict)
    if fn.get("name") != name:
        raise f.fail(f"{where}.openai_schema.function.name", f"is {fn.get('name')!r}, expected {name!r}")
    params = _parse_params(f, f.get(obj, "python_signature", f"{where}.python_signature", str), f"{where}.python_signature")
    by_name = {p.name: p for p in params}
    for param, d in (f.get(obj, "defaults", f"{where}.defaults", dict, optional=True) or {}).items():
        recorded = f.get(d, "recorded_in_trace", f"{where}.defaults.{param}.recorded_in_trace", bool)
        p = by_name.get(param)
        if p is None or p.default is REQUIRED:
            raise f.fail(f"{where}.defaults.{param}", "the signature has no such optional parameter")
        if recorded != p.recorded_in_trace:
            raise f.fail(f"{where}.defaults.{param}.recorded_in_trace", f"is {recorded}, the signature says otherwise")
    return ToolSpec(
        name=name,
        schema=freeze(schema),
        params=params,
        visible_to=f.strings(obj, "visible_to", f"{where}.visible_to", optional=True) or ("AGENT",),
        typechecked=name not in _UNCHECKED,
        writes=f.strings(obj, "writes", f"{where}.writes", optional=True) or (),
        augmented_views=freeze(f.get(obj, "augmented_views", f"{where}.augmented_views", dict, optional=True) or {}),
    )


def parse_catalog(obj: Any, where: str = "tools.json") -> Catalog:
    """Build a :class:`Catalog` from decoded ``tools.json`` data; ``where`` prefixes error messages."""
    f = Fields(where)
    if not isinstance(obj, Mapping):
        raise ScenarioError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    order = f.strings(obj, "discovery_order", "discovery_order") or ()
    tools: dict[str, ToolSpec] = {}
    for i, t in enumerate(f.get(obj, "tools", "tools", list)):
        spec = _parse_tool(f, t, f"tools[{i}]")
        if spec.name in tools:
            raise f.fail(f"tools[{i}].name", f"duplicate tool {spec.name!r}")
        tools[spec.name] = spec
    unknown = [n for n in order if n not in tools]
    if unknown:
        raise f.fail("discovery_order", f"names tools that are not described: {unknown}")
    rapidapi = f.get(obj, "rapidapi", "rapidapi", dict, optional=True) or {}
    try:
        kb = load_knowledge_base({"rapidapi": rapidapi})
    except (KeyError, TypeError, AttributeError) as exc:
        raise f.fail("rapidapi", f"malformed knowledge base ({type(exc).__name__}: {exc})") from None
    return Catalog(
        specs=FrozenDict({n: tools[n] for n in order}),
        kb=kb,
        rapidapi=freeze(rapidapi),
        upstream_commit=f.get(obj, "upstream_commit", "upstream_commit", str, optional=True) or "",
    )


@lru_cache(maxsize=4)
def _load_cached(path: Path) -> Catalog:
    if not path.is_file():
        raise ScenarioError(f"{path}: no such file (the ToolSandbox tool catalogue; see TOOLSANDBOX_DATA_DIR)")
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path.name}: invalid JSON: {exc}") from None
    return parse_catalog(obj, path.name)


def load_catalog(path: str | Path | None = None) -> Catalog:
    """``tools.json`` as a :class:`Catalog` (read once per path, then cached).

    ``path`` defaults to ``<toolsandbox data dir>/tools.json``; a missing data folder raises
    :class:`trace_gym.data.DataDirError`.
    """
    p = Path(path) if path is not None else toolsandbox_data_dir() / "tools.json"
    return _load_cached(p.resolve())
